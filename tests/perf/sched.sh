#!/usr/bin/env bash
# Issue 49, measurement 1: pods scheduled per second by the real kube-scheduler (v1.37.2, built by
# tests/upstream/build) with no extender, with fitledger-server's webhook (the chart's default
# layout), with fitledger-shim in front of it (the split layout) and with tests/perf/go-baseline,
# in one run, rounds interleaved; kube-scheduler's own scheduler_scheduling_attempt_duration_seconds
# p50 / p99. The shape is scheduler_perf's SchedulingBasic: NODES nodes, INIT_PODS pods already
# bound, PODS measured pods created in bulk. The harness is tests/upstream/suite/schedperf
# (TestSchedulingHarness runs it small in the test suite); it prints each run, then the table with
# every target as PASS or MISS, also written to OUT/table.md.
#
#   tests/perf/sched.sh [--nodes N] [--init-pods N] [--pods N] [--rounds N]
#                       [--configs baseline,server,shim,go] [--profile]
#                       [--build-dir DIR] [--upstream-bin DIR] [--server-b BINARY]
#                       [--percentage N] [--out DIR]
#   tests/perf/sched.sh --sync [--nodes N] [--init-pods N] [--rounds N] [--build-dir DIR] [--out DIR]
#
# --configs: which configurations, in this order each round (server-fb: fitledger-server with
# filter and bind but no prioritize, the chart's extender.prioritize: false). --profile: round 1
# of each runs under `perf record -a` (linux-perf); OUT/<config>.txt has the CPU share of each
# process and the top symbols of kube-scheduler and fitledger. --upstream-bin: a folder with the
# upstream binaries to run instead of tests/upstream/build's (e.g. a kube-scheduler built with its
# symbols, for --profile: upstream's ldflags strip them). --server-b: another fitledger-server
# binary, run as the configuration server-b (as server; add server-b to --configs), to measure a
# change in one run. --percentage: the profile's percentageOfNodesToScore, 1..100 (default or 0:
# kube-scheduler's adaptive one, 10% at 5,000 nodes).
#
# --sync (issue 49 item 4): instead, NODES nodes and INIT_PODS bound pods (default 5,000 and
# 150,000) in etcd, then fitledger-server started ROUNDS times against kube-apiserver: start to
# /readyz 200, VmRSS and VmHWM (BenchmarkSyncFromAPIServer).
#
# Defaults: 5,000 nodes, 5,000 bound pods, 3,000 measured pods, 3 rounds. Needs Go 1.26 and a
# build dir with fitledger-server and fitledger-shim (default build, the Release build
# scripts/test makes; built here if missing). Everything runs on loopback, on this machine's cores
# beside etcd and kube-apiserver.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
NODES=5000
INIT_PODS=""  # 5,000; 150,000 with --sync
PODS=3000
ROUNDS=3
BUILD="$ROOT/build"
OUT=""
CONFIGS=""
PROFILE=0
SYNC=0
UPSTREAM_BIN=""
SERVER_B=""
PERCENTAGE=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) NODES="$2"; shift ;;
    --init-pods) INIT_PODS="$2"; shift ;;
    --pods) PODS="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --configs) CONFIGS="$2"; shift ;;
    --profile) PROFILE=1 ;;
    --sync) SYNC=1 ;;
    --build-dir) BUILD="$2"; shift ;;
    --upstream-bin) UPSTREAM_BIN="$(realpath "$2")"; shift ;;
    --percentage) PERCENTAGE="$2"; shift ;;
    --server-b) SERVER_B="$(realpath "$2")"; shift ;;
    --out) OUT="$2"; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
[[ "$PERCENTAGE" == 0 ]] && PERCENTAGE=""
if [[ -n "$PERCENTAGE" ]] && ! [[ "$PERCENTAGE" =~ ^[0-9]+$ && "$PERCENTAGE" -le 100 ]]; then
  echo "--percentage: an integer in 0..100, got $PERCENTAGE" >&2
  exit 2
fi
if [[ -n "$SERVER_B" && ",$CONFIGS," != *,server-b,* ]]; then
  echo "--server-b: add server-b to --configs to run it" >&2
  exit 2
fi
if [[ -z "$INIT_PODS" ]]; then
  if (( SYNC )); then INIT_PODS=150000; else INIT_PODS=5000; fi
fi
GO="$(command -v go || true)"
[[ -z "$GO" && -x /usr/local/go/bin/go ]] && GO=/usr/local/go/bin/go
[[ -n "$GO" ]] || { echo "tests/perf/sched.sh needs Go 1.26 (docs/testing.md)" >&2; exit 2; }
OUT="${OUT:-$(mktemp -d /tmp/fitledger-sched.XXXXXX)}"
mkdir -p "$OUT"
if (( PROFILE )); then
  command -v perf >/dev/null || { echo "--profile needs perf (apt-get install linux-perf)" >&2; exit 2; }
fi

[[ -n "${UPSTREAM_BIN:-}" ]] || UPSTREAM_BIN="$("$ROOT/tests/upstream/build" | tail -n 1)"
if [[ ! -x "$BUILD/server/fitledger-server" || ! -x "$BUILD/client/shim/fitledger-shim" ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DFITLEDGER_UPSTREAM_BIN="$UPSTREAM_BIN" >/dev/null
  cmake --build "$BUILD" --target fitledger-server fitledger-shim
fi
# Absolute paths: the harness runs from tests/upstream/suite.
SERVER="$(realpath "$(find "$BUILD" -name fitledger-server -type f -perm -u+x | head -n 1)")"
SHIM="$(realpath "$(find "$BUILD" -name fitledger-shim -type f -perm -u+x | head -n 1)")"
echo "sched.sh: fitledger-server $SERVER, fitledger-shim $SHIM, upstream $UPSTREAM_BIN"

cd "$ROOT/tests/upstream/suite"
if (( SYNC )); then
  echo "sched.sh --sync: $NODES nodes, $INIT_PODS bound pods, $ROUNDS starts; out $OUT"
  env GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
    FITLEDGER_UPSTREAM_BIN="$UPSTREAM_BIN" FITLEDGER_SERVER="$SERVER" \
    SYNCPERF_NODES="$NODES" SYNCPERF_PODS="$INIT_PODS" SYNCPERF_ROUNDS="$ROUNDS" \
    SCHEDPERF_OUT="$OUT/table.md" \
    "$GO" test -run '^$' -bench '^BenchmarkSyncFromAPIServer$' -benchtime 1x -timeout 3h \
      ./schedperf | tee "$OUT/run.log"
  echo "sched.sh: the table is in $OUT/table.md"
  exit 0
fi
echo "sched.sh: $NODES nodes, $INIT_PODS bound pods, $PODS measured pods, $ROUNDS rounds; out $OUT"
env GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
  FITLEDGER_UPSTREAM_BIN="$UPSTREAM_BIN" FITLEDGER_SERVER="$SERVER" FITLEDGER_SHIM="$SHIM" \
  FITLEDGER_SERVER_B="$SERVER_B" FITLEDGER_SOURCE_DIR="$ROOT" FITLEDGER_GO="$GO" \
  SCHEDPERF_NODES="$NODES" SCHEDPERF_INIT_PODS="$INIT_PODS" SCHEDPERF_PODS="$PODS" \
  SCHEDPERF_ROUNDS="$ROUNDS" SCHEDPERF_OUT="$OUT/table.md" SCHEDPERF_CONFIGS="$CONFIGS" \
  SCHEDPERF_PERCENTAGE="$PERCENTAGE" \
  SCHEDPERF_PROFILE_DIR="$([[ $PROFILE == 1 ]] && echo "$OUT")" \
  "$GO" test -run '^$' -bench '^BenchmarkSchedulingThroughput$' -benchtime 1x -timeout 3h \
    ./schedperf | tee "$OUT/run.log"
echo "sched.sh: the table is in $OUT/table.md"
