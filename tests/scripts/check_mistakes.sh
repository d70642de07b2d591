#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The mistakes an outside emulator plugin once passed the conformance suite with (issue 21), each
# built into the real host plugin (tests/unit/mistake_plugins/mistake_host.c), are caught: for
# each, `gpuplug check --isolate --timeout 30` exits 1, the case for that rule is FAILED with a
# message naming the mistake, the checker itself does not crash (every case has its row and the
# summary line is printed), and no case timed out. The stream cases do not depend on timing, so
# one run is the verdict. The host plugin passes the same cases.
# Usage: check_mistakes.sh <gpuplug> <folder of the mistake plugins> [<host plugin .so>]
set -uo pipefail
gpuplug=$1
dir=$2
host=${3:-}
unset GPUPLUG_BACKEND GPUPLUG_LOG GPUPLUG_PROBE
fail=0
cases=(memset_waits_for_its_stream async_copies_wait_for_their_stream
       default_stream_waits_for_other_streams sync_copy_waits_for_queued_work
       unknown_and_destroyed_streams_refused launch_arguments_copied_during_launch
       kernel_args_published launch_errors)
case_args=()
for c in "${cases[@]}"; do case_args+=(--case "$c"); done

# mistake (the plugin file's stem) | the case that must fail | what its message must say
checks=(
  "memset_ignores_stream|memset_waits_for_its_stream|memset ignores its stream"
  "default_not_ordered|default_stream_waits_for_other_streams|the default stream is not ordered with other streams"
  "sync_copy_ignores_queued|sync_copy_waits_for_queued_work|a synchronous copy ignores queued work"
  "unknown_streams|unknown_and_destroyed_streams_refused|launch on a never created stream 0x[0-9a-f]+ was accepted"
  "args_not_copied|launch_arguments_copied_during_launch|launch read its params after it returned: a plugin that runs a launch later must copy the arguments"
  "empty_grid|launch_errors|a launch with an empty grid \\(0 x 1 x 1 blocks\\) was accepted"
)

for check in "${checks[@]}"; do
  IFS='|' read -r mistake expected message <<<"$check"
  plugin=$dir/libgpuplug-mistake_$mistake.so
  if [[ ! -f $plugin ]]; then echo "FAIL: $plugin is not built"; fail=1; continue; fi
  out=$(timeout 300 "$gpuplug" check --isolate --timeout 30 --plugin "$plugin" "${case_args[@]}" 2>&1)
  rc=$?
  echo "== $mistake: exit $rc"
  echo "$out"
  [[ $rc -eq 1 ]] || { echo "FAIL: $mistake: exit status $rc, not 1"; fail=1; }
  row=$(grep -E "^$expected " <<<"$out" | head -1)
  grep -Eq "^$expected +FAILED .*$message" <<<"$row" ||
    { echo "FAIL: $mistake: $expected is not FAILED with /$message/: '$row'"; fail=1; }
  # The checker survived: one row per case, none crashed or timed out, and the summary.
  for c in "${cases[@]}"; do
    grep -Eq "^$c +(passed|FAILED|skipped)" <<<"$out" || { echo "FAIL: $mistake: no row for $c"; fail=1; }
  done
  # One mistake each: the plugin file itself passes every lint.
  if grep -q '^lint .*FAILED' <<<"$out"; then echo "FAIL: $mistake: a lint failed"; fail=1; fi
  if grep -Eq 'crashed: |timed out after' <<<"$out"; then
    echo "FAIL: $mistake: a case crashed or timed out instead of failing on its check"; fail=1
  fi
  grep -Eq '^[0-9]+ passed, [1-9][0-9]* failed, [0-9]+ skipped$' <<<"$(tail -1 <<<"$out")" ||
    { echo "FAIL: $mistake: the last line is not the summary with failures"; fail=1; }
done

# An unchecked unknown pointer (copy_h2d writing wherever it is told) is a SIGSEGV in the process
# that runs the case: --isolate makes it that case's failure, naming the signal, and the run goes
# on to the other case and the summary line.
plugin=$dir/libgpuplug-mistake_unchecked_pointer.so
out=$(timeout 300 "$gpuplug" check --isolate --timeout 30 --plugin "$plugin" \
        --case copy_unknown_pointer --case alloc_copy_roundtrip 2>&1)
rc=$?
echo "== unchecked_pointer: exit $rc"
echo "$out"
[[ $rc -eq 1 ]] || { echo "FAIL: unchecked_pointer: exit status $rc, not 1"; fail=1; }
grep -Eq '^copy_unknown_pointer +FAILED .*crashed: killed by SIGSEGV' <<<"$out" ||
  { echo "FAIL: unchecked_pointer: copy_unknown_pointer is not FAILED as crashed by SIGSEGV"; fail=1; }
grep -Eq '^alloc_copy_roundtrip +passed' <<<"$out" ||
  { echo "FAIL: unchecked_pointer: the case after the crash did not run and pass"; fail=1; }
[[ $(tail -1 <<<"$out") == "6 passed, 1 failed, 0 skipped" ]] ||
  { echo "FAIL: unchecked_pointer: the summary is not '6 passed, 1 failed, 0 skipped' (5 lints)"; fail=1; }

if [[ -n $host ]]; then
  out=$(timeout 300 "$gpuplug" check --isolate --timeout 30 --plugin "$host" "${case_args[@]}" 2>&1)
  rc=$?
  echo "== host: exit $rc"
  echo "$out"
  [[ $rc -eq 0 ]] || { echo "FAIL: the host plugin does not pass the stream cases (exit $rc)"; fail=1; }
  # The cases and the five lints of the plugin file.
  want="$((${#cases[@]} + 5)) passed, 0 failed, 0 skipped"
  [[ $(tail -1 <<<"$out") == "$want" ]] ||
    { echo "FAIL: the host plugin's summary is not '$want'"; fail=1; }
fi
exit $fail
