#!/usr/bin/env bash
# Two fitledger-server binaries against each other on one machine: is a change, or the machine,
# what moved a row of issue 24's table? (docs/performance.md, "Running it": the ab_* scripts).
#   tests/perf/ab_server.sh BUILD SERVER_A SERVER_B [ROUNDS] [SECONDS]
# BUILD is a Release build of this tree (tests/perf/run.sh's build-perf: its fitledger-sim);
# SERVER_A / SERVER_B are fitledger-server binaries (e.g. one built from a git worktree of the
# commit before). One sim of config/sim/big-realistic.yaml (GKE-style names); the NodeNames body
# from tests/perf/make_body.py; in each round each server is started in turn, synced (/readyz),
# warmed for 2 s, then loaded by wrk at 8 connections and at 1 (tests/perf/filter.lua: Go's
# client headers). Prints one line per run: calls/s, p50 / p99 and the server's CPU per call
# (utime + stime from /proc/PID/stat) at 8 connections, p50 / p99 at 1.
# Loopback only; stops what it started, by pid.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
BUILD="$1"
SERVERS=("$2" "$3")
ROUNDS="${4:-3}"
SECS="${5:-8}"
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
D="$(mktemp -d "${TMPDIR:-/tmp}/fitledger-ab.XXXXXX")"
# shellcheck source=tests/perf/ab_lib.sh
. "$HERE/ab_lib.sh"
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK_US=$((1000000 / $(getconf CLK_TCK)))

start_sim "$BUILD"
make_bodies

for round in $(seq 1 "$ROUNDS"); do
  for i in 0 1; do
    label=$([ "$i" = 0 ] && echo A || echo B)
    start_server "${SERVERS[$i]}" "$D/server-$label.log"
    pid=$SERVER_PID
    port=$WEBHOOK_PORT
    FILTER_BODY="$D/body_names.json" wrk -t1 -c8 -d2s -s "$HERE/filter.lua" \
      "http://127.0.0.1:$port" > /dev/null
    before="$(ticks "$pid")"
    line="$(FILTER_BODY="$D/body_names.json" wrk -t1 -c8 -d"${SECS}s" --latency \
      -s "$HERE/filter.lua" "http://127.0.0.1:$port" | sed -n 's/^WRK_JSON //p')"
    after="$(ticks "$pid")"
    requests="$(sed -n 's/.*"requests":\([0-9]*\).*/\1/p' <<< "$line")"
    rps="$(sed -n 's/.*"rps":\([0-9.]*\).*/\1/p' <<< "$line")"
    p50="$(sed -n 's/.*"p50_us":\([0-9]*\).*/\1/p' <<< "$line")"
    p99="$(sed -n 's/.*"p99_us":\([0-9]*\).*/\1/p' <<< "$line")"
    cpu="$(awk -v b="$before" -v a="$after" -v n="$requests" -v t="$TICK_US" \
      'BEGIN { printf "%.1f", (a - b) * t / (n > 0 ? n : 1) }')"
    line1="$(FILTER_BODY="$D/body_names.json" wrk -t1 -c1 -d"${SECS}s" --latency \
      -s "$HERE/filter.lua" "http://127.0.0.1:$port" | sed -n 's/^WRK_JSON //p')"
    p50_1="$(sed -n 's/.*"p50_us":\([0-9]*\).*/\1/p' <<< "$line1")"
    p99_1="$(sed -n 's/.*"p99_us":\([0-9]*\).*/\1/p' <<< "$line1")"
    echo "round $round $label: c8 $rps calls/s, p50 $p50 us, p99 $p99 us, server CPU $cpu us per call;" \
      "c1 p50 $p50_1 us, p99 $p99_1 us; start -> /readyz $READY_MS ms"
    stop_server
  done
done
