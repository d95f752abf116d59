#!/usr/bin/env bash
# Two builds of one google-benchmark binary against each other, in interleaved pairs: did a change,
# or the machine, move a benchmark? (docs/performance.md, "What changed").
#   tests/perf/ab_bench.sh BENCH_A BENCH_B FILTER [PAIRS]
# BENCH_A / BENCH_B are the same benchmark binary built from two commits (e.g. one from a git
# worktree of the commit before); FILTER is a --benchmark_filter regex that must select exactly one
# benchmark. Each pair runs A then B, 3 repetitions each, and takes each run's median CPU time.
# Prints the pairs, both medians, the median of the per-pair ratios B / A, and in how many pairs
# B was faster.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
A="$1"
B="$2"
FILTER="$3"
PAIRS="${4:-8}"
D="$(mktemp -d "${TMPDIR:-/tmp}/fitledger-ab-bench.XXXXXX")"
trap 'rm -rf "$D"' EXIT

# median_cpu BIN: the median CPU time of FILTER's benchmark, in the benchmark's own unit.
median_cpu() {
  "$1" --benchmark_filter="$FILTER" --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true --benchmark_format=json > "$D/out.json" 2> /dev/null
  python3 - "$D/out.json" <<'EOF'
import json, sys
runs = [b for b in json.load(open(sys.argv[1]))["benchmarks"]
        if b.get("aggregate_name") == "median"]
names = {b["run_name"] for b in runs}
if len(names) != 1:
    sys.exit(f"the filter selects {len(names)} benchmarks ({sorted(names)}); it must select one")
print(f"{runs[0]['cpu_time']:.1f} {runs[0]['time_unit']}")
EOF
}

: > "$D/pairs.txt"
for pair in $(seq 1 "$PAIRS"); do
  a="$(median_cpu "$A")"
  b="$(median_cpu "$B")"
  echo "pair $pair: A ${a}, B ${b}"
  echo "${a%% *} ${b%% *} ${a##* }" >> "$D/pairs.txt"
done
python3 - "$D/pairs.txt" <<'EOF'
import statistics, sys
pairs = [line.split() for line in open(sys.argv[1])]
a = [float(p[0]) for p in pairs]
b = [float(p[1]) for p in pairs]
unit = pairs[0][2]
ratios = [y / x for x, y in zip(a, b)]
print(f"CPU time ({unit}): A median {statistics.median(a):,.1f}, B median {statistics.median(b):,.1f}, "
      f"B / A per pair, median {statistics.median(ratios):.3f}; B faster in "
      f"{sum(r < 1 for r in ratios)} of {len(ratios)}")
EOF
