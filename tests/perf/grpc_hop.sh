#!/usr/bin/env bash
# Issue 49 item 2: which stock gRPC API makes the cheaper hop for the split layout. One Filter call
# at a time (one client, as kube-scheduler's one scheduling loop) from tests/bench/grpc_filter_load
# to tests/bench/grpc_echo_server (every candidate passes, no work: the cost of gRPC itself) over
# a Unix socket, as fitledger-shim reaches fitledger-server, for each pair of client API (sync:
# the blocking stub call; callback: the stub's callback API, as fitledger-shim calls) and server
# API (callback: as fitledger-server serves; sync: a Service on gRPC's thread pool). The pairs are
# interleaved in each round; medians of the rounds' p50 / p99 go to stdout and OUT/table.md.
#
#   tests/perf/grpc_hop.sh --body BODY.json [--rounds 3] [--seconds 5] [--build-dir DIR] [--out DIR]
#
# BODY is kube-scheduler's Filter body (tests/perf/make_body.py's NodeNames body, as run.sh
# writes it to OUT/body_names.json). Needs a Release build dir with grpc_echo_server and
# grpc_filter_load (default build-perf; `ninja -C build-perf grpc_echo_server grpc_filter_load`).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="$ROOT/build-perf"
BODY=""
ROUNDS=3
SECONDS_PER_RUN=5
OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --body) BODY="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --seconds) SECONDS_PER_RUN="$2"; shift ;;
    --build-dir) BUILD="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
[[ -f "$BODY" ]] || { echo "--body: kube-scheduler's Filter body (a file)" >&2; exit 2; }
for bin in grpc_echo_server grpc_filter_load; do
  [[ -x "$BUILD/tests/bench/$bin" ]] || { echo "missing $BUILD/tests/bench/$bin" >&2; exit 2; }
done
OUT="${OUT:-$(mktemp -d /tmp/fitledger-hop.XXXXXX)}"
mkdir -p "$OUT"
RESULTS="$OUT/results.jsonl"
: > "$RESULTS"
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true' EXIT
for server_api in callback sync; do
  rm -f "$OUT/$server_api.port" "$OUT/$server_api.sock"
  "$BUILD/tests/bench/grpc_echo_server" --api "$server_api" --listen "unix://$OUT/$server_api.sock" \
    --port_file "$OUT/$server_api.port" > "$OUT/echo-$server_api.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 300); do [[ -s "$OUT/$server_api.port" ]] && break; sleep 0.05; done
  [[ -s "$OUT/$server_api.port" ]] || { echo "echo server ($server_api) did not start" >&2; exit 1; }
done
for r in $(seq 1 "$ROUNDS"); do
  for client_api in callback sync; do
    for server_api in callback sync; do
      line="$("$BUILD/tests/bench/grpc_filter_load" --target "unix://$OUT/$server_api.sock" \
        --body "$BODY" --clients 1 --seconds "$SECONDS_PER_RUN" --api "$client_api" |
        sed -n 's/^GRPC_JSON //p')"
      [[ "$line" == *'"errors":0,'* ]] || { echo "errors: $line" >&2; exit 1; }
      printf '{"round":%d,"client":"%s","server":"%s",%s\n' "$r" "$client_api" "$server_api" "${line#\{}" >> "$RESULTS"
      echo "round $r client $client_api server $server_api: $line" >&2
    done
  done
done
python3 - "$RESULTS" "$OUT/table.md" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
out = ["| client API -> server API (echo, Unix socket, 1 call at a time) | p50 us | p99 us | calls/s | each round's p50 |",
       "|---|---|---|---|---|"]
for client in ("callback", "sync"):
    for server in ("callback", "sync"):
        rs = [r for r in rows if r["client"] == client and r["server"] == server]
        out.append(f"| {client} -> {server}{' (fitledger today)' if (client, server) == ('callback', 'callback') else ''} "
                   f"| {statistics.median(r['p50_us'] for r in rs):.0f} | {statistics.median(r['p99_us'] for r in rs):.0f} "
                   f"| {statistics.median(r['rps'] for r in rs):,.0f} | {', '.join(str(r['p50_us']) for r in rs)} |")
text = "\n".join(out) + "\n"
open(sys.argv[2], "w").write(text)
print(text)
EOF
