# Sourced by the measuring scripts beside it (api_cost.sh, leader_resync.sh): their cleanup,
# waiting, and fitledger-sim and fitledger-server started from $BUILD in $WORK.
# The script sets BUILD, WORK (a folder it owns: removed at exit) and log() first.
# launch_sim sets SIM_PID and SIM (its URL); launch_server SERVER_PID and MONITOR (its port).
SIM_PID=""
SERVER_PID=""

cleanup() {
  [[ -n "$SERVER_PID" ]] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  [[ -n "$SIM_PID" ]] && kill "$SIM_PID" 2>/dev/null && wait "$SIM_PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

wait_for() {  # wait_for SECONDS COMMAND...
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { log "timed out waiting for: $*"; return 1; }
    sleep 0.2
  done
}

launch_sim() {  # launch_sim CONFIG_FILE
  rm -f "$WORK/kubeconfig"
  "$BUILD/sim/fitledger-sim" --config "$1" --listen 127.0.0.1:0 \
    --kubeconfig-out "$WORK/kubeconfig" > "$WORK/sim.log" 2>&1 &
  SIM_PID=$!
  wait_for 300 test -s "$WORK/kubeconfig"
  SIM="$(grep -o 'http://127.0.0.1:[0-9]*' "$WORK/sim.log" | head -1 || true)"
  [[ -n "$SIM" ]] || { log "fitledger-sim did not say where it listens"; return 1; }
}

launch_server() {  # launch_server [FLAG...]: its config is $WORK/server.yaml
  rm -f "$WORK/ready"
  "$BUILD/server/fitledger-server" --config "$WORK/server.yaml" --kubeconfig "$WORK/kubeconfig" \
    --grpc-listen "unix://$WORK/server.sock" --monitor-listen 127.0.0.1:0 \
    --ready-file "$WORK/ready" "$@" > "$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  wait_for 60 test -s "$WORK/ready"
  MONITOR="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["monitor_port"])' "$WORK/ready")"
}
