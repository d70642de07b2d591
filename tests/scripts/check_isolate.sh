#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpuplug check --isolate --timeout` against the broken host plugin
# (tests/unit/hostile_plugins/broken_host.c: launch segfaults, event_synchronize hangs deaf to
# SIGTERM, memset_d8 exits 7): the crashing case is failed naming SIGSEGV, the hanging one "timed
# out after 2 s (killed by SIGKILL ...)", the exiting one naming status 7 with its stderr under
# its row; the cases around them still run and pass, the summary line counts the three failures
# (and the five lints, which pass) and the exit status is 1.
# With no flag at all the cases are isolated just the same (the default, with its time limit);
# --no-isolate runs them in process and excludes --timeout and --isolate (a no-op spelling kept
# for a release). Then the real host plugin passes the same cases, and every case, isolated; and
# bad option values are usage errors naming the option.
# Usage: check_isolate.sh <gpuplug> <broken plugin .so> <host plugin .so>
set -uo pipefail
gpuplug=$1
broken=$2
host=$3
unset GPUPLUG_BACKEND GPUPLUG_LOG GPUPLUG_PROBE
fail=0
run() {  # run <name> <command...>: output in $out, status in $rc, at most $limit s (60)
  local name=$1; shift
  local start=$SECONDS
  out=$(timeout "${limit:-60}" "$@" 2>&1); rc=$?
  echo "== $name: exit $rc after $((SECONDS - start)) s"
  echo "$out"
}
expect() {  # expect <regex> <what>
  if ! grep -Eq -- "$1" <<<"$out"; then echo "FAIL: $2 (no match for /$1/)"; fail=1; fi
}
row() {  # row <case>: the table row of that case
  grep -E "^$1 " <<<"$out" | head -1
}
cases=(--case zero_byte_alloc --case launch_axpy --case events_query_before_and_after
       --case memset_ordered_on_stream --case alloc_copy_roundtrip)

run "broken_host isolated" "$gpuplug" check --isolate --timeout 2 --plugin "$broken" "${cases[@]}"
[[ $rc -eq 1 ]] || { echo "FAIL: exit status $rc, not 1"; fail=1; }
expect '^backend: +broken_host:0 from ' "the broken plugin is what is tested"
expect '^isolation: +one process per case, at most 2 s each' "the header says how cases run"
crash=$(row launch_axpy)
hang=$(row events_query_before_and_after_completion)
# A sanitizer's own SEGV handler reports "SEGV" and exits 1 instead (see the ENVIRONMENT in
# tests/CMakeLists.txt, which leaves the signal to the kernel).
grep -Eq 'FAILED .*crashed: killed by SIGSEGV' <<<"$crash" ||
  { echo "FAIL: the crashing case is not failed naming SIGSEGV: '$crash'"; fail=1; }
# It ignores SIGTERM: the SIGKILL after the grace period ends it.
grep -Eq 'FAILED .*timed out after 2 s \(killed by SIGKILL' <<<"$hang" ||
  { echo "FAIL: the hanging case is not failed as timed out: '$hang'"; fail=1; }
exited=$(row memset_ordered_on_stream)
grep -Eq 'FAILED .*the child exited with status 7 and left no result' <<<"$exited" ||
  { echo "FAIL: the exiting case is not failed naming its exit status: '$exited'"; fail=1; }
# What the child wrote to stderr comes back under its row, not mixed into the table.
grep -A3 -E '^memset_ordered_on_stream ' <<<"$out" | grep -Eq '^    \| broken_host: memset_d8 gives up$' ||
  { echo "FAIL: the exiting case's stderr is not shown under its row"; fail=1; }
grep -Eq '^zero_byte_alloc +passed' <<<"$out" || { echo "FAIL: zero_byte_alloc did not pass"; fail=1; }
grep -Eq '^alloc_copy_roundtrip +passed' <<<"$out" ||
  { echo "FAIL: alloc_copy_roundtrip (after the crash and the hang) did not pass"; fail=1; }
# The five lints of the file (all ok: broken_host's mistakes are in its slots) count as passed.
[[ $(tail -1 <<<"$out") == "7 passed, 3 failed, 0 skipped" ]] ||
  { echo "FAIL: the last line is not '7 passed, 3 failed, 0 skipped'"; fail=1; }

# No flag at all: every case is isolated, with the default time limit; the crash is still one row.
run "broken_host, no flags" "$gpuplug" check --plugin "$broken" --case launch_axpy --case alloc_copy_roundtrip
[[ $rc -eq 1 ]] || { echo "FAIL: no flags: exit status $rc, not 1"; fail=1; }
expect '^isolation: +one process per case, at most (60|600) s each' "isolation and its time limit are the default"
expect '^launch_axpy +FAILED .*crashed: killed by SIGSEGV' "no flags: the crash fails its own case"
expect '^alloc_copy_roundtrip +passed' "no flags: the run goes on after the crash"
[[ $(tail -1 <<<"$out") == "6 passed, 1 failed, 0 skipped" ]] || { echo "FAIL: no flags: summary"; fail=1; }

# --no-isolate runs the cases in this process, as before isolation was the default.
run "host, --no-isolate" "$gpuplug" check --no-isolate --plugin "$host" "${cases[@]}"
[[ $rc -eq 0 ]] || { echo "FAIL: --no-isolate exit status $rc, not 0"; fail=1; }
expect '^isolation: +none \(--no-isolate\)' "the header says the cases run in process"
[[ $(tail -1 <<<"$out") == "10 passed, 0 failed, 0 skipped" ]] || { echo "FAIL: --no-isolate summary"; fail=1; }
for other in "--timeout 5" "--isolate"; do
  # shellcheck disable=SC2086  # the option and its value are words
  run "--no-isolate with $other" "$gpuplug" check --no-isolate $other --plugin "$host"
  [[ $rc -eq 2 ]] || { echo "FAIL: --no-isolate with $other: exit status $rc, not 2"; fail=1; }
  expect "^gpuplug check: ${other%% *} and --no-isolate exclude each other" "the error names both options"
done

# --timeout (with or without --isolate, now a no-op) isolates too.
run "broken_host, --timeout alone" "$gpuplug" check --timeout 2 --plugin "$broken" --case launch_axpy
[[ $rc -eq 1 ]] || { echo "FAIL: exit status $rc, not 1"; fail=1; }
expect 'crashed: killed by SIGSEGV' "--timeout alone isolates"
[[ $(tail -1 <<<"$out") == "5 passed, 1 failed, 0 skipped" ]] || { echo "FAIL: summary"; fail=1; }

# A listed known failure that crashes is xfail (counted skipped), with the crash in its reason.
known=$(mktemp /tmp/gpuplug-known-XXXXXX)
trap 'rm -f "$known"' EXIT
echo "broken_host launch_axpy launch segfaults (test)" >"$known"
run "broken_host, crash listed" "$gpuplug" check --timeout 2 --plugin "$broken" --case launch_axpy \
  --known-failures "$known"
[[ $rc -eq 0 ]] || { echo "FAIL: exit status $rc, not 0"; fail=1; }
expect '^launch_axpy +xfail .*launch segfaults \(test\) \[crashed: killed by SIGSEGV' \
  "the listed crash is xfail with both reasons"
[[ $(tail -1 <<<"$out") == "5 passed, 0 failed, 1 skipped" ]] || { echo "FAIL: summary"; fail=1; }

run "host isolated" "$gpuplug" check --isolate --timeout 30 --plugin "$host" "${cases[@]}"
[[ $rc -eq 0 ]] || { echo "FAIL: host isolated exit status $rc, not 0"; fail=1; }
[[ $(tail -1 <<<"$out") == "10 passed, 0 failed, 0 skipped" ]] || { echo "FAIL: host summary"; fail=1; }
# The whole suite, isolated, on the real host plugin (fewer lifecycle cycles: the time is the
# process starts, not the case: about 10 s here, several times that under a sanitizer).
limit=400 GPUPLUG_CONFORMANCE_CYCLES=50 run "host isolated, every case" "$gpuplug" check --isolate --plugin "$host"
[[ $rc -eq 0 ]] || { echo "FAIL: host isolated (every case) exit status $rc, not 0"; fail=1; }
grep -Eq '^[1-9][0-9]* passed, 0 failed, [0-9]+ skipped$' <<<"$(tail -1 <<<"$out")" ||
  { echo "FAIL: host summary (every case)"; fail=1; }

for bad in 0 -1 abc 1.5 86401 99999999999 ''; do
  run "--timeout '$bad'" "$gpuplug" check --timeout "$bad" --plugin "$host"
  [[ $rc -eq 2 ]] || { echo "FAIL: --timeout '$bad' exit status $rc, not 2"; fail=1; }
  expect "^gpuplug check: --timeout needs whole seconds from 1 to 86400, not '" "the error names --timeout"
done
run "--timeout without a value" "$gpuplug" check --timeout
[[ $rc -eq 2 ]] || { echo "FAIL: exit status $rc, not 2"; fail=1; }
expect '^gpuplug check: --timeout needs a number of seconds' "the error names --timeout"
run "--run-case by hand" "$gpuplug" check --run-case zero_byte_alloc --plugin "$host"
[[ $rc -eq 2 ]] || { echo "FAIL: exit status $rc, not 2"; fail=1; }
expect 'run-case is internal' "--run-case without its descriptor is refused"
# Even with a pipe on descriptor 3 (as ctest leaves one), the child option writes only to the
# pipe whose inode it is told.
run "--run-case with another pipe" "$gpuplug" check --run-case zero_byte_alloc --plugin "$host" --result-pipe 1 3> >(cat >/dev/null)
[[ $rc -eq 2 ]] || { echo "FAIL: exit status $rc, not 2"; fail=1; }
expect 'run-case is internal' "--run-case with a foreign descriptor 3 is refused"
exit $fail
