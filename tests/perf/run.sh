#!/usr/bin/env bash
# Issue 8: "never the scheduler's bottleneck, measured side by side". Builds the tools, starts
# fitledger-sim with a generated 5,000-node / 150,000-pod cluster, fitledger-server, fitledger-shim
# and the Go baseline (tests/perf/go-baseline) on loopback, runs every measurement, and prints one
# table (medians over the repeats; ratios from runs interleaved in the same session).
#
#   tests/perf/run.sh [--quick] [--repeats N] [--seconds S] [--clients N] [--build-dir DIR]
#                     [--out DIR] [--no-build] [--inprocess | --inprocess-server BIN]
#
# --inprocess: also measure fitledger-server serving the webhook itself (--webhook-listen: the
# shim's code in the server's process, no gRPC hop); --inprocess-server BIN: the same with another
# server binary. Side by side on the same sim (rows marked "Server webhook (in-process...)").
# Rows marked "one vCPU" repeat the 1-client Filter runs with wrk and the serving processes
# pinned to one CPU (taskset), beside wake_pingpong's cost of a thread wake-up, free and pinned.
# Full: 3 repeats of 8 s load runs, ~14 min (~16 with --inprocess). --quick: 1 repeat of
# 3 s runs, ~1 min. Both after the build.
# Needs: wrk, h2load (nghttp2-client), python3, Go 1.19 (/usr/lib/go-1.19/bin/go), a build dir
# configured with
# -DCMAKE_BUILD_TYPE=Release -DFITLEDGER_BUILD_TESTS=ON (default build-perf; configured if absent).
# Only processes this script starts are stopped, by pid.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PERF="$ROOT/tests/perf"
BUILD="$ROOT/build-perf"
OUT=""
REPEATS=3
SECONDS_PER_RUN=8
BUILD_TOOLS=1
CLIENTS=16          # keep-alive connections / gRPC clients for the throughput runs
CYCLE_PODS=6000
ASSUME_PODS=20000
INPROCESS_BIN=""    # optional: a fitledger-server to run with --webhook-listen (see --inprocess)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) REPEATS=1; SECONDS_PER_RUN=3; CYCLE_PODS=2000; ASSUME_PODS=5000 ;;
    --repeats) REPEATS="$2"; shift ;;
    --seconds) SECONDS_PER_RUN="$2"; shift ;;
    --clients) CLIENTS="$2"; shift ;;
    --build-dir) BUILD="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    --no-build) BUILD_TOOLS=0 ;;
    --inprocess-server) INPROCESS_BIN="$2"; shift ;;
    --inprocess) INPROCESS_BIN="build-dir-server" ;;
    -h|--help) sed -n 2,16p "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
if [[ "$INPROCESS_BIN" == "build-dir-server" ]]; then INPROCESS_BIN="$BUILD/server/fitledger-server"; fi
OUT="${OUT:-$(mktemp -d /tmp/fitledger-perf.XXXXXX)}"
mkdir -p "$OUT"
RESULTS="$OUT/results.jsonl"
: > "$RESULTS"
GO=/usr/lib/go-1.19/bin/go
for tool in wrk h2load python3 taskset "$GO"; do
  command -v "$tool" >/dev/null || {
    echo "tests/perf/run.sh needs $tool (wrk: apt-get install wrk; h2load: apt-get install nghttp2-client; Go: golang-1.19-go)" >&2
    exit 2
  }
done

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# --- Processes (ours only, stopped by pid) ---
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
stop() {  # stop PID: SIGTERM, wait
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
wait_file() {  # wait_file PATH SECONDS
  local deadline=$((SECONDS + $2))
  while [[ ! -s "$1" ]]; do
    if (( SECONDS > deadline )); then echo "timed out waiting for $1" >&2; return 1; fi
    sleep 0.01
  done
}
record() {  # record KIND JSON-LINE: appends {"kind":KIND, ...} to results.jsonl
  printf '{"kind":"%s",%s\n' "$1" "${2#\{}" >> "$RESULTS"
}

# --- Build ---
if (( BUILD_TOOLS )); then
  if [[ ! -f "$BUILD/build.ninja" ]]; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFITLEDGER_BUILD_TESTS=ON >/dev/null
  fi
  log "building (ninja -C $BUILD perf_tools)"
  ninja -C "$BUILD" -j2 perf_tools >/dev/null
fi
log "building the Go baseline"
(cd "$PERF/go-baseline" && GO111MODULE=off GOFLAGS= GOPATH="$OUT/gopath:/usr/share/gocode" \
   GOCACHE="${GOCACHE:-$OUT/gocache}" "$GO" build -o "$OUT/go-baseline" .)
SIM_BIN="$BUILD/sim/fitledger-sim"
SERVER_BIN="$BUILD/server/fitledger-server"
SHIM_BIN="$BUILD/client/shim/fitledger-shim"
BENCH="$BUILD/tests/bench"

python3 "$PERF/make_body.py" > "$OUT/filter_500.json"
# The same request as one gRPC-framed message: h2load's body for direct gRPC calls.
"$BENCH/grpc_filter_load" --body "$OUT/filter_500.json" --write_frame "$OUT/filter_500.grpc"
log "filter body: $(wc -c < "$OUT/filter_500.json") bytes (500 NodeNames, $(python3 -c \
  "import json;print(len(json.dumps(json.load(open('$PERF/pod_4k.json')),separators=(',',':'))))") byte pod)"

cat > "$OUT/server.yaml" <<EOF
kubernetes: {bindTimeout: 3s, listPageSize: 500}
log: {level: warn}
EOF

SIM_PID=""
SIM_PORT=""
start_sim() {  # start_sim NAME YAML
  local dir="$OUT/sim-$1"
  mkdir -p "$dir"
  printf '%s\n' "$2" > "$dir/sim.yaml"
  rm -f "$dir/kubeconfig"  # a reused --out DIR must not hand out a dead sim's address
  "$SIM_BIN" --config "$dir/sim.yaml" --listen 127.0.0.1:0 --kubeconfig-out "$dir/kubeconfig" \
    > "$dir/sim.log" 2>&1 &
  SIM_PID=$!
  PIDS+=("$SIM_PID")
  wait_file "$dir/kubeconfig" 120
  SIM_PORT="$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$dir/sim.log" | head -1)"
  SIM_KUBECONFIG="$dir/kubeconfig"
}

SERVER_PID=""
SERVER_SOCK=""
start_server() {  # start_server NAME: starts fitledger-server, measures its sync (SYNC_JSON)
  local dir="$OUT/server-$1"
  mkdir -p "$dir"
  SERVER_SOCK="$dir/server.sock"
  SERVER_UNARY_SOCK="$dir/unary.sock"
  rm -f "$dir/ready"
  local start_ns
  start_ns="$(date +%s%N)"
  "$SERVER_BIN" --config "$OUT/server.yaml" --kubeconfig "$SIM_KUBECONFIG" \
    --grpc-listen "unix://$SERVER_SOCK,127.0.0.1:0" --monitor-listen 127.0.0.1:0 --ready-file "$dir/ready" \
    --grpc-unary-listen "unix://$SERVER_UNARY_SOCK,127.0.0.1:0" \
    > "$dir/server.log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  "$BENCH/sync_probe" --pid "$SERVER_PID" --ready_file "$dir/ready" --start_ns "$start_ns" \
    --settle_seconds 2 > "$dir/sync.txt"
  SERVER_GRPC_PORT="$(python3 -c "import json;print(json.load(open('$dir/ready'))['grpc_ports'][0])")"
  SERVER_MONITOR_PORT="$(python3 -c "import json;print(json.load(open('$dir/ready'))['monitor_port'])")"
  SERVER_UNARY_PORT="$(python3 -c "import json;print(json.load(open('$dir/ready'))['unary_ports'][0])")"
}

GO_PID=""
GO_PORT=""
start_go() {  # start_go NAME: starts the Go baseline; its port file appears once it has synced
  local dir="$OUT/go-$1"
  mkdir -p "$dir"
  rm -f "$dir/port"
  local start_ns
  start_ns="$(date +%s%N)"
  "$OUT/go-baseline" --api "http://127.0.0.1:$SIM_PORT" --listen 127.0.0.1:0 \
    --port-file "$dir/port" > "$dir/go.log" 2>&1 &
  GO_PID=$!
  PIDS+=("$GO_PID")
  wait_file "$dir/port" 120
  local ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
  GO_PORT="$(cat "$dir/port")"
  sleep 2
  local rss hwm
  rss="$(awk '/^VmRSS:/{print $2}' "/proc/$GO_PID/status")"
  hwm="$(awk '/^VmHWM:/{print $2}' "/proc/$GO_PID/status")"
  record go_sync "{\"serving_ms\":$ms,\"rss_kib\":$rss,\"hwm_kib\":$hwm}"
}

check_filter() {  # check_filter NAME PORT: one Filter must pass all 500 candidates (10 s to sync)
  local got attempt
  for attempt in $(seq 1 50); do
    got="$(curl -sS -X POST -H 'Content-Type: application/json' --data-binary "@$OUT/filter_500.json" \
          "http://127.0.0.1:$2/filter" | python3 -c \
          'import json,sys; r=json.load(sys.stdin); print(len(r.get("NodeNames") or []), repr(r.get("Error","")))')"
    [[ "$got" == "500 ''" ]] && break
    sleep 0.2
  done
  log "$1 filter check: $got"
  [[ "$got" == "500 ''" ]] || { echo "$1: unexpected Filter reply: $got" >&2; exit 1; }
}

cpu_ticks() {  # cpu_ticks PID...: summed utime+stime in clock ticks
  local total=0 pid t
  for pid in "$@"; do
    t="$(awk '{print $14 + $15}' "/proc/$pid/stat")"
    total=$((total + t))
  done
  echo "$total"
}
TICK_US=$((1000000 / $(getconf CLK_TCK)))

# CPU time the serving processes spent per call (microseconds): robust to the machine's other
# load, unlike latency. $1 = ticks before, $2 = ticks after, $3 = calls (including warm-up).
cpu_per_call() { python3 -c "print(round(($2 - $1) * $TICK_US / max(1, $3), 1))"; }

wrk_run() {  # wrk_run KIND PORT CONNECTIONS PID...: the PIDs are the serving processes
  local kind="$1" port="$2" conns="$3" line before after requests
  shift 3
  before="$(cpu_ticks "$@")"
  line="$(FILTER_BODY="$OUT/filter_500.json" ${WRK_CPUS:+taskset -c "$WRK_CPUS"} wrk -t1 -c"$conns" -d"${SECONDS_PER_RUN}s" --latency \
          -s "$PERF/filter.lua" "http://127.0.0.1:$port" | tee -a "$OUT/wrk.log" | sed -n 's/^WRK_JSON //p')"
  after="$(cpu_ticks "$@")"
  requests="$(sed -n 's/.*"requests":\([0-9]*\).*/\1/p' <<< "$line")"
  record "$kind" "{\"clients\":$conns,\"cpu_us_per_call\":$(cpu_per_call "$before" "$after" "$requests"),${line#\{}"
  log "$kind c=$conns: $(tail -1 "$RESULTS")"
}

grpc_run() {  # grpc_run KIND PORT CLIENTS PID: the C++ gRPC client (grpc_filter_load)
  local kind="$1" port="$2" clients="$3" pid="$4" line before after requests
  before="$(cpu_ticks "$pid")"
  line="$("$BENCH/grpc_filter_load" --target "127.0.0.1:$port" --body "$OUT/filter_500.json" \
          --clients "$clients" --seconds "$SECONDS_PER_RUN" --warmup_seconds 0.5 | tee -a "$OUT/grpc.log" \
          | sed -n 's/^GRPC_JSON //p')"
  after="$(cpu_ticks "$pid")"
  # The warm-up's calls are not counted in "requests": scale by the measured share of the time.
  requests="$(python3 -c "import json; r=json.loads('$line'); print(int(r['requests'] * (r['seconds'] + 0.5) / r['seconds']))")"
  record "$kind" "{\"cpu_us_per_call\":$(cpu_per_call "$before" "$after" "$requests"),${line#\{}"
  log "$kind c=$clients: $(tail -1 "$RESULTS")"
}

# h2load (nghttp2's HTTP/2 load generator) sends the same framed request: a lighter client than
# gRPC's own, so its latency is closer to what the server adds. It sees only HTTP statuses, and a
# gRPC error travels in an HTTP 200's trailers, so: every reply must be 200 and carry data
# (> 4,000 bytes per reply on average: the 500 names), and with METRICS_PORT the server's own
# count of failed Filter calls must not move during the run. grpc_echo_server cannot fail a call.
failed_filters() {  # failed_filters MONITOR_PORT: fitledger-server's non-OK Filter calls so far
  curl -sS "http://127.0.0.1:$1/metrics" |
    awk '/^fitledger_server_requests_total\{/ && /method="Filter"/ && !/code="OK"/ {s += $NF} END {print s + 0}'
}
h2load_run() {  # h2load_run KIND PORT CLIENTS PID [METRICS_PORT]
  local kind="$1" port="$2" clients="$3" pid="$4" metrics="${5:-}" before after failed_before=0
  local log="$OUT/h2load-$1-$3.log" line
  rm -f "$log"
  if [[ -n "$metrics" ]]; then failed_before="$(failed_filters "$metrics")"; fi
  before="$(cpu_ticks "$pid")"
  h2load -D "$SECONDS_PER_RUN" --warm-up-time=1 -t 1 -c "$clients" -m 1 -d "$OUT/filter_500.grpc" \
    -H 'content-type: application/grpc' -H 'te: trailers' --log-file="$log" \
    "http://127.0.0.1:$port/fitledger.v1.Extender/Filter" > "$OUT/h2load.out" 2>&1 \
    || { echo "$kind: h2load failed" >&2; tail -20 "$OUT/h2load.out" >&2; exit 1; }
  after="$(cpu_ticks "$pid")"
  cat "$OUT/h2load.out" >> "$OUT/h2load-all.log"
  line="$(python3 - "$log" "$OUT/h2load.out" "$SECONDS_PER_RUN" "$clients" <<'PY'
import json, re, sys
log, out, seconds, clients = sys.argv[1], open(sys.argv[2]).read(), float(sys.argv[3]), int(sys.argv[4])
rows = [l.split() for l in open(log) if l.strip()]
lat = sorted(int(r[2]) for r in rows)
bad = sum(1 for r in rows if r[1] != "200")
data = re.search(r"traffic: .*\(([0-9]+)\) data", out)  # "..., 30.82MB (32316520) data"
data_bytes = int(data.group(1)) if data else 0
pct = lambda p: lat[min(len(lat) - 1, int(p / 100 * (len(lat) - 1) + 0.5))] if lat else 0
print(json.dumps({"clients": clients, "requests": len(lat), "seconds": seconds,
                  "rps": round(len(lat) / seconds, 1), "errors": bad,
                  "reply_bytes": int(data_bytes / max(1, len(lat))),
                  "p50_us": pct(50), "p90_us": pct(90), "p99_us": pct(99),
                  "max_us": lat[-1] if lat else 0}))
PY
)"
  python3 -c "import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if r['requests'] > 0 and r['errors'] == 0 and r['reply_bytes'] > 4000 else 1)" "$line" \
    || { echo "$kind: h2load saw errors or short replies: $line" >&2; tail -20 "$OUT/h2load.out" >&2; exit 1; }
  if [[ -n "$metrics" ]] && (( $(failed_filters "$metrics") != failed_before )); then
    echo "$kind: fitledger-server failed Filter calls during the h2load run (see its /metrics)" >&2
    exit 1
  fi
  requests="$(python3 -c "import json; r=json.loads('$line'); print(int(r['requests'] * (r['seconds'] + 1) / r['seconds']))")"
  record "$kind" "{\"cpu_us_per_call\":$(cpu_per_call "$before" "$after" "$requests"),${line#\{}"
  log "$kind c=$clients: $(tail -1 "$RESULTS")"
}

# Placement. The Filter rows above let the kernel place wrk and the serving processes; on a
# virtual machine, waking a thread on an idle vCPU costs far more than on the running one
# (wake_pingpong measures it). These 1-client runs put wrk and the serving processes on one vCPU
# (taskset, all threads), then give them back all of this script's CPUs.
ALL_CPUS="$(taskset -c -p $$ | sed 's/.*: //')"
ONE_CPU="${ALL_CPUS%%[,-]*}"
set_cpus() {  # set_cpus CPU-LIST PID...
  local cpus="$1" pid
  shift
  for pid in "$@"; do taskset -a -c -p "$cpus" "$pid" > /dev/null; done
}
onecpu_run() {  # onecpu_run KIND PORT PID...: wrk_run at 1 client, wrk and the PIDs on $ONE_CPU
  local kind="$1" port="$2"
  shift 2
  set_cpus "$ONE_CPU" "$@"
  WRK_CPUS="$ONE_CPU" wrk_run "$kind" "$port" 1 "$@"
  set_cpus "$ALL_CPUS" "$@"
}
pingpong_run() {  # pingpong_run KIND CPUS: a 1-byte Unix socket round trip between two threads
  local line
  line="$("$BENCH/wake_pingpong" --cpus "$2" | sed -n 's/^PINGPONG_JSON //p')"
  [[ -n "$line" ]] || { echo "$1: wake_pingpong failed" >&2; exit 1; }
  record "$1" "$line"
  log "$1: $line"
}

# --- 1. Baseline memory: the same 5,000 nodes with no pods ---
log "sync with 5,000 nodes and no pods (memory baseline)"
start_sim empty "generate: {nodes: 5000, podsPerNode: 0, nodePrefix: node-, namespace: bench,
  nodeAllocatable: {cpu: \"32\", memory: 128Gi, pods: 110}, podRequests: {cpu: 100m, memory: 128Mi}}
kubelet: {enabled: true}"
start_server empty
record sync_empty "$(sed -n 's/^SYNC_JSON //p' "$OUT/server-empty/sync.txt")"
stop "$SERVER_PID"
stop "$SIM_PID"

# --- 2. The big cluster: initial sync, repeated ---
log "starting fitledger-sim with config/sim/big.yaml (5,000 nodes x 30 pods)"
start_sim big "$(cat "$ROOT/config/sim/big.yaml")"
log "sim on port $SIM_PORT"
for r in $(seq 1 "$REPEATS"); do
  start_server "sync-$r"
  line="$(sed -n 's/^SYNC_JSON //p' "$OUT/server-sync-$r/sync.txt")"
  record sync "$line"
  log "server sync #$r: $line"
  if (( r < REPEATS )); then stop "$SERVER_PID"; fi
done
for r in $(seq 1 "$REPEATS"); do
  start_go "sync-$r"
  log "go sync #$r: $(tail -1 "$RESULTS")"
  if (( r < REPEATS )); then stop "$GO_PID"; fi
done

SHIM_DIR="$OUT/shim"
mkdir -p "$SHIM_DIR"
launch_shim() {  # launch_shim NAME SOCKET: a fitledger-shim dialing SOCKET; sets LAUNCHED_PID/PORT
  rm -f "$SHIM_DIR/port-$1"
  "$SHIM_BIN" --listen 127.0.0.1:0 --server "unix://$2" --port-file "$SHIM_DIR/port-$1" \
    >> "$SHIM_DIR/$1.log" 2>&1 &
  LAUNCHED_PID=$!
  PIDS+=("$LAUNCHED_PID")
  wait_file "$SHIM_DIR/port-$1" 30
  LAUNCHED_PORT="$(cat "$SHIM_DIR/port-$1")"
  check_filter "$1" "$LAUNCHED_PORT"
}
start_shim() {  # fitledger-shim in front of the current fitledger-server, on its unary socket
  launch_shim shim "$SERVER_UNARY_SOCK"
  SHIM_PID="$LAUNCHED_PID"
  SHIM_PORT="$LAUNCHED_PORT"
}
start_shim
# For comparison, during the Filter rounds only: a second shim on gRPC's server (grpc.listen).
launch_shim shim_grpc "$SERVER_SOCK"
SHIM_GRPC_PID="$LAUNCHED_PID"
SHIM_GRPC_PORT="$LAUNCHED_PORT"
check_filter go "$GO_PORT"
# The webhook-serving server runs only during its own measurements (a second server watching the sim would
# otherwise spend CPU on the other's cycles).
INPROC_PID=""
start_inprocess() {
  mkdir -p "$OUT/inprocess"
  rm -f "$OUT/inprocess/port.json"
  "$INPROCESS_BIN" --config "$OUT/server.yaml" --kubeconfig "$SIM_KUBECONFIG" \
    --grpc-listen "unix://$OUT/inprocess/server.sock" --webhook-listen 127.0.0.1:0 \
    --ready-file "$OUT/inprocess/port.json" >> "$OUT/inprocess/server.log" 2>&1 &
  INPROC_PID=$!
  PIDS+=("$INPROC_PID")
  wait_file "$OUT/inprocess/port.json" 60
  INPROC_PORT="$(sed -E 's/.*"webhook_port":([0-9]+).*/\1/' "$OUT/inprocess/port.json")"
  check_filter inprocess "$INPROC_PORT"
}
if [[ -n "$INPROCESS_BIN" ]]; then start_inprocess; fi
rm -f "$OUT/echo.port"
"$BENCH/grpc_echo_server" --port_file "$OUT/echo.port" > "$OUT/echo.log" 2>&1 &
ECHO_PID=$!
PIDS+=("$ECHO_PID")
wait_file "$OUT/echo.port" 30
ECHO_PORT="$(cat "$OUT/echo.port")"

# The machine's noise floor: a trivial GET (the shim's /healthz, no gRPC) at 1 client.
noise_run() {
  local line
  line="$(wrk -t1 -c1 -d"${SECONDS_PER_RUN}s" --latency -s "$PERF/healthz.lua" \
          "http://127.0.0.1:$SHIM_PORT" | sed -n 's/^WRK_JSON //p')"
  record noise "{\"clients\":1,${line#\{}"
  log "noise floor (GET /healthz): $line"
}

# --- 3. Filter: shim vs Go baseline (interleaved), and direct gRPC ---
for r in $(seq 1 "$REPEATS"); do
  log "filter round $r/$REPEATS"
  wrk_run shim "$SHIM_PORT" 1 "$SHIM_PID" "$SERVER_PID"
  wrk_run go "$GO_PORT" 1 "$GO_PID"
  wrk_run shim "$SHIM_PORT" "$CLIENTS" "$SHIM_PID" "$SERVER_PID"
  wrk_run go "$GO_PORT" "$CLIENTS" "$GO_PID"
  wrk_run shim_grpc "$SHIM_GRPC_PORT" 1 "$SHIM_GRPC_PID" "$SERVER_PID"
  wrk_run shim_grpc "$SHIM_GRPC_PORT" "$CLIENTS" "$SHIM_GRPC_PID" "$SERVER_PID"
  if [[ -n "$INPROC_PID" ]]; then
    wrk_run inprocess "$INPROC_PORT" 1 "$INPROC_PID"
    wrk_run inprocess "$INPROC_PORT" "$CLIENTS" "$INPROC_PID"
  fi
  noise_run
  onecpu_run shim_onecpu "$SHIM_PORT" "$SHIM_PID" "$SERVER_PID"
  onecpu_run go_onecpu "$GO_PORT" "$GO_PID"
  if [[ -n "$INPROC_PID" ]]; then onecpu_run inprocess_onecpu "$INPROC_PORT" "$INPROC_PID"; fi
  pingpong_run wake_free ""
  pingpong_run wake_onecpu "$ONE_CPU"
  grpc_run grpc "$SERVER_GRPC_PORT" 1 "$SERVER_PID"
  grpc_run grpc "$SERVER_GRPC_PORT" "$CLIENTS" "$SERVER_PID"
  h2load_run grpc_h2load "$SERVER_GRPC_PORT" 1 "$SERVER_PID" "$SERVER_MONITOR_PORT"
  h2load_run grpc_h2load "$SERVER_GRPC_PORT" "$CLIENTS" "$SERVER_PID" "$SERVER_MONITOR_PORT"
  h2load_run unary_h2load "$SERVER_UNARY_PORT" 1 "$SERVER_PID" "$SERVER_MONITOR_PORT"
  h2load_run unary_h2load "$SERVER_UNARY_PORT" "$CLIENTS" "$SERVER_PID" "$SERVER_MONITOR_PORT"
  # The floor of the hop: the same calls answered by a server that does no work.
  grpc_run echo_grpc "$ECHO_PORT" 1 "$ECHO_PID"
  h2load_run echo_h2load "$ECHO_PORT" 1 "$ECHO_PID"
done
stop "$ECHO_PID"
stop "$GO_PID"
stop "$SHIM_GRPC_PID"
if [[ -n "$INPROC_PID" ]]; then stop "$INPROC_PID"; fi

# --- 4. Full scheduling cycles (filter + bind) ---
# CPU per scheduled pod of each process, over the timed part only (cycle_load writes a marker
# file when its clock starts; creating the pods is not counted).
cycle_run() {  # cycle_run KIND PORT SERVER_PID SHIM_PID(or SERVER_PID again) RUN
  local kind="$1" port="$2" server_pid="$3" shim_pid="$4" r="$5"
  local b_sim b_server b_shim a_sim a_server a_shim line bound cycle_pid
  rm -f "$OUT/cycle.started"
  "$BENCH/cycle_load" --api_port "$SIM_PORT" --shim_port "$port" --pod "$PERF/pod_4k.json" \
    --prefix "$kind$r" --pods "$CYCLE_PODS" --binders 16 --started_file "$OUT/cycle.started" \
    > "$OUT/$kind-$r.out" 2> "$OUT/$kind-$r.err" &
  cycle_pid=$!
  wait_file "$OUT/cycle.started" 120
  b_sim="$(cpu_ticks "$SIM_PID")"; b_server="$(cpu_ticks "$server_pid")"; b_shim="$(cpu_ticks "$shim_pid")"
  wait "$cycle_pid" || true
  a_sim="$(cpu_ticks "$SIM_PID")"; a_server="$(cpu_ticks "$server_pid")"; a_shim="$(cpu_ticks "$shim_pid")"
  cat "$OUT/$kind-$r.out" >> "$OUT/cycle.log"
  line="$(sed -n 's/^CYCLE_JSON //p' "$OUT/$kind-$r.out")"
  bound="$(sed -n 's/.*"bound":\([0-9]*\).*/\1/p' <<< "$line")"
  if [[ "$server_pid" == "$shim_pid" ]]; then b_shim=0; a_shim=0; fi
  record "$kind" "{\"cpu_us_per_pod_sim\":$(cpu_per_call "$b_sim" "$a_sim" "$bound"),\"cpu_us_per_pod_server\":$(cpu_per_call "$b_server" "$a_server" "$bound"),\"cpu_us_per_pod_shim\":$(cpu_per_call "$b_shim" "$a_shim" "$bound"),${line#\{}"
  log "$kind #$r: $(tail -1 "$RESULTS")"
}
for r in $(seq 1 "$REPEATS"); do
  cycle_run cycle "$SHIM_PORT" "$SERVER_PID" "$SHIM_PID" "$r"
done
if [[ -n "$INPROCESS_BIN" ]]; then
  # Alone on the sim, as in the chart: the shim's server would otherwise decode every watch
  # event of these cycles on the same 2 cores. Both come back (a fresh sync) afterwards.
  stop "$SHIM_PID"
  stop "$SERVER_PID"
  start_inprocess
  for r in $(seq 1 "$REPEATS"); do
    cycle_run cycle_inprocess "$INPROC_PORT" "$INPROC_PID" "$INPROC_PID" "$r"
  done
  stop "$INPROC_PID"
  start_server after-cycles
  start_shim
fi

# --- 5. Memory per assumed pod (process level): binds held Assumed by a long watch lag ---
line="$("$BENCH/cycle_load" --api_port "$SIM_PORT" --shim_port "$SHIM_PORT" --pod "$PERF/pod_4k.json" \
        --prefix assume --pods "$ASSUME_PODS" --binders 16 --skip_filter --watch_lag 600s \
        --rss_pid "$SERVER_PID" 2> "$OUT/assume.err" | tee -a "$OUT/cycle.log" | sed -n 's/^CYCLE_JSON //p')"
record assume "$line"
log "assume: $line"

# --- 6. Ledger-level memory (heap bytes, in process) ---
"$BENCH/ledger_memory_bench" --benchmark_format=json > "$OUT/ledger_memory.json" 2>/dev/null
python3 - "$OUT/ledger_memory.json" >> "$RESULTS" <<'EOF'
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    print(json.dumps({"kind": "ledger_memory", "name": b["name"], "bytes_per_pod": b["bytes_per_pod"]}))
EOF

cleanup
PIDS=()
log "results: $RESULTS"
python3 "$PERF/summarize.py" "$RESULTS" --repeats "$REPEATS" --seconds "$SECONDS_PER_RUN" \
  --clients "$CLIENTS" | tee "$OUT/table.md"
