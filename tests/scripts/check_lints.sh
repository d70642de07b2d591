#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The lints of `gpuplug check` (docs/lints.md) against the lint plugins of
# tests/unit/lint_plugins, one mistake each, and against files made here from the real host
# plugin (cut short at several lengths, overwritten with garbage, a text file): for each, isolated
# and in process (--no-isolate), the exit status is 1 or 3 (never a crash, a usage error or the time limit),
# the lint that owns the mistake is "FAILED" naming it, the others are "ok" where the file is a
# well-formed shared object, and the last line is the summary. Then the real plugins (host, the
# template built against ABI 1.0, and every libgpuplug-*.so of the build's plugin folder: cuda and
# hip where built) pass every lint, through --plugin and through --backend.
# A plugin that crashes or aborts while it loads (tests/unit/hostile_plugins) fails the loading
# lints, naming the signal, isolated and in process, and the run goes on. The internal --run-lints
# refuses to run by hand.
# Usage: check_lints.sh <gpuplug> <lint plugin folder> <host plugin .so> <template plugin .so>
#                       <plugin folder> <hostile plugin folder>
set -uo pipefail
gpuplug=$(realpath "$1")
dir=$(realpath "$2")
host=$(realpath "$3")
template=$(realpath "$4")
plugins=$(realpath "$5")
hostile=$(realpath "$6")
unset GPUPLUG_BACKEND GPUPLUG_LOG GPUPLUG_PROBE
lints=(exports static_destructors runpath name abi_answer)
fail=0
tmp=$(mktemp -d /tmp/gpuplug-lints-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# The lint plugins run from an empty folder: the runpath plugin's "." then finds nothing there.
cd "$tmp" || exit 1

run() {  # run <command...>: output in $out, status in $rc, at most 120 s
  out=$(timeout 120 "$@" 2>&1); rc=$?
}
lint_line() {  # lint_line <lint>: that lint's line
  grep -E "^lint $1: " <<<"$out" | head -1
}
# check_broken <file> <lint> <regex> [strict]: the mistake is named by <lint>; with "strict", every
# other lint passes (the file is well formed and has that one mistake).
check_broken() {
  local file=$1 lint=$2 regex=$3 strict=${4:-}
  local mode
  for mode in plain isolated; do
    local extra=(--no-isolate)
    [[ $mode == isolated ]] && extra=(--timeout 20)
    run "$gpuplug" check --plugin "$file" --case zero_byte_alloc "${extra[@]}"
    local what="$(basename "$file") ($mode)"
    echo "== $what: exit $rc"
    echo "$out" | grep -E '^lint |passed, '
    if [[ $rc -ne 1 && $rc -ne 3 ]]; then
      echo "FAIL: $what: exit status $rc, not 1 or 3 (a crash, a usage error or the time limit)"
      echo "$out" | tail -20
      fail=1
    fi
    [[ $(tail -1 <<<"$out") =~ ^[0-9]+\ passed,\ [1-9][0-9]*\ failed,\ [0-9]+\ skipped$ ]] ||
      { echo "FAIL: $what: the last line is not a summary with a failure"; fail=1; }
    local line
    line=$(lint_line "$lint")
    grep -Eq -- "^lint $lint: FAILED: .*($regex)" <<<"$line" ||
      { echo "FAIL: $what: lint $lint does not fail naming /$regex/: '$line'"; fail=1; }
    if [[ -n $strict ]]; then
      local other
      for other in "${lints[@]}"; do
        [[ $other == "$lint" ]] && continue
        [[ $(lint_line "$other") == "lint $other: ok" ]] ||
          { echo "FAIL: $what: lint $other is not ok: '$(lint_line "$other")'"; fail=1; }
      done
    fi
  done
}

check_broken "$dir/libgpuplug-lint_global_string.so" static_destructors \
  "imports __cxa_atexit.*static destructors" strict
check_broken "$dir/libgpuplug-lint_exports_internals.so" exports \
  "exports [0-9]+ symbols besides gpuplug_plugin_entry: .*lint_(entry_calls|plugin_name|table)" strict
check_broken "$dir/libgpuplug-lint_name_mismatch.so" name \
  "names the plugin 'lint_other_name' but the file is 'libgpuplug-lint_name_mismatch.so'" strict
check_broken "$dir/libgpuplug-lint_later_minor.so" abi_answer \
  "breaks ABI-4.*answered ABI 1\.5 to a host that asked for 1\.0" strict
# The runpath plugin as built carries an absolute placeholder element; its copy here gets "."
# written over it (the same length, padded with more relative elements), so that no file of the
# build tree ever has a RUNPATH that can mean the current directory.
mkdir -p "$tmp/runpath" &&
  python3 - "$dir/libgpuplug-lint_runpath_dot.so" "$tmp/runpath/libgpuplug-lint_runpath_dot.so" <<'PY'
import sys
placeholder = b"/gpuplug-lint-runpath-placeholder"
data = open(sys.argv[1], "rb").read()
if data.count(placeholder) != 1:
    sys.exit("the runpath plugin does not hold its RUNPATH placeholder exactly once")
dot = (b".:" + b"x" * len(placeholder))[:len(placeholder)]
open(sys.argv[2], "wb").write(data.replace(placeholder, dot))
PY
[[ -f $tmp/runpath/libgpuplug-lint_runpath_dot.so ]] || { echo "FAIL: no runpath plugin copy"; fail=1; }
check_broken "$tmp/runpath/libgpuplug-lint_runpath_dot.so" runpath "DT_RUNPATH '\.[:'].* has the element '\.'" strict

# Files that are not well-formed shared objects: every lint fails, the loading ones unloaded.
size=$(stat -c %s "$host")
for cut in 0 3 63 64 1000 $((size / 2)) $((size - 1)); do
  f="$tmp/cut$cut/libgpuplug-lint_truncated.so"
  mkdir -p "$(dirname "$f")"
  head -c "$cut" "$host" >"$f"
  check_broken "$f" exports "cannot read '$f': "
  check_broken "$f" abi_answer "not loaded: the file is not a well-formed shared object"
done
garbage="$tmp/garbage/libgpuplug-lint_garbage.so"
mkdir -p "$(dirname "$garbage")"
{ head -c 64 "$host"; head -c 8192 /dev/zero | tr '\0' '\377'; tail -c +8257 "$host"; } >"$garbage"
check_broken "$garbage" exports "cannot read '$garbage': not a shared object"
text="$tmp/text/libgpuplug-lint_text.so"
mkdir -p "$(dirname "$text")"
echo "this is not a plugin" >"$text"
check_broken "$text" exports "does not start with the ELF magic"

# Crashes while loading: the loading lints, always in a child, fail naming the signal.
for crash in segv_entry:SIGSEGV abort_ctor:SIGABRT; do
  for mode in plain isolated; do
    f="$hostile/libgpuplug-${crash%%:*}.so"
    extra=(--no-isolate)
    [[ $mode == isolated ]] && extra=(--timeout 20)
    run "$gpuplug" check --plugin "$f" --case zero_byte_alloc "${extra[@]}"
    echo "== $(basename "$f") ($mode): exit $rc"
    echo "$out" | grep -E '^lint |passed, '
    [[ $rc -eq 1 || $rc -eq 3 ]] || { echo "FAIL: $f: exit status $rc, not 1 or 3"; fail=1; }
    for lint in name abi_answer; do
      grep -Eq "^lint $lint: FAILED: the process that loaded the plugin crashed: killed by ${crash#*:}" \
        <<<"$out" || { echo "FAIL: $f ($mode): lint $lint does not fail naming ${crash#*:}"; fail=1; }
    done
  done
done
run "$gpuplug" check --run-lints "$host"
[[ $rc -eq 2 ]] && grep -q 'run-lints is internal to the lints' <<<"$out" ||
  { echo "FAIL: --run-lints by hand: exit $rc, '$out'"; fail=1; }

# The real plugins pass every lint, and so does a lint plugin built the same way without a mistake.
real=("$host" "$template" "$dir/libgpuplug-lint_fine.so")
for f in "$plugins"/libgpuplug-*.so; do
  [[ -e $f && $f != "$host" ]] && real+=("$f")
done
for f in "${real[@]}"; do
  run "$gpuplug" check --plugin "$f" --case zero_byte_alloc
  echo "== $(basename "$f"): exit $rc"
  echo "$out" | grep -E '^lint |passed, '
  # 3: a GPU plugin without its driver here; its cases are skipped, its lints still run.
  [[ $rc -eq 0 || $rc -eq 3 ]] || { echo "FAIL: $f: exit status $rc"; fail=1; }
  for lint in "${lints[@]}"; do
    [[ $(lint_line "$lint") == "lint $lint: ok" ]] ||
      { echo "FAIL: $f: lint $lint is not ok: '$(lint_line "$lint")'"; fail=1; }
  done
done
# Through --backend: the lints run on the selected plugin's file and count in the summary.
run "$gpuplug" check --backend host --case zero_byte_alloc
echo "== --backend host: exit $rc"
[[ $rc -eq 0 ]] || { echo "FAIL: --backend host: exit status $rc"; fail=1; }
[[ $(grep -c -E '^lint [a-z_]+: ok$' <<<"$out") -eq ${#lints[@]} ]] ||
  { echo "FAIL: --backend host: not every lint ran and passed"; echo "$out"; fail=1; }
[[ $(tail -1 <<<"$out") == "$((${#lints[@]} + 1)) passed, 0 failed, 0 skipped" ]] ||
  { echo "FAIL: --backend host: the summary does not count the lints: '$(tail -1 <<<"$out")'"; fail=1; }

[[ $fail -eq 0 ]] && echo "check_lints: ok"
exit $fail
