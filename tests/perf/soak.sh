#!/usr/bin/env bash
# Issue 49, measurement 5: memory over time. Runs the demo's embedded cluster (scripts/start-embedded:
# fitledger-sim with config/sim/pair.yaml, fitledger-server, the --no-ledger server, the shim and
# the two demo schedulers) and churns it as a busy cluster would: a Deployment whose pods the
# demo's "fitledger" scheduler places through the server's webhook, scaled between 0 and REPLICAS
# every PERIOD seconds plus kubectl's own time (by default 50 pods up and down every 2.6 s or so:
# about 10 pods created and as many deleted per second), and a burst of 12 pods (fitledgerctl
# burst) every minute, deleted after. The report gives the pods created. Every
# SAMPLE seconds it records each process's RSS and the server's Filter cache
# (fitledger_filter_cache_entries) in OUT/samples.csv. At the end it prints, per process, the RSS
# at the end of the warm-up (the first WARMUP minutes), the highest after it and the last, and the
# target for fitledger-server: RSS flat within 5% after the warm-up (PASS or MISS).
#
#   tests/perf/soak.sh [--minutes 60] [--warmup 5] [--replicas 50] [--period 2] [--sample 10]
#                      [--filter-cache-size N] [--sim-event-ttl D] [--build-dir DIR] [--no-build]
#                      [--out DIR]
#
# --sim-event-ttl: the sim's eventTtl (default 1h, as kube-apiserver's --event-ttl): the sim keeps
# every core/v1 Event that long, so its RSS grows for the first hour of churn; a shorter one
# shows it level off within a short run.
#
# Needs the build dir's fitledger-sim, -server, -shim and fitledgerctl (built here, Release, unless
# --no-build) and kubectl. Everything runs on loopback. Ctrl-C stops it early (the report is
# printed for what was sampled).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
MINUTES=60
WARMUP=5
REPLICAS=50
PERIOD=2
SAMPLE=10
CACHE=""
EVENT_TTL=""
BUILD="$ROOT/build"
NO_BUILD=0
OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --minutes) MINUTES="$2"; shift ;;
    --warmup) WARMUP="$2"; shift ;;
    --replicas) REPLICAS="$2"; shift ;;
    --period) PERIOD="$2"; shift ;;
    --sample) SAMPLE="$2"; shift ;;
    --filter-cache-size) CACHE="$2"; shift ;;
    --sim-event-ttl) EVENT_TTL="$2"; shift ;;
    --build-dir) BUILD="$(mkdir -p "$2" && cd "$2" && pwd)"; shift ;;
    --no-build) NO_BUILD=1 ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "soak.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
  shift
done
for v in MINUTES WARMUP REPLICAS PERIOD SAMPLE; do
  [[ "${!v}" =~ ^[0-9]+$ ]] && [ "${!v}" -gt 0 ] || { echo "soak.sh: --${v,,} must be a positive integer" >&2; exit 2; }
done
[ "$WARMUP" -lt "$MINUTES" ] || { echo "soak.sh: --warmup must be shorter than --minutes" >&2; exit 2; }
command -v kubectl >/dev/null || { echo "soak.sh: needs kubectl" >&2; exit 2; }
OUT="${OUT:-$(mktemp -d /tmp/fitledger-soak.XXXXXX)}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
RUN="$OUT/run"

if [ "$NO_BUILD" = 0 ]; then
  echo "soak: building (Release) in $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD" -j 2 --target fitledger-sim fitledger-server fitledger-shim fitledgerctl >/dev/null
fi

# The server's config: the shipped one, with the Filter cache's size if given.
CONFIG="$ROOT/config/server.yaml"
if [ -n "$CACHE" ]; then
  CONFIG="$OUT/server.yaml"
  sed -E "s/^(  filterCacheSize:) *[0-9]+/\1 $CACHE/" "$ROOT/config/server.yaml" > "$CONFIG"
  grep -q "filterCacheSize: $CACHE\b" "$CONFIG" || { echo "soak.sh: could not set filterCacheSize" >&2; exit 2; }
fi

# The sim's config: the demo's, with the event TTL if given.
SIM_CONFIG="$ROOT/config/sim/pair.yaml"
if [ -n "$EVENT_TTL" ]; then
  SIM_CONFIG="$OUT/sim.yaml"
  { cat "$ROOT/config/sim/pair.yaml"; echo "eventTtl: $EVENT_TTL"; } > "$SIM_CONFIG"
fi
export FITLEDGER_SERVER_CONFIG="$CONFIG" FITLEDGER_SIM_CONFIG="$SIM_CONFIG"

cleanup() {
  [ -n "${CHURN_PID:-}" ] && kill "$CHURN_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  "$ROOT/scripts/start-embedded" --stop "$RUN" || true
}
trap cleanup EXIT
trap 'echo "soak: interrupted, reporting what was sampled"; STOP=1' INT TERM

"$ROOT/scripts/start-embedded" "$BUILD" "$RUN"
# shellcheck disable=SC1091
source "$RUN/env"
mapfile -t PIDS < "$RUN/pids"  # sim, server, server-no-ledger, shim, scheduler, scheduler-no-ledger
NAMES=(sim server server-no-ledger shim scheduler scheduler-no-ledger)

kubectl apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: soak, namespace: default}
spec:
  replicas: 0
  selector: {matchLabels: {app: soak}}
  template:
    metadata: {labels: {app: soak}}
    spec:
      schedulerName: fitledger
      containers:
      - name: app
        image: registry.k8s.io/pause:3.10
        resources: {requests: {cpu: 50m, memory: 32Mi}}
YAML

# The churn, in the background until killed: scale up and down every PERIOD s, a burst a minute.
churn() {
  local up=1 next_burst=$((SECONDS + 60))
  while true; do
    if kubectl scale deployment soak --replicas "$([ "$up" = 1 ] && echo "$REPLICAS" || echo 0)" >/dev/null; then
      [ "$up" = 1 ] && echo "up $SECONDS"
    fi
    up=$((1 - up))
    if [ "$SECONDS" -ge "$next_burst" ]; then
      next_burst=$((SECONDS + 60))
      fitledgerctl burst --replicas 12 --cpu 100m --namespace burst >/dev/null 2>&1 && echo "burst $SECONDS"
      kubectl delete pods -n burst --all --wait=false >/dev/null 2>&1 || true
    fi
    sleep "$PERIOD"
  done
}
churn > "$OUT/churn.log" 2>&1 &
CHURN_PID=$!

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
metric() { curl -s "$FITLEDGER_MONITOR/metrics" | awk -v m="$1" '$1 == m {print $2}'; }

echo "t_seconds,${NAMES[*]// /,},filter_cache_entries,counted_pods" | tr ' ' ',' > "$OUT/samples.csv"
echo "soak: $MINUTES min, $REPLICAS pods up and down every $PERIOD s (plus kubectl's time), a 12-pod burst a minute; samples every $SAMPLE s in $OUT/samples.csv"
STOP=0
start=$SECONDS
while [ "$STOP" = 0 ] && [ $((SECONDS - start)) -lt $((MINUTES * 60)) ]; do
  row="$((SECONDS - start))"
  for pid in "${PIDS[@]}"; do row="$row,$(rss_kib "$pid")"; done
  row="$row,$(metric fitledger_filter_cache_entries),$(metric fitledger_counted_pods)"
  echo "$row" >> "$OUT/samples.csv"
  for pid in "${PIDS[@]:0:2}"; do
    kill -0 "$pid" 2>/dev/null || { echo "soak: a process exited (pid $pid); logs in $RUN" >&2; exit 1; }
  done
  sleep "$SAMPLE" & wait $! || true
done
kill "$CHURN_PID" 2>/dev/null || true
ups=$(grep -c '^up' "$OUT/churn.log" || true)
bursts=$(grep -c '^burst' "$OUT/churn.log" || true)
created=$((ups * REPLICAS + bursts * 12))
echo "soak: created about $created pods ($ups scale-ups of $REPLICAS, $bursts bursts of 12): $(awk -v c="$created" -v s="$((SECONDS - start))" 'BEGIN {printf "%.1f", c / s}') per second"

python3 - "$OUT/samples.csv" "$WARMUP" <<'PY' | tee "$OUT/report.md"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
warmup = int(sys.argv[2]) * 60
names = [n for n in rows[0].keys() if n not in ("t_seconds", "filter_cache_entries", "counted_pods")]
after = [r for r in rows if int(r["t_seconds"]) >= warmup]
if len(after) < 2:
    print("soak: too few samples after the warm-up for a verdict")
    sys.exit(1)
print(f"samples: {len(rows)} over {rows[-1]['t_seconds']} s; after the warm-up ({warmup} s): {len(after)}")
print()
print("| process | RSS at the warm-up's end (KiB) | highest after it | last | growth |")
print("|---|---|---|---|---|")
verdict = None
for n in names:
    base = int(after[0][n])
    high = max(int(r[n]) for r in after)
    last = int(after[-1][n])
    growth = (high - base) / base * 100 if base else 0.0
    print(f"| {n} | {base} | {high} | {last} | {growth:+.1f}% |")
    if n == "server":
        verdict = growth <= 5.0
cache = [int(r["filter_cache_entries"] or 0) for r in rows]
print()
print(f"fitledger-server's Filter cache: at most {max(cache)} entries, last {cache[-1]}")
print(f"target: fitledger-server RSS flat within 5% after the warm-up: {'PASS' if verdict else 'MISS'}")
PY
