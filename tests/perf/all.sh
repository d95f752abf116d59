#!/usr/bin/env bash
# Issue 49 in one command: every harness, one after the other (each needs the machine to itself),
# then every target of every harness with its PASS or MISS, in OUT/targets.md and on stdout:
#   run.sh             the table against the floor (issue 24), with the split layout's added
#                      latency (item 2);
#   run.sh --churn 200 the same under 200 pod updates a second (item 3);
#   sched.sh           pods/s by the real kube-scheduler with and without each extender (item 1;
#                      server-fb too: the default layout without prioritize, one call per pod);
#   sched.sh --sync    fitledger-server's sync of 5,000 nodes and 150,000 pods from kube-apiserver
#                      (item 4; figures, no target);
#   scale.sh           1,000 / 5,000 / 15,000 nodes from the sim (item 4);
#   grpc_hop.sh        which stock gRPC API makes the cheaper hop (item 2; figures);
#   soak.sh            an hour of churn (item 5), only with --soak (it takes the hour).
#
#   tests/perf/all.sh [--out DIR] [--soak]
#
# About 25 minutes without --soak on a 2-core machine (24.5 at 0a95822). Each harness's own
# output is in OUT/<name>/ (its table.md and log).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PERF="$ROOT/tests/perf"
OUT=""
SOAK=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) OUT="$2"; shift ;;
    --soak) SOAK=1 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
OUT="${OUT:-$(mktemp -d /tmp/fitledger-all.XXXXXX)}"
mkdir -p "$OUT"
step() { echo "[$(date +%H:%M:%S)] tests/perf/all.sh: $*" >&2; }

# What the harnesses need, checked before the first one starts (each checks again).
missing=()
for tool in wrk:wrk nginx:nginx-light curl:curl python3:python3 /usr/lib/go-1.19/bin/go:golang-1.19-go; do
  command -v "${tool%%:*}" >/dev/null || missing+=("${tool%%:*} (apt-get install ${tool#*:})")
done
command -v go >/dev/null || [[ -x /usr/local/go/bin/go ]] || missing+=("Go 1.26 for sched.sh (docs/testing.md)")
if (( ${#missing[@]} )); then
  printf 'tests/perf/all.sh needs: %s\n' "${missing[@]}" >&2
  exit 2
fi

# One harness: its output in OUT/NAME.log. A harness that fails is reported (the end of its log)
# and the next one runs; all.sh then exits 1.
failed=()
harness() {
  local name="$1" rc=0
  shift
  step "$name: $*"
  "$@" > "$OUT/$name.log" 2>&1 || rc=$?
  if (( rc != 0 )); then
    echo "tests/perf/all.sh: $name failed (exit $rc); the end of $OUT/$name.log:" >&2
    tail -5 "$OUT/$name.log" >&2
    failed+=("$name")
  fi
}

harness run "$PERF/run.sh" --out "$OUT/run"
harness churn "$PERF/run.sh" --no-build --churn 200 --out "$OUT/churn"
harness hop "$PERF/grpc_hop.sh" --body "$OUT/run/body_names.json" --out "$OUT/hop"
harness scale "$PERF/scale.sh" --no-build --out "$OUT/scale"
harness sched "$PERF/sched.sh" --configs baseline,server,server-fb,shim,go --out "$OUT/sched"
harness sync "$PERF/sched.sh" --sync --out "$OUT/sync"
if (( SOAK )); then
  harness soak "$PERF/soak.sh" --out "$OUT/soak"
fi

{
  echo "# Issue 49's targets, $(git -C "$ROOT" rev-parse --short HEAD) ($(date -u +%Y-%m-%dT%H:%MZ))"
  for part in run churn scale sched soak; do
    table="$OUT/$part/table.md"
    [[ "$part" == soak ]] && table="$OUT/soak.log"
    [[ -f "$table" ]] || continue
    echo
    echo "## $part"
    grep -E 'PASS|MISS' "$table" || echo "(no targets found in $table)"
  done
  for part in hop sync; do
    [[ -f "$OUT/$part/table.md" ]] || continue
    echo
    echo "## $part (figures, no target)"
    cat "$OUT/$part/table.md"
  done
  if (( ${#failed[@]} )); then
    echo
    echo "## failed (see OUT/NAME.log): ${failed[*]}"
  fi
} | tee "$OUT/targets.md"
(( ${#failed[@]} == 0 ))
