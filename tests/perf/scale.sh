#!/usr/bin/env bash
# Issue 49, item 4: fitledger-server past upstream's 5,000 nodes. For each size, one fitledger-sim
# of NODES nodes with 30 realistic pods on each (config/sim/big-realistic.yaml with its node count
# changed: the table's cluster of tests/perf/run.sh, scaled), then:
#   sync     fitledger-server started SYNCS times against it: start -> SERVING, VmRSS and VmHWM
#            (tests/bench/sync_probe); the last server stays up;
#   filter   kube-scheduler's Filter at 1 connection (the NodeNames body of tests/perf/make_body.py:
#            500 candidates spread over the cluster) through the webhook, by wrk, ROUNDS rounds of
#            SECONDS s, the sizes interleaved in each round (every sim and server stays up);
#   memory   the server's VmRSS and VmHWM after the filter rounds.
# Prints a table with the targets of the largest size as PASS / MISS (start -> SERVING <= 2 s,
# VmRSS <= 400 MiB, Filter p50 within 10% of the 5,000-node figure) to stdout and OUT/table.md;
# every number in OUT/results.jsonl.
#
#   tests/perf/scale.sh [--nodes 1000,5000,15000] [--syncs 3] [--rounds 3] [--seconds 8]
#                       [--build-dir DIR] [--no-build] [--out DIR]
#
# Needs wrk, curl, python3 and a Release build dir with the perf_tools target (default build-perf,
# configured and built here unless --no-build). Memory: the sim of 15,000 nodes holds 450,000 pods
# of 3-6 KB (several GiB). Only the processes this script starts are stopped, by pid.
set -euo pipefail
ORIG_ARGS=("$@")
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PERF="$ROOT/tests/perf"
BUILD="$ROOT/build-perf"
SIZES=1000,5000,15000
SYNCS=3
ROUNDS=3
SECONDS_PER_RUN=8
BUILD_TOOLS=1
OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) SIZES="$2"; shift ;;
    --syncs) SYNCS="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --seconds) SECONDS_PER_RUN="$2"; shift ;;
    --build-dir) BUILD="$2"; shift ;;
    --no-build) BUILD_TOOLS=0 ;;
    --out) OUT="$2"; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
[[ "$SIZES" =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "--nodes: comma-separated node counts" >&2; exit 2; }
for tool in wrk curl python3; do
  command -v "$tool" >/dev/null || { echo "tests/perf/scale.sh needs $tool" >&2; exit 2; }
done
OUT="${OUT:-$(mktemp -d /tmp/fitledger-scale.XXXXXX)}"
mkdir -p "$OUT"
RESULTS="$OUT/results.jsonl"
: > "$RESULTS"
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
record() { printf '{"kind":"%s",%s\n' "$1" "${2#\{}" >> "$RESULTS"; }
kib() { awk -v k="$2" '$1 == k { print $2 }' "/proc/$1/status"; }

PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
wait_file() {  # wait_file PATH SECONDS PID
  local deadline=$((SECONDS + $2))
  while [[ ! -s "$1" ]]; do
    kill -0 "$3" 2>/dev/null || { echo "process $3 exited before writing $1" >&2; return 1; }
    (( SECONDS <= deadline )) || { echo "timed out waiting for $1" >&2; return 1; }
    sleep 0.05
  done
}

if (( BUILD_TOOLS )); then
  if [[ ! -f "$BUILD/build.ninja" ]]; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFITLEDGER_BUILD_TESTS=ON >/dev/null
  fi
  log "building (ninja -C $BUILD perf_tools)"
  nice -n 10 ninja -C "$BUILD" -j2 perf_tools >/dev/null
fi
SIM_BIN="$BUILD/sim/fitledger-sim"
SERVER_BIN="$BUILD/server/fitledger-server"
PROBE="$BUILD/tests/bench/sync_probe"
for bin in "$SIM_BIN" "$SERVER_BIN" "$PROBE"; do
  [[ -x "$bin" ]] || { echo "missing $bin (build the perf_tools target)" >&2; exit 2; }
done
COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
record meta "{\"date\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\",\"commit\":\"$COMMIT\",\"command\":\"tests/perf/scale.sh $(printf '%q ' "${ORIG_ARGS[@]:-}")\",\"cpus\":$(nproc)}"

cat > "$OUT/server.yaml" <<EOF
kubernetes: {bindTimeout: 3s}
log: {level: warn}
EOF

declare -A SERVER_PID=() WEBHOOK_PORT=()
for n in ${SIZES//,/ }; do
  dir="$OUT/n$n"
  mkdir -p "$dir"
  sed "s/^  nodes: .*/  nodes: $n/" "$ROOT/config/sim/big-realistic.yaml" > "$dir/sim.yaml"
  grep -q "^  nodes: $n\$" "$dir/sim.yaml" || { echo "could not set the node count" >&2; exit 1; }
  log "$n nodes: starting fitledger-sim ($((n * 30)) pods)"
  began="$(date +%s%N)"
  "$SIM_BIN" --config "$dir/sim.yaml" --listen 127.0.0.1:0 --kubeconfig-out "$dir/kubeconfig" \
    > "$dir/sim.log" 2>&1 &
  sim_pid=$!
  PIDS+=("$sim_pid")
  wait_file "$dir/kubeconfig" 1800 "$sim_pid"
  sim_port="$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$dir/sim.log" | head -1)"
  log "$n nodes: sim on port $sim_port after $(( ($(date +%s%N) - began) / 1000000 )) ms, VmRSS $(( $(kib "$sim_pid" VmRSS:) / 1024 )) MiB"
  # The sim encodes each object version in protobuf at its first read: one WatchList first, so
  # the syncs measure the server, not that encoding (as run.sh does).
  selector='fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed'
  line="$(python3 "$PERF/initial_events.py" "$sim_port" "/api/v1/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&$selector")"
  log "$n nodes: the sim's first protobuf WatchList of the pods (encoding each): $line"
  record sim_first_watchlist "{\"nodes\":$n,${line#\{}"
  python3 "$PERF/make_body.py" --api "http://127.0.0.1:$sim_port" --names-out "$dir/body_names.json" \
    --nodes-out "$dir/body_nodes.json" --candidates-out "$dir/candidates.txt"
  python3 "$PERF/make_body.py" --check "$dir/body_names.json"
  for s in $(seq 1 "$SYNCS"); do
    rm -f "$dir/ready"
    began="$(date +%s%N)"
    "$SERVER_BIN" --config "$OUT/server.yaml" --kubeconfig "$dir/kubeconfig" \
      --grpc-listen 127.0.0.1:0 --monitor-listen 127.0.0.1:0 --webhook-listen 127.0.0.1:0 \
      --ready-file "$dir/ready" > "$dir/server-$s.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    "$PROBE" --pid "$pid" --ready_file "$dir/ready" --start_ns "$began" --settle_seconds 2 \
      --timeout_seconds 300 > "$dir/sync-$s.txt"
    line="$(sed -n 's/^SYNC_JSON //p' "$dir/sync-$s.txt")"
    record sync "{\"nodes\":$n,\"sync\":$s,${line#\{}"
    log "$n nodes: sync $s: $line"
    if (( s < SYNCS )); then kill "$pid"; wait "$pid" 2>/dev/null || true; fi
  done
  SERVER_PID[$n]=$pid
  WEBHOOK_PORT[$n]="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["webhook_port"])' "$dir/ready")"
  code="$(curl -sS -o "$dir/reply_names.json" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    --data-binary "@$dir/body_names.json" "http://127.0.0.1:${WEBHOOK_PORT[$n]}/filter")"
  [[ "$code" == 200 ]] || { echo "$n nodes: Filter answered $code: $(head -c 300 "$dir/reply_names.json")" >&2; exit 1; }
  record filter_reply "{\"nodes\":$n,\"bytes\":$(stat -c %s "$dir/reply_names.json"),\"failed\":$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1])).get("FailedNodes") or {}))' "$dir/reply_names.json")}"
done

# Filter at one connection, the sizes interleaved in each round (a second of each first, warm-up).
for n in ${SIZES//,/ }; do
  FILTER_BODY="$OUT/n$n/body_names.json" FILTER_PATH=/filter wrk -t1 -c1 -d1s -s "$PERF/filter.lua" \
    "http://127.0.0.1:${WEBHOOK_PORT[$n]}" > /dev/null
done
for r in $(seq 1 "$ROUNDS"); do
  for n in ${SIZES//,/ }; do
    line="$(FILTER_BODY="$OUT/n$n/body_names.json" FILTER_PATH=/filter \
      wrk -t1 -c1 -d"${SECONDS_PER_RUN}s" --latency -s "$PERF/filter.lua" "http://127.0.0.1:${WEBHOOK_PORT[$n]}" |
      tee -a "$OUT/wrk.log" | sed -n 's/^WRK_JSON //p')"
    [[ "$line" == *'"errors":0,"non2xx":0,'* ]] || { echo "$n nodes: wrk saw errors: $line" >&2; exit 1; }
    record filter "{\"nodes\":$n,\"round\":$r,${line#\{}"
    log "$n nodes: filter round $r: $line"
  done
done
for n in ${SIZES//,/ }; do
  record memory "{\"nodes\":$n,\"rss_kib\":$(kib "${SERVER_PID[$n]}" VmRSS:),\"hwm_kib\":$(kib "${SERVER_PID[$n]}" VmHWM:)}"
done

python3 - "$RESULTS" "$OUT/table.md" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
meta = next(r for r in rows if r["kind"] == "meta")
sizes = sorted({r["nodes"] for r in rows if r["kind"] == "sync"})
def med(xs): return statistics.median(xs) if xs else float("nan")
out = [f"tests/perf/scale.sh at {meta['commit']} ({meta['date']}, {meta['cpus']} CPUs): medians",
       "", "| nodes | pods | start -> SERVING ms (each sync) | VmRSS at SERVING MiB | VmRSS after the Filter rounds MiB | VmHWM MiB | Filter p50 / p99 us at 1 connection (each round's p50) |",
       "|---|---|---|---|---|---|---|"]
fig = {}
for n in sizes:
    syncs = [r for r in rows if r["kind"] == "sync" and r["nodes"] == n]
    filt = [r for r in rows if r["kind"] == "filter" and r["nodes"] == n]
    mem = next(r for r in rows if r["kind"] == "memory" and r["nodes"] == n)
    f = fig[n] = {"serving": med([s["serving_ms"] for s in syncs]),
                  "rss": mem["rss_kib"] / 1024, "hwm": mem["hwm_kib"] / 1024,
                  "p50": med([x["p50_us"] for x in filt]), "p99": med([x["p99_us"] for x in filt])}
    out.append(f"| {n:,} | {n * 30:,} | {f['serving']:.0f} ({', '.join('%.0f' % s['serving_ms'] for s in syncs)}) "
               f"| {med([s['rss_at_serving_kib'] for s in syncs]) / 1024:.0f} | {f['rss']:.0f} | {f['hwm']:.0f} "
               f"| {f['p50']:.0f} / {f['p99']:.0f} ({', '.join(str(x['p50_us']) for x in filt)}) |")
big = max(sizes)
f = fig[big]
out += ["", f"Targets at {big:,} nodes (issue 49 item 4):", ""]
def verdict(ok): return "PASS" if ok else "MISS"
out.append(f"- start -> SERVING <= 2,000 ms: {f['serving']:.0f} ms {verdict(f['serving'] <= 2000)}")
out.append(f"- VmRSS <= 400 MiB: {f['rss']:.0f} MiB after the Filter rounds (peak {f['hwm']:.0f}) {verdict(f['rss'] <= 400)}")
if 5000 in fig and big != 5000:
    ratio = f["p50"] / fig[5000]["p50"]
    out.append(f"- Filter p50 within 10% of 5,000 nodes': {f['p50']:.0f} / {fig[5000]['p50']:.0f} us = {ratio:.2f}x {verdict(ratio <= 1.10)}")
else:
    out.append("- Filter p50 against 5,000 nodes': not judged (no 5,000-node size in --nodes)")
text = "\n".join(out) + "\n"
open(sys.argv[2], "w").write(text)
print(text)
EOF
