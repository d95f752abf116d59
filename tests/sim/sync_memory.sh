#!/usr/bin/env bash
# fitledger-server's memory after it synced a big cluster from fitledger-sim: VmHWM (the peak
# while reading the state) and VmRSS 3 s after /readyz, with the sim serving WatchList or not.
#
#   tests/sim/sync_memory.sh [BUILD_DIR] [CONFIG]   (defaults: build, config/sim/big.yaml)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
CONFIG="${2:-$ROOT/config/sim/big.yaml}"

measure() {  # measure WATCHLIST(true|false)
  local work
  work="$(mktemp -d /tmp/fitledger-sync-memory.XXXXXX)"
  { cat "$CONFIG"; echo "watchList: $1"; } > "$work/sim.yaml"
  "$BUILD/sim/fitledger-sim" --config "$work/sim.yaml" --listen 127.0.0.1:0 \
    --kubeconfig-out "$work/kubeconfig" > "$work/sim.log" 2>&1 &
  local sim=$!
  until test -s "$work/kubeconfig"; do sleep 0.5; done
  : > "$work/server.yaml"
  "$BUILD/server/fitledger-server" --config "$work/server.yaml" --kubeconfig "$work/kubeconfig" \
    --grpc-listen "unix://$work/server.sock" --monitor-listen 127.0.0.1:0 \
    --ready-file "$work/ready" > "$work/server.log" 2>&1 &
  local server=$!
  until test -s "$work/ready"; do sleep 0.2; done
  local monitor
  monitor="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["monitor_port"])' "$work/ready")"
  local t0 t1
  t0=$(date +%s.%N)
  until curl -fsS "http://127.0.0.1:$monitor/readyz" > /dev/null 2>&1; do sleep 0.1; done
  t1=$(date +%s.%N)
  sleep 3
  echo "watchList=$1 ready_after=$(python3 -c "print(round($t1 - $t0, 1))")s" \
    "$(grep -E 'VmHWM|VmRSS' "/proc/$server/status" | tr -s ' \t\n' ' ')"
  kill "$server" "$sim"
  wait "$server" "$sim" 2> /dev/null || true
  rm -rf "$work"
}

measure true
measure false
