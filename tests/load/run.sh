#!/usr/bin/env bash
# Sustained mixed load against fitledger-sim + fitledger-server + fitledger-shim (issue 6):
#   tests/load/run.sh [BUILD_DIR (default build-rel)] [SECONDS (default 60)]
# - wrk POSTs filter requests (a 20-node NodeNames list) to the shim on 4 connections;
# - churn.py creates pods, filters and binds them through the shim on 4 threads and deletes old
#   ones (watch churn), sampling the server's and shim's RSS and open fds once a second.
# Prints the figures and exits 1 if any request failed, if the server's or shim's RSS moved more
# than 5% after the warm-up (the first half of the run, at least 10 s: the filter cache of
# 10,000 pods must fill first), or if either holds more
# file descriptors at the end than after the warm-up.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$root/build-rel}" && pwd)"
seconds="${2:-60}"
work="$(mktemp -d "${TMPDIR:-/tmp}/fitledger-load.XXXXXX")"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT

nodes=""
{
  echo "nodes:"
  for i in $(seq 1 20); do
    echo "  - {name: node-$i, allocatable: {cpu: \"64\", memory: 256Gi, pods: 500}}"
    nodes="${nodes:+$nodes,}node-$i"
  done
  echo "watchLag: 200ms"
  echo "kubelet: {enabled: true}"
} >"$work/sim.yaml"
"$build/sim/fitledger-sim" --config "$work/sim.yaml" --kubeconfig-out "$work/kubeconfig" >"$work/sim.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/kubeconfig" ] && break; sleep 0.1; done
sim_port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$work/sim.log" | head -1)
"$build/server/fitledger-server" --kubeconfig "$work/kubeconfig" --grpc-listen "unix://$work/server.sock" \
  --monitor-listen 127.0.0.1:0 --ready-file "$work/server.ready" >"$work/server.log" 2>&1 &
server_pid=$!
pids+=($server_pid)
for _ in $(seq 100); do [ -s "$work/server.ready" ] && break; sleep 0.1; done
"$build/client/shim/fitledger-shim" --listen 127.0.0.1:0 --server "unix://$work/server.sock" \
  --port-file "$work/shim.port" >"$work/shim.log" 2>&1 &
shim_pid=$!
pids+=($shim_pid)
for _ in $(seq 100); do [ -s "$work/shim.port" ] && curl -sf "http://127.0.0.1:$(cat "$work/shim.port")/readyz" >/dev/null && break; sleep 0.1; done
shim_port=$(cat "$work/shim.port")
if [ -z "$sim_port" ] || [ -z "$shim_port" ]; then
  echo "could not start the cluster; logs in $work" >&2
  exit 1
fi

python3 - "$nodes" >"$work/filter.json" <<'PY'
import json, sys
pod = {"metadata": {"name": "probe", "namespace": "default", "uid": "probe-uid"},
       "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "250m", "memory": "128Mi"}}}]}}
print(json.dumps({"Pod": pod, "NodeNames": sys.argv[1].split(",")}))
PY
FILTER_BODY_FILE="$work/filter.json" wrk -t2 -c4 -d"${seconds}s" --timeout 10s -s "$here/filter.lua" \
  "http://127.0.0.1:$shim_port/filter" >"$work/wrk.log" 2>&1 &
wrk_pid=$!
python3 "$here/churn.py" "$sim_port" "$shim_port" "$seconds" "$server_pid" "$shim_pid" "$nodes" \
  >"$work/churn.log" 2>"$work/churn.err"
churn_rc=$?
wait "$wrk_pid"
wrk_rc=$?

grep -E '^(Requests/sec|wrk_)|Non-2xx|Socket errors' "$work/wrk.log"
grep -E '^churn_' "$work/churn.log"
cat "$work/churn.err"
python3 - "$work/churn.log" "$seconds" "$work/wrk.log" <<'PY'
import json, sys
samples = json.loads([l for l in open(sys.argv[1]) if l.startswith("samples ")][0][8:])
seconds = float(sys.argv[2])
# The warm-up is half the run: the server remembers the requests of the last 10,000 filtered
# pods for Bind (ExtenderOptions.filter_cache_size), which fills in ~40 s at this rate.
warm = max(10.0, seconds / 2)
after = [s for t, s in samples if t >= warm]
ok = True
for k in ("server", "shim"):
    base_rss, base_fds = after[0][k]
    rss = [s[k][0] for s in after]
    drift = (max(rss) - min(rss)) / base_rss * 100
    end_rss, end_fds = samples[-1][1][k]
    print("%s_rss_kib after_warmup=%d min=%d max=%d end=%d drift=%.1f%%" %
          (k, base_rss, min(rss), max(rss), end_rss, drift))
    print("%s_fds after_warmup=%d max=%d end=%d" % (k, base_fds, max(s[k][1] for s in after), end_fds))
    if drift > 5.0:
        print("FAIL: %s RSS moved %.1f%% after the warm-up (bound 5%%)" % (k, drift)); ok = False
    if end_fds > base_fds:
        print("FAIL: %s holds %d fds at the end, %d after the warm-up" % (k, end_fds, base_fds)); ok = False
wrk = open(sys.argv[3]).read()
errors = [int(l.split()[1]) for l in wrk.splitlines() if l.startswith("wrk_filter_error_replies")]
if not errors or errors[0] != 0 or "Non-2xx" in wrk or "Socket errors" in wrk:
    print("FAIL: filter errors under wrk"); ok = False
sys.exit(0 if ok else 1)
PY
bounds_rc=$?
status=0
[ "$churn_rc" -ne 0 ] && { echo "FAIL: churn errors"; status=1; }
[ "$wrk_rc" -ne 0 ] && { echo "FAIL: wrk exited $wrk_rc"; status=1; }
[ "$bounds_rc" -ne 0 ] && status=1
echo "load: $([ $status -eq 0 ] && echo ok || echo FAILED) (logs in $work)"
exit $status
