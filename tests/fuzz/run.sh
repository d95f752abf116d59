#!/usr/bin/env bash
# Runs every fitledger libFuzzer target for a bounded time and fails on the first crash.
#   tests/fuzz/run.sh BUILD_DIR SECONDS
# BUILD_DIR is a clang build with -DFITLEDGER_FUZZ=ON (usually also
# -DFITLEDGER_SANITIZE=address,undefined) and the fitledger_fuzzers target built. Each target
# starts from its seed corpus in tests/fuzz/corpus/<target>/ (read-only: new inputs go to a
# scratch directory) and runs SECONDS seconds, FITLEDGER_JOBS (default 2) targets at a time.
# Prints one line per target with its exec count; a crash leaves the reproducer in the scratch
# directory and the script exits 1.
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR SECONDS" >&2
  exit 2
fi
build="$1"
seconds="$2"
here="$(cd "$(dirname "$0")" && pwd)"
scratch="$(mktemp -d "${TMPDIR:-/tmp}/fitledger-fuzz.XXXXXX")"
targets=(quantity_fuzz json_codec_fuzz watch_event_fuzz kubeconfig_fuzz http_server_fuzz)
# Targets run side by side, FITLEDGER_JOBS (default 2) at a time: each is one process on one core,
# so each still gets its SECONDS of a core, in fewer seconds of wall time.
jobs="${FITLEDGER_JOBS:-2}"

# run_one TARGET: writes its line (and a crash's first report lines) to $scratch/TARGET/result.
run_one() {
  local t="$1" bin="$build/tests/fuzz/$1" log rc execs
  mkdir -p "$scratch/$t/corpus" "$scratch/$t/artifacts"
  if [ ! -x "$bin" ]; then
    echo "$t: $bin is missing (configure with -DFITLEDGER_FUZZ=ON and clang, build fitledger_fuzzers)" \
      >"$scratch/$t/result"
    return
  fi
  log="$scratch/$t/log"
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$scratch/$t/artifacts/" "$scratch/$t/corpus" "$here/corpus/$t" >"$log" 2>&1
  rc=$?
  execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}')
  if [ "$rc" -ne 0 ]; then
    { echo "$t: CRASH (exit $rc) after ${execs:-?} execs; reproducer in $scratch/$t/artifacts/"
      grep -E 'ERROR|SUMMARY|runtime error' "$log" | head -5; } >"$scratch/$t/result"
  else
    echo "$t: ok, ${seconds}s, ${execs:-?} execs, corpus $(find "$scratch/$t/corpus" -type f | wc -l) new inputs" \
      >"$scratch/$t/result"
  fi
}

running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
  run_one "$t" &
  running=$((running + 1))
done
wait
status=0
for t in "${targets[@]}"; do
  if [ -f "$scratch/$t/result" ]; then cat "$scratch/$t/result"; else echo "$t: no result (is missing)"; fi
  grep -q ': ok, ' "$scratch/$t/result" 2>/dev/null || status=1
done
if [ "$status" -eq 0 ]; then
  rm -rf "$scratch"
else
  echo "fuzz: kept $scratch (the failing targets' logs and inputs)" >&2
fi
exit "$status"
