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
# shellcheck source=tests/perf/ab_lib.sh
. "$HERE/ab_lib.sh"
TICK_MS=$((1000 / $(getconf CLK_TCK)))

start_sim "$BUILD"
: > "$D/runs.txt"
for round in $(seq 1 "$ROUNDS"); do
  for i in $(ab_order "$round"); do
    label=$([ "$i" = 0 ] && echo A || echo B)
    start_server "${SERVERS[$i]}" "$D/server-$label-$round.log"
    cpu="$(awk -v t="$TICK_MS" '{print ($14 + $15) * t}' "/proc/$SERVER_PID/stat")"
    hwm="$(awk '/^VmHWM/ {print $2}' "/proc/$SERVER_PID/status")"
    stop_server
    echo "$label $round $READY_MS $cpu $hwm" >> "$D/runs.txt"
    echo "round $round $label: start -> /readyz $READY_MS ms, server CPU $cpu ms, VmHWM $((hwm / 1024)) MiB"
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
