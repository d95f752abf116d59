#!/usr/bin/env bash
# Two fitledger-server binaries' initial syncs against each other on one machine, in interleaved
# pairs: did a change, or the machine, move the sync? (docs/performance.md, "What changed").
#   tests/perf/ab_sync.sh BUILD SERVER_A SERVER_B [ROUNDS]
# BUILD is a Release build of this tree (tests/perf/run.sh's build-perf: its fitledger-sim);
# SERVER_A / SERVER_B are fitledger-server binaries (e.g. one built from a git worktree of the
# commit before). One sim of config/sim/big-realistic.yaml (150,000 pods, GKE-style names); in
# each round each server is started in turn (A first in odd rounds, B first in even ones) and
# timed from its start to /readyz answering 200 (polled every 10 ms), with its CPU (utime +
# stime from /proc/PID/stat) and VmHWM then. Prints one line per run, then the medians and the
# median of the per-round ratios B / A.
# Loopback only; stops what it started, by pid.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
BUILD="$1"
SERVERS=("$2" "$3")
ROUNDS="${4:-4}"
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
D="$(mktemp -d "${TMPDIR:-/tmp}/fitledger-ab-sync.XXXXXX")"
PIDS=()
cleanup() { [ ${#PIDS[@]} -gt 0 ] && kill "${PIDS[@]}" 2>/dev/null; true; }
trap cleanup EXIT
wait_for() {  # wait_for FILE: it exists and is not empty (10 minutes at most)
  for _ in $(seq 1 1200); do [ -s "$1" ] && return 0; sleep 0.5; done
  echo "timed out waiting for $1" >&2; exit 1
}
TICK_MS=$((1000 / $(getconf CLK_TCK)))

"$BUILD/sim/fitledger-sim" --config "$ROOT/config/sim/big-realistic.yaml" --listen 127.0.0.1:0 \
  --kubeconfig-out "$D/kubeconfig" > "$D/sim.log" 2>&1 &
PIDS+=($!)
wait_for "$D/kubeconfig"
printf 'log: {level: warn}\n' > "$D/server.yaml"

run_one() {  # run_one LABEL SERVER ROUND: prints "LABEL ROUND ms cpu_ms hwm_kib"
  local label="$1" server="$2" round="$3"
  rm -f "$D/ready"
  local start end pid monitor
  start="$(date +%s%N)"
  "$server" --config "$D/server.yaml" --kubeconfig "$D/kubeconfig" \
    --grpc-listen 127.0.0.1:0 --monitor-listen 127.0.0.1:0 --webhook-listen 127.0.0.1:0 \
    --ready-file "$D/ready" > "$D/server-$label-$round.log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  for _ in $(seq 1 60000); do [ -s "$D/ready" ] && break; sleep 0.01; done
  [ -s "$D/ready" ] || { echo "server $label never wrote its ready file" >&2; exit 1; }
  monitor="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["monitor_port"])' "$D/ready")"
  for _ in $(seq 1 60000); do
    curl -fsS -o /dev/null "http://127.0.0.1:$monitor/readyz" 2>/dev/null && break
    sleep 0.01
  done
  end="$(date +%s%N)"
  curl -fsS -o /dev/null "http://127.0.0.1:$monitor/readyz" || { echo "never ready" >&2; exit 1; }
  local cpu hwm
  cpu="$(awk -v t="$TICK_MS" '{print ($14 + $15) * t}' "/proc/$pid/stat")"
  hwm="$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  echo "$label $round $(((end - start) / 1000000)) $cpu $hwm"
}

: > "$D/runs.txt"
for round in $(seq 1 "$ROUNDS"); do
  order=(0 1)
  [ $((round % 2)) = 0 ] && order=(1 0)
  for i in "${order[@]}"; do
    label=$([ "$i" = 0 ] && echo A || echo B)
    line="$(run_one "$label" "${SERVERS[$i]}" "$round")"
    echo "$line" >> "$D/runs.txt"
    read -r l r ms cpu hwm <<< "$line"
    echo "round $r $l: start -> /readyz $ms ms, server CPU $cpu ms, VmHWM $((hwm / 1024)) MiB"
  done
done
python3 - "$D/runs.txt" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    label, rnd, ms, cpu, hwm = line.split()
    runs[(label, int(rnd))] = (int(ms), int(cpu), int(hwm))
rounds = sorted({r for _, r in runs})
for i, what in enumerate(["start -> /readyz (ms)", "server CPU (ms)", "VmHWM (KiB)"]):
    a = [runs[("A", r)][i] for r in rounds]
    b = [runs[("B", r)][i] for r in rounds]
    ratio = statistics.median(y / x for x, y in zip(a, b) if x > 0)
    print(f"{what}: A median {statistics.median(a):,.0f}, B median {statistics.median(b):,.0f}, "
          f"B / A per round, median {ratio:.3f}")
EOF
