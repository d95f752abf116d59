#!/usr/bin/env bash
# Issue 21: the transport before the rewrite and after it, side by side (its runs are in
# `git show 83ba22b:docs/performance.md`, "Before and after the transport rewrite").
#   tests/perf/before_after.sh OLD_BUILD NEW_BUILD [ROUNDS] [SECONDS]
# OLD_BUILD is a Release build of 2903594 (the last commit with fitledger's own HTTP/1 server,
# the shim's own HTTP/2 client and grpc.unaryListen), e.g.
#   git worktree add /tmp/old 2903594 && cmake -S /tmp/old -B /tmp/old/build-rel -G Ninja \
#     -DCMAKE_BUILD_TYPE=Release && cmake --build /tmp/old/build-rel
# NEW_BUILD a Release build of this tree (tests/perf/run.sh's build-perf). Each server gets its
# own fitledger-sim of its own build (before_after/sim.yaml: 5,000 GKE-style nodes, 150,000 pods);
# every system gets the same body (before_after/filter.json: a Deployment pod, 500 candidates,
# all fitting) from wrk with Go's client headers (filter.lua), in interleaved rounds at 8 and 1
# connections. Prints one line per run: calls/s, p50, p99, CPU per call of the system's processes
# (utime + stime). Loopback only; stops what it started, by pid.
set -uo pipefail
[ $# -ge 2 ] || { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
OLD="$1"
NEW="$2"
ROUNDS="${3:-3}"
SECS="${4:-6}"
HERE="$(cd "$(dirname "$0")" && pwd)"
D="$(mktemp -d "${TMPDIR:-/tmp}/fitledger-before-after.XXXXXX")"
printf 'log: {level: warn}\n' > "$D/server.yaml"
PIDS=()
cleanup() { [ ${#PIDS[@]} -gt 0 ] && kill "${PIDS[@]}" 2>/dev/null; }
trap cleanup EXIT
start() { "$@" & PIDS+=($!); }
wait_for() { for _ in $(seq 1 600); do [ -s "$1" ] && return 0; sleep 0.5; done; echo "timed out waiting for $1" >&2; exit 1; }

# The old binaries spell flags with underscores; the new ones take both.
start "$OLD/sim/fitledger-sim" --config "$HERE/before_after/sim.yaml" --listen 127.0.0.1:0 \
  --kubeconfig_out "$D/kc-old" > "$D/sim-old.log" 2>&1
start "$NEW/sim/fitledger-sim" --config "$HERE/before_after/sim.yaml" --listen 127.0.0.1:0 \
  --kubeconfig-out "$D/kc-new" > "$D/sim-new.log" 2>&1
wait_for "$D/kc-old"; wait_for "$D/kc-new"
start "$OLD/server/fitledger-server" --config "$D/server.yaml" --kubeconfig "$D/kc-old" \
  --grpc_listen "unix://$D/old.sock" --grpc_unary_listen "unix://$D/old-unary.sock" \
  --webhook_listen 127.0.0.1:0 --monitor_listen 127.0.0.1:0 --ready_file "$D/old.ready" > "$D/old.log" 2>&1
OLD_PID=${PIDS[-1]}
start "$NEW/server/fitledger-server" --config "$D/server.yaml" --kubeconfig "$D/kc-new" \
  --grpc-listen "unix://$D/new.sock" --webhook-listen 127.0.0.1:0 --monitor-listen 127.0.0.1:0 \
  --ready-file "$D/new.ready" > "$D/new.log" 2>&1
NEW_PID=${PIDS[-1]}
wait_for "$D/old.ready"; wait_for "$D/new.ready"
port_of() { sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p" "$1"; }
for n in old new; do  # serving = synced
  mp="$(port_of "$D/$n.ready" monitor_port)"
  for _ in $(seq 1 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$mp/readyz")" = 200 ] && break
    sleep 0.5
  done
done
start "$OLD/client/shim/fitledger-shim" --listen 127.0.0.1:0 --server "unix://$D/old.sock" \
  --port_file "$D/oldshim.port" > "$D/oldshim.log" 2>&1
OLDSHIM_PID=${PIDS[-1]}
start "$OLD/client/shim/fitledger-shim" --listen 127.0.0.1:0 --server "unix://$D/old-unary.sock" \
  --port_file "$D/oldshimu.port" > "$D/oldshimu.log" 2>&1
OLDSHIMU_PID=${PIDS[-1]}
start "$NEW/client/shim/fitledger-shim" --listen 127.0.0.1:0 --server "unix://$D/new.sock" \
  --port-file "$D/newshim.port" > "$D/newshim.log" 2>&1
NEWSHIM_PID=${PIDS[-1]}
wait_for "$D/oldshim.port"; wait_for "$D/oldshimu.port"; wait_for "$D/newshim.port"

declare -A PORT=([old-server]="$(port_of "$D/old.ready" webhook_port)"
                 [new-server]="$(port_of "$D/new.ready" webhook_port)"
                 [old-shim-grpc]="$(cat "$D/oldshim.port")" [old-shim-unary]="$(cat "$D/oldshimu.port")"
                 [new-shim]="$(cat "$D/newshim.port")")
declare -A PROCS=([old-server]="$OLD_PID" [new-server]="$NEW_PID"
                  [old-shim-grpc]="$OLDSHIM_PID $OLD_PID" [old-shim-unary]="$OLDSHIMU_PID $OLD_PID"
                  [new-shim]="$NEWSHIM_PID $NEW_PID")
ticks() { local s=0 p; for p in $1; do s=$((s + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$s"; }
hz="$(getconf CLK_TCK)"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$ROUNDS"); do
  for sys in old-server new-server old-shim-grpc old-shim-unary new-shim; do
    for c in 8 1; do
      t0="$(ticks "${PROCS[$sys]}")"
      line="$(FILTER_BODY="$HERE/before_after/filter.json" wrk -t1 -c"$c" -d"${SECS}s" --latency \
              -s "$HERE/filter.lua" "http://127.0.0.1:${PORT[$sys]}" | sed -n 's/^WRK_JSON //p')"
      t1="$(ticks "${PROCS[$sys]}")"
      req="$(sed -n 's/.*"requests":\([0-9]*\).*/\1/p' <<< "$line")"
      echo "round=$r system=$sys conns=$c $(sed -E 's/[{}"]//g; s/,/ /g' <<< "$line") cpu_us_per_call=$(( (t1 - t0) * 1000000 / hz / (req > 0 ? req : 1) ))"
    done
  done
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
