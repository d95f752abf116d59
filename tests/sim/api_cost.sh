#!/usr/bin/env bash
# What fitledger-server costs the API server, measured against fitledger-sim: requests and
# response bytes at start, per minute in steady state (idle, then with pod churn), and at a
# relist, with WatchList on (the default) and off (LIST + WATCH). The sim counts every API
# request and the bytes of its response body by kind (GET /sim/requests).
#
#   tests/sim/api_cost.sh [BUILD_DIR] [CONFIG]   (defaults: build, config/sim/big.yaml)
#   MODES="watchlist list" STEADY_SECONDS=120 CHURN_PODS_PER_MINUTE=300 (the defaults)
#
# The sim sends bookmarks every 60 s here, as the API server's watch cache does (about once a
# minute, cacher/cache_watcher.go nextBookmarkTime); fitledger-server asks timeoutSeconds=300.
# Prints one JSON document per phase and a summary table (markdown) at the end.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
CONFIG="${2:-$ROOT/config/sim/big.yaml}"
STEADY_SECONDS="${STEADY_SECONDS:-120}"
CHURN_PODS_PER_MINUTE="${CHURN_PODS_PER_MINUTE:-300}"
WORK="$(mktemp -d /tmp/fitledger-api-cost.XXXXXX)"
log() { echo "[api_cost] $*" >&2; }
# shellcheck source=tests/sim/bench_lib.sh
source "$ROOT/tests/sim/bench_lib.sh"

api() {  # api METHOD PATH [BODY]
  curl -sS -X "$1" "$SIM$2" -H 'Content-Type: application/json' ${3:+-d "$3"}
}

metric() {  # the value of a fitledger-server metric series, or 0
  curl -sS "http://127.0.0.1:$MONITOR/metrics" | awk -v s="$1" '$1 == s {print $2; f=1} END {if (!f) print 0}'
}

states() {  # completed state reads (LIST + WatchList) of the server
  echo $(( $(metric 'fitledger_watch_total{kind="lists"}' | cut -d. -f1) + \
           $(metric 'fitledger_watch_total{kind="watch_lists"}' | cut -d. -f1) ))
}

states_at_least() { test "$(states)" -ge "$1"; }

start_sim() {  # start_sim WATCHLIST(true|false)
  { cat "$CONFIG"; echo "bookmarkInterval: 60s"; echo "watchList: $1"; } > "$WORK/sim.yaml"
  launch_sim "$WORK/sim.yaml"
}

start_server() {
  : > "$WORK/server.yaml"
  launch_server
}

snapshot() {  # snapshot PHASE MODE: print and keep /sim/requests, then reset it
  api GET /sim/requests > "$WORK/$2-$1.json"
  python3 - "$1" "$2" "$WORK/$2-$1.json" <<'EOF'
import json, sys
phase, mode, path = sys.argv[1:4]
d = json.load(open(path))
print(json.dumps({"mode": mode, "phase": phase, "requests": d["requests"], "bytes": d["bytes"],
                  "byRequest": d["byRequest"]}, indent=1, sort_keys=True))
EOF
  api DELETE /sim/requests > /dev/null
}

churn() {  # churn SECONDS: create, bind and delete pods at CHURN_PODS_PER_MINUTE
  local end=$((SECONDS + $1)) i=0
  local gap
  gap="$(python3 -c "print(60 / $CHURN_PODS_PER_MINUTE)")"
  while ((SECONDS < end)); do
    i=$((i + 1))
    local name="churn-$i"
    api POST /api/v1/namespaces/churn/pods \
      "{\"metadata\":{\"name\":\"$name\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"100m\"}}}]}}" > /dev/null
    api POST "/api/v1/namespaces/churn/pods/$name/binding" \
      "{\"metadata\":{\"name\":\"$name\"},\"target\":{\"kind\":\"Node\",\"name\":\"node-$((i % 5000))\"}}" > /dev/null
    api DELETE "/api/v1/namespaces/churn/pods/$name" > /dev/null
    sleep "$gap"
  done
  echo "$i"
}

measure() {  # measure MODE WATCHLIST
  local mode="$1"
  log "$mode: starting fitledger-sim ($CONFIG)"
  start_sim "$2"
  api DELETE /sim/requests > /dev/null
  log "$mode: starting fitledger-server; waiting for it to be ready (synced)"
  local t0=$SECONDS
  start_server
  wait_for 600 curl -fsS "http://127.0.0.1:$MONITOR/readyz"
  wait_for 60 states_at_least 3
  log "$mode: synced in $((SECONDS - t0)) s"
  snapshot start "$mode"
  log "$mode: idle for $STEADY_SECONDS s"
  sleep "$STEADY_SECONDS"
  snapshot idle "$mode"
  log "$mode: churn ($CHURN_PODS_PER_MINUTE pods/min created, bound, deleted) for $STEADY_SECONDS s"
  local pods
  pods="$(churn "$STEADY_SECONDS")"
  sleep 2
  echo "{\"mode\":\"$mode\",\"phase\":\"churn-pods\",\"pods\":$pods}"
  snapshot churn "$mode"
  log "$mode: a relist (every stream's resourceVersion expires)"
  local before
  before="$(states)"
  api POST /sim/faults/bookmarks-only '{"on":true}' > /dev/null
  api POST /api/v1/namespaces/churn/pods \
    '{"metadata":{"name":"expire"},"spec":{"containers":[{"name":"c"}]}}' > /dev/null
  api DELETE /sim/requests > /dev/null
  api POST /sim/faults/expire '{}' > /dev/null
  api POST /sim/faults/drop-watches '{}' > /dev/null
  api POST /sim/faults/bookmarks-only '{"on":false}' > /dev/null
  wait_for 600 states_at_least $((before + 3))
  sleep 1
  snapshot relist "$mode"
  kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
  kill "$SIM_PID"; wait "$SIM_PID" 2>/dev/null || true; SIM_PID=""
}

MODES="${MODES:-watchlist list}"
for mode in $MODES; do
  case "$mode" in
    watchlist) measure watchlist true ;;
    list) measure list false ;;
    *) log "unknown mode $mode"; exit 2 ;;
  esac
done

python3 - "$WORK" "$STEADY_SECONDS" "$MODES" <<'EOF'
import json, os, sys
work, seconds = sys.argv[1], float(sys.argv[2])
def load(mode, phase):
    return json.load(open(os.path.join(work, f"{mode}-{phase}.json")))
def server_only(d):
    # The churn's own CREATE / BIND / DELETE are the test's, not fitledger's.
    keep = {k: v for k, v in d["byRequest"].items() if k.split()[0] in ("LIST", "WATCH", "WATCHLIST", "GET")}
    return sum(v["requests"] for v in keep.values()), sum(v["bytes"] for v in keep.values())
print("| mode | phase | requests | MiB | per minute |")
print("|---|---|---|---|---|")
for mode in sys.argv[3].split():
    for phase in ("start", "idle", "churn", "relist"):
        r, b = server_only(load(mode, phase))
        per_min = phase in ("idle", "churn")
        scale = 60 / seconds if per_min else 1
        print(f"| {mode} | {phase} | {r * scale:.1f} | {b * scale / 2**20:.2f} | {'yes' if per_min else ''} |")
EOF
