#!/usr/bin/env bash
# How long fitledger-server's leader resync takes on a big cluster, measured against
# fitledger-sim: the server follows a Lease (leaderElection) as "bench-a"; each round moves the
# Lease to "bench-a_<uuid>" (a new term, as kube-scheduler's leader election writes on
# acquiring) and waits until the server has re-listed the pods (fitledger_leader_resyncs_total
# grows), then moves it to "bench-b_<uuid>" and waits until the server is deposed
# (fitledger_leader 0).
#
#   tests/sim/leader_resync.sh [BUILD_DIR] [CONFIG]   (defaults: build, config/sim/big.yaml)
#   ROUNDS=5 PAGE_SIZE=500 (the defaults; PAGE_SIZE is the server's kubernetes.listPageSize)
#
# Per round it prints the server's own figure (fitledger_leader_resync_seconds: from the Lease
# showing this server's scheduler as the holder to the consistent LIST applied) and the wall
# time this script saw from its Lease update answered to fitledger_leader 1 (polled every 10 ms,
# so it includes the Lease watch's delivery), then the medians; and, for comparison, the server's
# initial sync in the same run (its start to /readyz 200, polled every 50 ms).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
CONFIG="${2:-$ROOT/config/sim/big.yaml}"
ROUNDS="${ROUNDS:-5}"
PAGE_SIZE="${PAGE_SIZE:-500}"  # the server's kubernetes.listPageSize (the consistent LIST's pages)
WORK="$(mktemp -d /tmp/fitledger-leader-resync.XXXXXX)"
log() { echo "[leader_resync] $*" >&2; }
# shellcheck source=tests/sim/bench_lib.sh
source "$ROOT/tests/sim/bench_lib.sh"

log "starting fitledger-sim ($CONFIG)"
launch_sim "$CONFIG"

cat > "$WORK/server.yaml" <<EOF
kubernetes:
  listPageSize: $PAGE_SIZE
leaderElection:
  leaseName: fitledger-scheduler
  leaseNamespace: fitledger
EOF
log "starting fitledger-server; waiting for it to be ready (synced)"
T0="$(date +%s.%N)"
launch_server --leader-identity bench-a
until curl -fsS "http://127.0.0.1:$MONITOR/readyz" > /dev/null 2>&1; do sleep 0.05; done
T1="$(date +%s.%N)"
echo "initial sync (start -> /readyz 200, for comparison): $(python3 -c "print(f'{$T1 - $T0:.3f}')") s"

python3 - "$SIM" "$MONITOR" "$ROUNDS" "$WORK/server.log" <<'EOF'
import json, statistics, sys, time, urllib.request, uuid
from datetime import datetime, timezone

sim, monitor, rounds, server_log = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
LEASES = "/apis/coordination.k8s.io/v1/namespaces/fitledger/leases"

def call(method, path, body=None):
    req = urllib.request.Request(sim + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)

def metric(name):
    with urllib.request.urlopen(f"http://127.0.0.1:{monitor}/metrics", timeout=60) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0

def wait(cond, seconds=600):
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            sys.exit("timed out")
        time.sleep(0.01)

transitions = 0
def lease(holder, rv=None):
    # As client-go's leaderelection.go tryAcquireOrRenew writes on acquiring: a new
    # acquireTime, leaseTransitions + 1.
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    meta = {"name": "fitledger-scheduler", "namespace": "fitledger"}
    if rv:
        meta["resourceVersion"] = rv
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
            "spec": {"holderIdentity": f"{holder}_{uuid.uuid4()}", "leaseDurationSeconds": 3600,
                     "acquireTime": now, "renewTime": now, "leaseTransitions": transitions}}

def move(holder):
    global transitions
    transitions += 1
    rv = call("GET", LEASES + "/fitledger-scheduler")["metadata"]["resourceVersion"]
    call("PUT", LEASES + "/fitledger-scheduler", lease(holder, rv))

call("POST", LEASES, lease("bench-b"))
rows = []
for i in range(rounds):
    before = metric("fitledger_leader_resyncs_total")
    t0 = time.monotonic()
    move("bench-a")
    wait(lambda: metric("fitledger_leader") == 1)
    wall = time.monotonic() - t0
    assert metric("fitledger_leader_resyncs_total") == before + 1
    rows.append((metric("fitledger_leader_resync_seconds"), wall))
    move("bench-b")
    wait(lambda: metric("fitledger_leader") == 0)

pods = [l for l in open(server_log) if "leader resync done" in l]
print("| round | fitledger_leader_resync_seconds | Lease update -> fitledger_leader 1 (s) |")
print("|---|---|---|")
for i, (s, w) in enumerate(rows, 1):
    print(f"| {i} | {s:.3f} | {w:.3f} |")
print(f"| median | {statistics.median(r[0] for r in rows):.3f} | "
      f"{statistics.median(r[1] for r in rows):.3f} |")
print("last log record:", pods[-1].strip() if pods else "none")
EOF
