#!/usr/bin/env bash
# Two fitledger-server binaries' filter + bind cycles against each other on one machine, in
# interleaved setups: did a change, or the machine, move the cycle? (docs/performance.md).
#   tests/perf/ab_cycle.sh BUILD SERVER_A SERVER_B [ROUNDS] [CYCLES] [PODS]
# BUILD is a Release build of this tree (tests/perf/run.sh's build-perf: its fitledger-sim and
# tests/bench/cycle_load); SERVER_A / SERVER_B are fitledger-server binaries. Each setup is a
# fresh sim of config/sim/big-realistic.yaml (the cycles fill its nodes, so no two setups share
# one) and one server, synced (/readyz); then CYCLES cycles of PODS pods (default 2 x 6,000) as
# run.sh runs them (serial filter, 16 binders). In each round both servers get a setup, A first
# in odd rounds and B first in even ones. Prints one line per cycle: pods/s, the server's own
# mean Filter time (fitledger_server_request_duration_seconds for Filter, over the cycle), and
# the server's and the sim's CPU per pod (utime + stime from /proc/PID/stat); then the medians.
# Loopback only; stops what it started, by pid.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
BUILD="$1"
SERVERS=("$2" "$3")
ROUNDS="${4:-3}"
CYCLES="${5:-2}"
PODS="${6:-6000}"
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
D="$(mktemp -d "${TMPDIR:-/tmp}/fitledger-ab-cycle.XXXXXX")"
# shellcheck source=tests/perf/ab_lib.sh
. "$HERE/ab_lib.sh"
TICK_US=$((1000000 / $(getconf CLK_TCK)))
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
filter_metrics() {  # "sum count" of the server's Filter durations
  curl -fsS "http://127.0.0.1:$MONITOR_PORT/metrics" |
    awk '/^fitledger_server_request_duration_seconds_(sum|count)\{method="Filter"\}/ {printf "%s ", $2}'
}

: > "$D/runs.txt"
for round in $(seq 1 "$ROUNDS"); do
  for i in $(ab_order "$round"); do
    label=$([ "$i" = 0 ] && echo A || echo B)
    start_sim "$BUILD"
    # Every sim of the config generates the same cluster: the pod and node names once.
    [ -s "$D/pod.json" ] || make_bodies
    start_server "${SERVERS[$i]}" "$D/server-$label-$round.log"
    for c in $(seq 1 "$CYCLES"); do
      before_metrics="$(filter_metrics)"
      "$BUILD/tests/bench/cycle_load" --api_port "$SIM_PORT" --webhook_port "$WEBHOOK_PORT" \
        --pod "$D/pod.json" --node_names "$D/node_names.txt" --prefix "ab$round$label$c" \
        --pods "$PODS" --binders 16 --started_file "$D/started" > "$D/cycle.out" 2> "$D/cycle.err" &
      load_pid=$!
      for _ in $(seq 1 12000); do [ -e "$D/started" ] && break; sleep 0.05; done
      s0="$(ticks "$SERVER_PID")" m0="$(ticks "$SIM_PID")"
      wait "$load_pid" || { cat "$D/cycle.out" "$D/cycle.err" >&2; exit 1; }
      s1="$(ticks "$SERVER_PID")" m1="$(ticks "$SIM_PID")"
      rm -f "$D/started"
      after_metrics="$(filter_metrics)"
      pods_per_s="$(sed -n 's/^CYCLE_JSON .*"pods_per_s":\([0-9.]*\).*/\1/p' "$D/cycle.out")"
      line="$(awk -v b="$before_metrics" -v a="$after_metrics" -v s0="$s0" -v s1="$s1" \
        -v m0="$m0" -v m1="$m1" -v t="$TICK_US" -v n="$PODS" -v p="$pods_per_s" 'BEGIN {
          split(b, x, " "); split(a, y, " ");
          printf "%.0f %.1f %.1f %.1f", p, (y[1] - x[1]) / (y[2] - x[2]) * 1e6,
            (s1 - s0) * t / n, (m1 - m0) * t / n }')"
      echo "$label $round $c $line" >> "$D/runs.txt"
      read -r pps filter_us server_us sim_us <<< "$line"
      echo "round $round $label cycle $c: $pps pods/s, Filter $filter_us us per call," \
        "CPU per pod: server $server_us us, sim $sim_us us"
    done
    stop_server
    stop_sim
  done
done
python3 - "$D/runs.txt" <<'EOF'
import statistics, sys
runs = [line.split() for line in open(sys.argv[1])]
for col, what in [(3, "pods/s"), (4, "Filter us per call"), (5, "server CPU us per pod"),
                  (6, "sim CPU us per pod")]:
    a = [float(r[col]) for r in runs if r[0] == "A"]
    b = [float(r[col]) for r in runs if r[0] == "B"]
    print(f"{what}: A median {statistics.median(a):,.1f}, B median {statistics.median(b):,.1f} "
          f"(B / A {statistics.median(b) / statistics.median(a):.3f})")
EOF
