# shellcheck shell=bash disable=SC2034  # sets variables for the scripts that source it
# Shared by tests/perf/ab_server.sh, ab_sync.sh and ab_cycle.sh (sourced, not run): one
# fitledger-sim of config/sim/big-realistic.yaml, and fitledger-server binaries started against
# it in turn. The caller sets HERE (tests/perf), ROOT (the tree) and D (its scratch directory).
# Everything started is stopped at exit, by pid.
PIDS=()
cleanup() { [ ${#PIDS[@]} -gt 0 ] && kill "${PIDS[@]}" 2>/dev/null; true; }
trap cleanup EXIT
wait_for() {  # wait_for FILE: it exists and is not empty (10 minutes at most)
  for _ in $(seq 1 1200); do [ -s "$1" ] && return 0; sleep 0.5; done
  echo "timed out waiting for $1" >&2; exit 1
}
json_field() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# start_sim BUILD: the sim (150,000 pods, GKE-style names); sets SIM_PORT and SIM_PID; writes
# $D/kubeconfig and the servers' config, $D/server.yaml.
start_sim() {
  rm -f "$D/kubeconfig"
  "$1/sim/fitledger-sim" --config "$ROOT/config/sim/big-realistic.yaml" --listen 127.0.0.1:0 \
    --kubeconfig-out "$D/kubeconfig" > "$D/sim.log" 2>&1 &
  SIM_PID=$!
  PIDS+=("$SIM_PID")
  wait_for "$D/kubeconfig"
  SIM_PORT="$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$D/sim.log" | head -1)"
  printf 'kubernetes: {bindTimeout: 3s}\nlog: {level: warn}\n' > "$D/server.yaml"
}

# start_server SERVER LOG: starts a fitledger-server binary against the sim and returns once its
# /readyz answers 200 (synced; polled every 10 ms). Sets SERVER_PID, WEBHOOK_PORT, MONITOR_PORT
# and READY_MS (start -> /readyz).
start_server() {
  rm -f "$D/ready"
  local start end
  start="$(date +%s%N)"
  "$1" --config "$D/server.yaml" --kubeconfig "$D/kubeconfig" \
    --grpc-listen 127.0.0.1:0 --monitor-listen 127.0.0.1:0 --webhook-listen 127.0.0.1:0 \
    --ready-file "$D/ready" > "$2" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  for _ in $(seq 1 60000); do [ -s "$D/ready" ] && break; sleep 0.01; done
  [ -s "$D/ready" ] || { echo "$1 never wrote its ready file" >&2; exit 1; }
  WEBHOOK_PORT="$(json_field "$D/ready" webhook_port)"
  MONITOR_PORT="$(json_field "$D/ready" monitor_port)"
  # The ports are bound before the initial sync ends: /readyz answers once it has.
  for _ in $(seq 1 60000); do
    curl -fsS -o /dev/null "http://127.0.0.1:$MONITOR_PORT/readyz" 2>/dev/null && break
    sleep 0.01
  done
  end="$(date +%s%N)"
  curl -fsS -o /dev/null "http://127.0.0.1:$MONITOR_PORT/readyz" || { echo "never ready" >&2; exit 1; }
  READY_MS=$(((end - start) / 1000000))
}

# stop_server: stops the server start_server started.
stop_server() {
  kill "$SERVER_PID"
  wait "$SERVER_PID" 2>/dev/null || true
}

# stop_sim: stops the sim start_sim started.
stop_sim() {
  kill "$SIM_PID"
  wait "$SIM_PID" 2>/dev/null || true
}

# make_bodies: the harness's Filter bodies, pod and node names from the running sim
# (tests/perf/make_body.py): $D/body_names.json, body_nodes.json, pod.json, node_names.txt and
# candidates.txt.
make_bodies() {
  python3 "$HERE/make_body.py" --api "http://127.0.0.1:$SIM_PORT" --names-out "$D/body_names.json" \
    --nodes-out "$D/body_nodes.json" --pod-out "$D/pod.json" --node-names-out "$D/node_names.txt" \
    --candidates-out "$D/candidates.txt" >&2
}

# ab_order ROUND: which server goes first in an interleaved round: "0 1" (A, then B) in odd
# rounds, "1 0" in even ones.
ab_order() { if [ $(($1 % 2)) = 0 ]; then echo "1 0"; else echo "0 1"; fi; }
