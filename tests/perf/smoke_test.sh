#!/usr/bin/env bash
# CTest perf_harness_smoke: tests/perf's pieces work, with no load (CI runs this, never run.sh).
#   tests/perf/smoke_test.sh PATH/TO/fitledger-sim
# 1. fitledger-sim generates a small realistic cluster (config/sim/big-realistic.yaml's options on
#    60 nodes): make_body.py writes both Filter bodies from it, --check accepts them and refuses a
#    broken one; a third of the nodes are full.
#    initial_events.py times the pods' WatchList to its end bookmark and refuses a stream without.
# 2. summarize.py --check-replies reads replies made up from the body (agreeing, then not).
# 3. summarize.py turns made-up results of three rounds into the table: medians, per-round ratios,
#    PASS and MISS.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
sim_bin="${1:?usage: smoke_test.sh PATH/TO/fitledger-sim}"
work="$(mktemp -d "${TMPDIR:-/tmp}/fitledger-perf-smoke.XXXXXX")"
sim_pid=""
cleanup() {
  if [[ -n "$sim_pid" ]]; then kill "$sim_pid" 2>/dev/null || true; wait "$sim_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# --- 1. Bodies from a realistic sim ---
sed -e 's/^  nodes: 5000$/  nodes: 60/' -e 's/^  podsPerNode: 30$/  podsPerNode: 3/' \
  "$root/config/sim/big-realistic.yaml" > "$work/sim.yaml"
grep -q '^  nodes: 60$' "$work/sim.yaml" || fail "config/sim/big-realistic.yaml changed shape"
"$sim_bin" --config "$work/sim.yaml" --listen 127.0.0.1:0 --kubeconfig-out "$work/kubeconfig" \
  > "$work/sim.log" 2>&1 &
sim_pid=$!
deadline=$((SECONDS + 60))
until [[ -s "$work/kubeconfig" ]]; do
  kill -0 "$sim_pid" 2>/dev/null || fail "fitledger-sim exited: $(cat "$work/sim.log")"
  (( SECONDS < deadline )) || fail "fitledger-sim did not start"
  sleep 0.05
done
port="$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$work/sim.log" | head -1)"
python3 "$here/make_body.py" --api "http://127.0.0.1:$port" --candidates 20 \
  --names-out "$work/body_names.json" --nodes-out "$work/body_nodes.json" \
  --pod-out "$work/pod.json" --node-names-out "$work/all.txt" --candidates-out "$work/cand.txt" \
  2> "$work/make_body.log" || fail "make_body.py: $(cat "$work/make_body.log")"
for body in names nodes; do
  python3 "$here/make_body.py" --check "$work/body_$body.json" --candidates 20 ||
    fail "make_body.py --check refused its own $body body"
done
python3 - "$work" <<'PY' || fail "the bodies are not what kube-scheduler sends"
import json, re, sys
work = sys.argv[1]
names = json.load(open(f"{work}/body_names.json"))
nodes = json.load(open(f"{work}/body_nodes.json"))
assert list(names) == ["Pod", "Nodes", "NodeNames"] and names["Nodes"] is None, list(names)
assert nodes["NodeNames"] is None and len(nodes["Nodes"]["items"]) == 20
gke = re.compile(r"gke-[a-z0-9-]+-[0-9a-f]{8}-[a-z0-9]{4}")
assert all(gke.fullmatch(n) for n in names["NodeNames"]), names["NodeNames"][:3]
assert [n["metadata"]["name"] for n in nodes["Nodes"]["items"]] == names["NodeNames"]
all_names = open(f"{work}/all.txt").read().split()
assert len(all_names) == 60 and sorted(all_names) == all_names
pod = names["Pod"]
assert 3000 <= len(json.dumps(pod, separators=(",", ":"))) <= 6144
assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m", "memory": "1Gi"}
assert "nodeName" not in pod["spec"] and pod["status"]["phase"] == "Pending"
assert all(m.get("subresource") != "status" for m in pod["metadata"]["managedFields"])
assert json.load(open(f"{work}/pod.json")) == pod
PY
# A body with a pod lacking managedFields' company (no ownerReferences) is refused.
python3 -c "
import json, sys
b = json.load(open(sys.argv[1])); del b['Pod']['metadata']['ownerReferences']
json.dump(b, open(sys.argv[2], 'w'))" "$work/body_names.json" "$work/broken.json"
if python3 "$here/make_body.py" --check "$work/broken.json" --candidates 20 2> "$work/check.err"; then
  fail "make_body.py --check accepted a pod without ownerReferences"
fi
grep -q "no metadata.ownerReferences" "$work/check.err" || fail "unexpected: $(cat "$work/check.err")"
# initial_events.py: the WatchList's initial state, then the bookmark that ends it (the floor
# under the server's sync); a plain LIST has no such bookmark and is refused, and so is a 400.
selector='fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed'
watchlist="/api/v1/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&$selector"
line="$(python3 "$here/initial_events.py" "$port" "$watchlist" --timeout 60 --accept application/json)" ||
  fail "initial_events.py on the WatchList"
pb_line="$(python3 "$here/initial_events.py" "$port" "$watchlist" --timeout 60)" ||
  fail "initial_events.py on the WatchList in protobuf"
list_bytes="$(curl -sS -o /dev/null -w '%{size_download}' "http://127.0.0.1:$port/api/v1/pods?$selector")"
python3 - "$line" "$list_bytes" "$pb_line" <<'PY' || fail "initial_events.py printed $line and $pb_line (the LIST: $list_bytes bytes)"
import json, sys
r = json.loads(sys.argv[1])
assert set(r) == {"ms", "bytes", "protobuf"} and r["ms"] >= 0 and not r["protobuf"], r
assert r["bytes"] > int(sys.argv[2]), r  # every pod as an ADDED event, plus the framing
# By default it asks as fitledger-server does, and the sim answers in protobuf: fewer bytes.
p = json.loads(sys.argv[3])
assert p["protobuf"] and 0 < p["bytes"] < r["bytes"], p
PY
if python3 "$here/initial_events.py" "$port" "/api/v1/pods?$selector" --timeout 60 2> "$work/ie.err"; then
  fail "initial_events.py accepted a LIST, which has no initial-events-end bookmark"
fi
grep -q "the stream ended after" "$work/ie.err" || fail "unexpected: $(cat "$work/ie.err")"
if python3 "$here/initial_events.py" "$port" "/api/v1/pods?watch=true&sendInitialEvents=true" \
    --timeout 60 2> "$work/ie.err"; then
  fail "initial_events.py accepted a refused WatchList (no resourceVersionMatch)"
fi
grep -q "not a 200" "$work/ie.err" || fail "unexpected: $(cat "$work/ie.err")"

# A third of the nodes are full: 20 of 60 carry a filler pod.
fillers="$(curl -sS "http://127.0.0.1:$port/api/v1/pods" | python3 -c '
import json, sys
print(sum(1 for p in json.load(sys.stdin)["items"] if "-fill" in p["metadata"]["name"]))')"
[[ "$fillers" == 20 ]] || fail "want 20 full nodes, got $fillers"

# --- 2. --check-replies ---
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
body = json.load(open(f"{work}/body_names.json"))
names = body["NodeNames"]
fail = {n: ("Insufficient cpu" if i % 2 else "Insufficient memory") for i, n in enumerate(names[:7])}
passing = names[7:]
reply = {"NodeNames": passing, "FailedNodes": fail, "FailedAndUnresolvableNodes": {}, "Error": ""}
items = {n["metadata"]["name"]: n for n in json.load(open(f"{work}/body_nodes.json"))["Nodes"]["items"]}
nodes_reply = {"Nodes": {"metadata": {}, "items": [items[n] for n in passing]}, "FailedNodes": fail,
               "FailedAndUnresolvableNodes": {}, "Error": ""}
for prefix in ("", "shim_"):
    json.dump(reply, open(f"{work}/{prefix}reply_names.json", "w"))
    json.dump(nodes_reply, open(f"{work}/{prefix}reply_nodes.json", "w"))
go = dict(reply, FailedNodes={n: r.lower() for n, r in fail.items()})  # worded its own way
json.dump(go, open(f"{work}/go_reply_names.json", "w"))
PY
python3 "$here/summarize.py" --check-replies "$work" > "$work/payload.jsonl" ||
  fail "--check-replies refused agreeing replies"
python3 - "$work/payload.jsonl" <<'PY' || fail "--check-replies printed $(cat "$work/payload.jsonl")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["body"] for r in rows] == ["names", "nodes"], rows
assert rows[0]["passing"] == 13 and rows[0]["failing"] == 7 and rows[0]["candidates"] == 20
assert rows[0]["reasons"] == {"Insufficient memory": 4, "Insufficient cpu": 3}, rows[0]["reasons"]
assert rows[1]["passing"] == 13 and "go_reply_bytes" not in rows[1]
PY
python3 -c "
import json, sys
r = json.load(open(sys.argv[1])); r['NodeNames'] = r['NodeNames'][1:]
json.dump(r, open(sys.argv[1], 'w'))" "$work/shim_reply_names.json"
if python3 "$here/summarize.py" --check-replies "$work" > /dev/null 2> "$work/replies.err"; then
  fail "--check-replies accepted a shim reply that differs"
fi
grep -q "the shim's reply differs" "$work/replies.err" || fail "unexpected: $(cat "$work/replies.err")"

# --- 3. The table from made-up results ---
python3 - "$work/results.jsonl" <<'PY'
import json, sys
rows = [{"kind": "meta", "date": "2026-01-01T00:00:00Z", "commit": "abc1234", "dirty": False,
         "command": "tests/perf/run.sh", "rounds": 3, "seconds": 8, "quick": 0, "names": "gke",
         "cpus": 2, "cpu_model": "test"},
        {"kind": "load", "when": "start", "loadavg": "0.10 0.20 0.30"},
        {"kind": "sim_watchlist", "ms": 812.4, "bytes": 913075369}]
rps = {"floor": [10000, 12000, 11000], "server": [6000, 5000, 7000],
       "shim": [2100, 2500, 2300], "go": [1000, 1100, 1200]}
p50 = {"floor": [100, 110, 90], "server": [150, 250, 200], "shim": [300, 300, 300],
       "go": [400, 400, 400]}
for r in range(3):
    for system in rps:
        procs = {"floor": ["nginx"], "server": ["server"], "shim": ["shim", "server"], "go": ["go"]}[system]
        for conns in (8, 1):
            rows.append({"kind": "wrk", "system": system, "body": "names", "conns": conns,
                         "round": r + 1, "cpu_us_per_call": {p: 10.0 * (r + 1) for p in procs},
                         "requests": 1000, "seconds": 8, "rps": rps[system][r] if conns == 8 else 1,
                         "errors": 0, "non2xx": 0, "p50_us": p50[system][r], "p90_us": 0,
                         "p99_us": 600 if system == "server" else 300, "max_us": 0})
for r, pods in enumerate([3100, 2900, 3300]):
    rows.append({"kind": "cycle", "round": r + 1, "pods": 1000, "bound": 1000, "pods_per_s": pods,
                 "filter_p50_us": 1, "filter_p99_us": 2, "bind_p50_us": 3, "bind_p99_us": 4,
                 "cpu_us_per_pod": {"server": 5.0, "sim": 6.0}})
for ms in (900, 1200, 950):
    rows.append({"kind": "sync", "name": "s", "api_bytes": 1, "serving_ms": ms,
                 "rss_kib": 100 * 1024, "hwm_kib": 120 * 1024})
rows.append({"kind": "memory", "rss_kib": 160 * 1024, "hwm_kib": 190 * 1024})
rows.append({"kind": "churn", "server_events": 1002, "updates": 1000, "seconds": 5.0, "rate": 199.5,
             "errors": 0, "pods": 5000, "p50_us": 480, "p99_us": 900})
with open(sys.argv[1], "w") as f:
    for row in rows:
        f.write(json.dumps(row) + "\n")
PY
python3 "$here/summarize.py" "$work/results.jsonl" > "$work/table.md" || fail "summarize.py failed"
expect() {  # expect LINE: the table has it, verbatim
  grep -qF -- "$1" "$work/table.md" || { cat "$work/table.md" >&2; fail "missing row: $1"; }
}
# Per-round ratios: 6000/10000, 5000/12000, 7000/11000 -> median 0.6.
expect "| server calls/s at 8 connections / floor's | >= 50% | 60% | PASS |"
# 6000/1000, 5000/1100, 7000/1200 -> median 5.83.
expect "| server calls/s at 8 connections / Go's | >= 3x | 5.83x | PASS |"
# 150/100, 250/110, 200/90 -> median 2.22.
expect "| server p50 / floor's p50 at 1 connection | <= 2x | 2.22x | **MISS** |"
expect "| server p99 at 1 connection | <= 500 us | 600 us | **MISS** |"
# Per-round differences of p50 at 1 connection: 300-150, 300-250, 300-200 -> median 100.
expect "| shim's added p50 over the server's at 1 connection (issue 49) | <= 150 us | 100 us | PASS |"
expect "The shim adds -300 us to the server's p99 at 1 connection"
expect "at 8 connections it serves 2.10x Go's calls/s"
expect "| filter + bind through the server's webhook | >= 3,000 pods/s | 3,100 pods/s | PASS |"
expect "| initial sync of 150,000 pods (start -> SERVING) | <= 1 s | 950 ms | PASS |"
expect "| server RSS after the load | <= 150 MiB | 160 MiB | **MISS** |"
expect "| server peak RSS (VmHWM) | <= 200 MiB | 190 MiB | PASS |"
expect "| fitledger-shim -> fitledger-server (gRPC, Unix socket) | 2,300 | 21% | 2.10x | 300 us / 300 us | shim 20.0 + server 20.0 / shim 20.0 + server 20.0 |"
expect "| 2 | names | server | 5,000 | 250 / 600 | server 20.0 / server 20.0 |"
expect "at abc1234, 2026-01-01T00:00:00Z"
expect "that drops it in 812 ms (913,075,369 bytes)"
expect "| server p99 / floor's p99 at 1 connection, under churn (200 pod updates/s) (issue 49) | <= 2x | 2.00x | PASS |"
expect "| server calls/s at 8 connections / floor's, under churn (200 pod updates/s) (issue 49) | >= 70% | 60% | **MISS** |"
expect "Churn: tests/bench/churn_load sent 1,000 pod updates (merge patches of one annotation on 5,000 pods) in 5 s, 199.5/s, 0 errors, PATCH p50 / p99 480 / 900 us; the server saw 1,002 pod watch events meanwhile."
echo "perf harness smoke: OK"
