#!/usr/bin/env bash
# The docs test: the commands in README.md and docs/*.md run against the real binaries, and
# docs/configuration.md matches the code that parses the configuration and the flags.
#
#   tests/docs/run.sh BUILD_DIR        e.g. tests/docs/run.sh /work/main/build
#
# It starts what `scripts/demo --background` starts, with the same script (scripts/start-embedded:
# fitledger-sim with config/sim/pair.yaml, fitledger-server with and without the ledger serving the
# webhook, a fitledger-shim in front of the first; every port picked by the kernel) in a
# temporary directory laid out like the repository root, with the processes' files in .run/ and
# the same .run/env. It does not build anything.
#
# Runnable blocks (the convention; docs/README.md says the same):
#   - A fenced block whose info string is `sh runnable` is run; any other block is text.
#     `sh runnable requires=TOOL` runs with the real TOOL first on PATH: the one
#     tests/upstream/build made ($FITLEDGER_UPSTREAM_BIN/TOOL; ctest sets FITLEDGER_UPSTREAM_BIN,
#     so the grpcurl blocks run with the pinned grpcurl), else TOOL from PATH. Without either the
#     block fails (it is not skipped). Its PASS line says which TOOL ran.
#   - Each block runs in a fresh `bash -e -o pipefail`, with .run/env already sourced and the
#     working directory at the repository root (its layout, with .run/ of this test), so a block
#     is exactly what a reader types after `scripts/demo --background; source .run/env`.
#   - Blocks run in order: README.md, then docs/*.md by name; within a file, top to bottom.
#   - A fenced block with info string `text expected` right after a runnable block (blank lines
#     between them allowed) lists lines that must appear in the block's output (stdout and
#     stderr), in that order, each as a substring of an output line. Blank lines are ignored.
#   - A block passes when it exits 0 (within 60 s) and every expected line is found. Its PASS or
#     FAIL line gives the time it took. A block that pipes into `grep -q` or `head` fails unrun
#     (see below).
#
# Configuration checks (markers in docs/configuration.md, each followed by a table whose first
# column holds the key or flag in backticks):
#   <!-- config-keys: NAME EXAMPLE PARSER -->  every key in the table appears in EXAMPLE (a YAML
#       file, or the first ```yaml block of a .md file), every key of EXAMPLE is in the table (a
#       key whose type starts with "map" covers its children), and each key's last component
#       appears as a quoted string in PARSER (the sources that read them, comma-separated). A key
#       whose type is "removed" must not be in EXAMPLE (its parser refuses it, naming it).
#   <!-- flags: BINARY -->  every flag in the table is listed by `BINARY --help`, and every flag
#       that BINARY's main.cc defines (its ABSL_FLAGs, read from the source) is in the table.
# Plus: each example config loads in its binary, and the same file with an unknown key appended
# is refused, naming the key.
#
# Prints one line per check, then "N passed, M failed"; exits 1 if any failed.
set -uo pipefail

if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build="$(cd "$1" && pwd)"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
for b in sim/fitledger-sim server/fitledger-server client/shim/fitledger-shim client/ctl/fitledgerctl; do
  if [ ! -x "$build/$b" ]; then echo "docs test: $build/$b is missing (build it first)" >&2; exit 2; fi
done

work="$(mktemp -d /tmp/fitledger-docs.XXXXXX)"
run="$work/.run"
mkdir -p "$run" "$work/.blocks"
cleanup() {
  "$repo/scripts/start-embedded" --stop "$run"
  # The scratch files the blocks write where the docs tell the reader to (docs/api.md: the
  # request bodies in /tmp/fitledger-*.json), named in the blocks themselves.
  if [ -d "$work/.blocks" ]; then
    grep -ohE '/tmp/fitledger-[A-Za-z0-9._-]+' "$work"/.blocks/*.sh 2>/dev/null | sort -u |
      while read -r f; do rm -f "$f"; done
  fi
  rm -rf "$work"
}
trap cleanup EXIT

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; shift; for line in "$@"; do echo "     $line"; done; }

# The repository's layout, with this test's .run/.
for entry in "$repo"/* "$repo"/.[!.]*; do
  name="$(basename "$entry")"
  case "$name" in .run|.git|.blocks) continue ;; esac
  [ -e "$entry" ] && ln -s "$entry" "$work/$name"
done

cd "$work" || exit 1
# What scripts/demo --background starts, from the same script.
if ! "$repo/scripts/start-embedded" "$build" "$run"; then
  echo "docs test: the embedded cluster did not start" >&2
  exit 1
fi

# ---- Runnable blocks -------------------------------------------------------------------------

# extract FILE: writes .blocks/NNNN.{sh,expected,where,requires} for each runnable block.
count=0
extract() {
  local file="$1"
  awk -v file="$file" -v dir="$work/.blocks" -v base="$count" '
    function out(ext) { return sprintf("%s/%04d.%s", dir, base + n, ext) }
    state == "after" && /^[ \t]*$/ { next }
    state == "after" && /^```text expected[ \t]*$/ { state = "expected"; next }
    state == "after" { state = "" }
    state == "" && /^```sh runnable/ {
      n++; state = "block"
      req = ""
      if (match($0, /requires=[^ ]+/)) req = substr($0, RSTART + 9, RLENGTH - 9)
      print req > out("requires"); close(out("requires"))
      print file ":" NR > out("where"); close(out("where"))
      printf "" > out("sh"); printf "" > out("expected")
      next
    }
    state == "block" && /^```[ \t]*$/ { state = "after"; close(out("sh")); next }
    state == "block" { print > out("sh"); next }
    state == "expected" && /^```[ \t]*$/ { state = ""; close(out("expected")); next }
    state == "expected" { if ($0 !~ /^[ \t]*$/) print > out("expected"); next }
    END { print n + 0 > (dir "/count") }
  ' "$repo/$file"
  count=$((count + $(cat "$work/.blocks/count")))
}

docs=(README.md)
for f in "$repo"/docs/*.md; do [ -e "$f" ] && docs+=("docs/$(basename "$f")"); done
for f in "${docs[@]}"; do extract "$f"; done

# contains_in_order OUTPUT_FILE EXPECTED_FILE: prints the first expected line not found.
contains_in_order() {
  awk -v out="$1" '
    BEGIN { while ((getline line < out) > 0) lines[++n] = line }
    { want = $0; sub(/^[ \t]+/, "", want); sub(/[ \t]+$/, "", want)
      found = 0
      while (i < n) { i++; if (index(lines[i], want) > 0) { found = 1; break } }
      if (!found) { print want; exit 1 } }
  ' "$2"
}

# find_tool TOOL: sets tools to a folder holding only TOOL (a link to the one a `requires=TOOL`
# block runs with: $FITLEDGER_UPSTREAM_BIN/TOOL, else TOOL from PATH) and tool_from to where it
# came from; returns 1 if there is neither.
find_tool() {
  local tool="$1" src=""
  tools="$work/.tools/$tool"
  if [ -n "${FITLEDGER_UPSTREAM_BIN:-}" ] && [ -x "$FITLEDGER_UPSTREAM_BIN/$tool" ]; then
    src="$FITLEDGER_UPSTREAM_BIN/$tool"; tool_from="FITLEDGER_UPSTREAM_BIN"
  elif src="$(command -v "$tool" 2>/dev/null)"; then
    tool_from="PATH"
  else
    return 1
  fi
  mkdir -p "$tools" && ln -sf "$src" "$tools/$tool"
}

for ((i = 1; i <= count; i++)); do
  id=$(printf '%04d' "$i")
  where=$(cat "$work/.blocks/$id.where")
  requires=$(cat "$work/.blocks/$id.requires")
  tools=""
  if [ -n "$requires" ] && ! find_tool "$requires"; then
    fail "$where: needs $requires, which is neither in FITLEDGER_UPSTREAM_BIN ('${FITLEDGER_UPSTREAM_BIN:-}') nor on PATH" \
      "(tests/upstream/build builds it and prints that folder; ctest passes it to this test)"
    continue
  fi
  # `CMD | grep -q` and `CMD | head`: the reader exits early, and a CMD that writes more after
  # that dies of SIGPIPE, which pipefail turns into a failed pipeline (an `until` loop over it
  # can spin until it is killed; seen with kubectl's many small writes). `grep PATTERN >/dev/null`
  # and `sed -n 1,Np` read all of their input.
  if grep -qE '(^|[^|])\|[[:space:]]*(grep[[:space:]]+(-[A-Za-z]*q|--quiet|--silent)|head([[:space:]]|$))' \
    "$work/.blocks/$id.sh"; then
    fail "$where: pipes into grep -q or head, which can kill the writer with SIGPIPE under pipefail" \
      "(use grep PATTERN >/dev/null; or sed -n 1,Np, which reads all)"
    continue
  fi
  outfile="$work/.blocks/$id.out"
  started=$(date +%s%N)
  (cd "$work" && PATH="${tools:+$tools:}$PATH" timeout 60 \
    bash -c "source .run/env && set -e -o pipefail && source '$work/.blocks/$id.sh'") >"$outfile" 2>&1
  rc=$?
  took="$(( ($(date +%s%N) - started) / 100000000 ))"
  took="$((took / 10)).$((took % 10)) s"
  if [ "$rc" -ne 0 ]; then
    mapfile -t tail_lines < <(tail -n 15 "$outfile")
    reason="exit status $rc"
    [ "$rc" -eq 124 ] && reason="still running after 60 s (killed)"
    fail "$where: $reason ($took)" "${tail_lines[@]}"
    continue
  fi
  missing=$(contains_in_order "$outfile" "$work/.blocks/$id.expected")
  if [ -n "$missing" ]; then
    mapfile -t tail_lines < <(tail -n 15 "$outfile")
    fail "$where: expected line not in the output: $missing ($took)" "--- output (last 15 lines):" "${tail_lines[@]}"
    continue
  fi
  pass "$where${requires:+ ($requires from $tool_from)} ($took)"
done

# ---- Configuration -------------------------------------------------------------------------

# yaml_keys FILE: the dotted key paths of a YAML file (or of the first ```yaml block of a .md),
# commented-out keys included ("# tls:" / "#   certFile:"); list items as "key[]". Handles the
# block style and one level of flow maps, which is what the example configs use.
yaml_keys() {
  local src="$1"
  if [[ "$src" == *.md ]]; then
    awk '/^```yaml/ { on = 1; next } on && /^```/ { exit } on { print }' "$src"
  else
    cat "$src"
  fi | awk '
    function emit(path) { print path }
    {
      line = $0
      if (line ~ /^#/) {                      # "# key:" / "#   key:": a commented-out example
        sub(/^#/, "", line)
        if (line !~ /^ +[A-Za-z][A-Za-z0-9_.\/-]*:( |$)/) next
        probe = line; sub(/[ \t]+#.*$/, "", probe); sub(/^ +[^:]+: */, "", probe)
        if (probe ~ / /) next                  # prose ("# Flags override: --listen, ..."), not a key
        sub(/^ /, "", line)
      }
      sub(/[ \t]+#.*$/, "", line)
      if (line ~ /^[ \t]*$/ || line ~ /^[ \t]*#/) next
      match(line, /^ */); indent = RLENGTH
      rest = substr(line, indent + 1)
      item = 0
      if (rest ~ /^- /) { item = 1; rest = substr(rest, 3); indent += 2 }
      if (!match(rest, /^[A-Za-z0-9_.\/-]+:/)) next
      key = substr(rest, 1, RLENGTH - 1)
      value = substr(rest, RLENGTH + 1); sub(/^ +/, "", value)
      while (depth > 0 && ind[depth] >= indent) depth--
      if (item) {   # first key of a list item: the parent is a list
        if (depth > 0 && path[depth] !~ /\[\]$/) path[depth] = path[depth] "[]"
      }
      p = (depth > 0 ? path[depth] "." : "") key
      emit(p)
      if (value ~ /^\{.*\}$/) {               # a flow map: its keys too
        inner = substr(value, 2, length(value) - 2)
        n = split(inner, parts, ",")
        for (k = 1; k <= n; k++) {
          part = parts[k]; sub(/^ +/, "", part)
          if (match(part, /^[A-Za-z0-9_.\/-]+:/)) emit(p "." substr(part, 1, RLENGTH - 1))
        }
      }
      if (value == "") { depth++; ind[depth] = indent; path[depth] = p }
    }'
}

# table_after MARKER_REGEX: the first-column values (in backticks) of the table after the marker.
table_after() {
  awk -v marker="$1" '
    index($0, marker) { on = 1; next }
    on && /^\|/ {
      seen = 1
      if ($0 ~ /^\|[ -:|]+\|?$/) next
      split($0, cells, "|"); cell = cells[2]
      if (match(cell, /`[^`]+`/)) {
        v = substr(cell, RSTART + 1, RLENGTH - 2)
        type = cells[3]; gsub(/^ +| +$/, "", type)
        print v "\t" type
      }
      next
    }
    on && seen { exit }
  ' "$repo/docs/configuration.md"
}

config_doc="$repo/docs/configuration.md"
if [ ! -f "$config_doc" ]; then
  fail "docs/configuration.md is missing"
else
  while read -r _ _ name example parser _; do
    marker="<!-- config-keys: $name $example $parser -->"
    documented="$work/.blocks/keys-$name.documented"
    table_after "$marker" > "$documented"
    actual="$work/.blocks/keys-$name.actual"
    yaml_keys "$repo/$example" | sort -u > "$actual"
    problems=()
    while IFS=$'\t' read -r key type; do
      # A removed key is documented (the parser still names it, to refuse it) but not in EXAMPLE.
      if [ "$type" = removed ]; then
        grep -qxF -- "$key" "$actual" && problems+=("removed key $key is still in $example")
      else
        grep -qxF -- "$key" "$actual" || problems+=("documented key $key is not in $example")
      fi
      leaf="${key##*.}"; leaf="${leaf%\[\]}"
      found=0
      for f in ${parser//,/ }; do grep -qF -- "\"$leaf\"" "$repo/$f" && found=1; done
      [ "$found" = 1 ] || problems+=("documented key $key: \"$leaf\" does not appear in $parser")
    done < "$documented"
    while read -r key; do
      covered=0
      while IFS=$'\t' read -r doc type; do
        if [ "$key" = "$doc" ]; then covered=1; break; fi
        if [[ "$type" == map* ]] && [[ "$key" == "$doc".* || "$key" == "${doc}[]".* ]]; then covered=1; break; fi
      done < "$documented"
      [ "$covered" -eq 1 ] || problems+=("key $key of $example is not documented")
    done < "$actual"
    if [ "$(wc -l < "$documented")" -eq 0 ]; then problems+=("no table after $marker"); fi
    if [ ${#problems[@]} -eq 0 ]; then
      pass "docs/configuration.md: $name keys match $example and $parser ($(wc -l < "$documented") keys)"
    else
      fail "docs/configuration.md: $name keys" "${problems[@]}"
    fi
  done < <(grep -o '<!-- config-keys: [^>]*-->' "$config_doc")

  while read -r _ _ binary _; do
    marker="<!-- flags: $binary -->"
    bin="$(find "$build" -type f -name "$binary" -perm -u+x | head -1)"
    help="$("$bin" --help 2>&1)"
    # The flags the binary's main.cc defines, read from the source (independent of --help).
    case "$binary" in
      fitledger-server) src="$repo/server/main.cc" ;;
      fitledger-shim) src="$repo/client/shim/main.cc" ;;
      fitledger-sim) src="$repo/sim/main.cc" ;;
      fitledgerctl) src="$repo/client/ctl/main.cc" ;;
      *) src="" ;;
    esac
    own="$([ -n "$src" ] && grep -oE 'ABSL_FLAG\([^,]+, *[a-z0-9_]+' "$src" | sed -E 's/.*, *//')"
    documented="$(table_after "$marker" | cut -f1 | awk '{ print $1 }' | sed 's/^--//')"
    problems=()
    for flag in $documented; do
      u="${flag//-/_}"
      d="${flag//_/-}"
      grep -qE -- "--($u|$d)( |\(|;|$)" <<<"$help" ||
        problems+=("--$flag is documented but \`$binary --help\` does not list it")
    done
    for flag in $own; do
      found=0
      for d in $documented; do [ "${d//-/_}" = "$flag" ] && found=1; done
      [ "$found" -eq 1 ] || problems+=("$binary defines --$flag ($src) but the table does not document it")
    done
    [ -n "$documented" ] || problems+=("no table after $marker")
    [ -n "$own" ] || problems+=("no ABSL_FLAG found for $binary (its main.cc: '$src')")
    if [ ${#problems[@]} -eq 0 ]; then
      pass "docs/configuration.md: $binary flags match --help"
    else
      fail "docs/configuration.md: $binary flags" "${problems[@]}"
    fi
  done < <(grep -o '<!-- flags: [^>]*-->' "$config_doc")
fi

# load_check NAME EXPECTED_RC_FOR_BAD CMD...: the example config loads (the process stays up until
# its ready condition), and with an unknown key appended it is refused naming the key.
bad_key=docsTestUnknownKey
check_refused() {  # check_refused NAME CONFIG CMD... (CMD gets --config BAD)
  local name="$1" config="$2"; shift 2
  local bad="$work/.blocks/bad-$name.yaml"
  { cat "$repo/$config"; printf '\n%s: 1\n' "$bad_key"; } > "$bad"
  local out rc
  out="$(timeout 10 "$@" --config "$bad" 2>&1)"; rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "$bad_key" <<<"$out"; then
    pass "$config with an unknown key is refused by $name (exit $rc): $(head -1 <<<"$out")"
  else
    fail "$config with an unknown key was not refused by $name" "exit $rc" "$out"
  fi
}
check_refused fitledger-server config/server.yaml "$build/server/fitledger-server"
check_refused fitledger-shim config/shim.yaml "$build/client/shim/fitledger-shim"
check_refused fitledger-sim config/sim/pair.yaml "$build/sim/fitledger-sim"

# The examples load: fitledger-sim (config/sim/pair.yaml), fitledger-server and fitledger-shim
# (config/server.yaml, config/shim.yaml) are what this test started above; their ready files
# prove it. config/server.yaml with only its listener and kubeconfig overridden is already the
# running server; nothing else to start.
if [ -s "$run/server.ready" ] && [ -s "$run/shim.port" ] && [ -s "$run/kubeconfig" ]; then
  pass "config/sim/pair.yaml, config/server.yaml, config/shim.yaml load in their binaries"
else
  fail "the example configs did not load"
fi

summary="$passed passed, $failed failed"
if [ "$failed" -gt 0 ]; then
  # What the demo's processes said, for a failure seen only in CI's output.
  for log in "$run"/*.log; do
    echo "--- last lines of ${log#"$work"/}"
    tail -n 8 "$log"
  done
  echo "--- kubectl get pods -o wide (last 15 lines)"
  (cd "$work" && source .run/env && kubectl get pods -o wide 2>&1 | tail -n 15) || true
fi
echo "$summary"
[ "$failed" -eq 0 ]
