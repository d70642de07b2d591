#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The mistakes an outside emulator plugin once passed the conformance suite with, each
# built into the real host plugin (tests/unit/mistake_plugins/mistake_host.c), are caught: for
# each, `gpuplug check --isolate --timeout 30` exits 1, the case for that rule is FAILED with a
# message naming the mistake, the checker itself does not crash (every case has its row and the
# summary line is printed), and no case timed out. The stream cases do not depend on timing, so
# one run is the verdict. The host plugin passes the same cases.
# With no flags at all (every case isolated, the default time limit), the cases that crash the
# process on a plugin whose launch does not copy its arguments, and on one whose stream
# synchronise does not wait, end with the summary line and exit 1. A plugin whose detached worker thread crashes the
# process after a case has ended fails that case, saying so, and no other; in process
# (--no-isolate) that crash comes after the summary line and names no case.
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

run() {  # run <name> <command...>: output in $out, status in $rc, at most 300 s; both shown
  local name=$1
  shift
  out=$(timeout 300 "$@" 2>&1)
  rc=$?
  echo "== $name: exit $rc"
  echo "$out"
}

# No flags: isolation is the default. The cases that crash the process on the two mistakes when
# they run in it (a launch reading its caller's dead stack frame, work still running into freed
# buffers), with one each that fails on its check whatever the timing: a row per case, the
# summary line with failures and exit 1. (Not the whole suite: its stream cases wait 10 s each
# for a gate kernel that a launch queued until the next synchronise never starts.)
for check in "args_not_copied|launch_arguments_copied_during_launch concurrent_launches_on_streams events_"\
             "sync_does_not_wait|unknown_and_destroyed_streams_refused events_eight_threads concurrent_launches_on_streams"; do
  IFS='|' read -r mistake subset <<<"$check"
  plugin=$dir/libgpuplug-mistake_$mistake.so
  subset_args=()
  for c in $subset; do subset_args+=(--case "$c"); done
  run "$mistake, no flags" "$gpuplug" check --plugin "$plugin" "${subset_args[@]}"
  [[ $rc -eq 1 ]] || { echo "FAIL: $mistake (no flags): exit status $rc, not 1"; fail=1; }
  grep -Eq '^isolation: +one process per case, at most [0-9]+ s each' <<<"$out" ||
    { echo "FAIL: $mistake (no flags): the header does not say the cases run isolated"; fail=1; }
  first=${subset%% *}
  grep -Eq "^$first +FAILED " <<<"$out" || { echo "FAIL: $mistake (no flags): $first is not FAILED"; fail=1; }
  grep -Eq '^[0-9]+ passed, [1-9][0-9]* failed, [0-9]+ skipped$' <<<"$(tail -1 <<<"$out")" ||
    { echo "FAIL: $mistake (no flags): the last line is not the summary with failures"; fail=1; }
done

# A detached worker that crashes after its case: that case fails, saying the case had ended, and
# the case after it fails for its own child, never for the one before.
plugin=$dir/libgpuplug-mistake_detached_thread.so
run detached_thread "$gpuplug" check --plugin "$plugin" --case zero_byte_alloc --case alloc_copy_roundtrip
[[ $rc -eq 1 ]] || { echo "FAIL: detached_thread: exit status $rc, not 1"; fail=1; }
for c in zero_byte_alloc alloc_copy_roundtrip; do
  grep -Eq "^$c +FAILED .*crashed after the case '$c' had ended \(a thread it left behind\?\): killed by SIGSEGV.*; the case itself passed" <<<"$out" ||
    { echo "FAIL: detached_thread: $c is not FAILED as crashed after it had ended"; fail=1; }
done
[[ $(tail -1 <<<"$out") == "5 passed, 2 failed, 0 skipped" ]] ||
  { echo "FAIL: detached_thread: the summary is not '5 passed, 2 failed, 0 skipped' (5 lints)"; fail=1; }
# In process the crash comes at the exit, after the summary line: it blames no case.
run "detached_thread, --no-isolate" "$gpuplug" check --no-isolate --plugin "$plugin" --case zero_byte_alloc
[[ $rc -ne 0 && $rc -ne 124 ]] || { echo "FAIL: detached_thread (--no-isolate): exit status $rc"; fail=1; }
grep -Eq '^isolation: +none \(--no-isolate\)' <<<"$out" ||
  { echo "FAIL: detached_thread (--no-isolate): the header does not say the cases run in process"; fail=1; }
grep -Eq '^zero_byte_alloc +passed' <<<"$out" ||
  { echo "FAIL: detached_thread (--no-isolate): zero_byte_alloc did not pass in process"; fail=1; }
grep -Eq '^6 passed, 0 failed, 0 skipped$' <<<"$out" ||
  { echo "FAIL: detached_thread (--no-isolate): no summary line before the crash"; fail=1; }
if grep -q 'died in this case' <<<"$out"; then
  echo "FAIL: detached_thread (--no-isolate): the crash after the cases is blamed on a case"; fail=1
fi
# A sanitizer build leaves the crash to the sanitizer: no note of the tool's own then.
if ! grep -q '^gpuplug check .*(under ' <<<"$out"; then
  grep -q '^CRASHED: the process died while no case was running' <<<"$out" ||
    { echo "FAIL: detached_thread (--no-isolate): the crash is not noted as after the cases"; fail=1; }
fi
exit $fail
