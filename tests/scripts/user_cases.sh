#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tool.user_cases: `gpuplug check --cases` runs an application's own cases
# (examples/conformance_cases: its kernel module "scale" on host, against the host backend and the
# CPU), in process and isolated, beside the built-in suite or instead of it (--only-user); a failing
# user case prints its worst element; and a case library with a mistake is refused before anything
# runs (exit 2), naming the library and the mistake.
# A --modules folder that does not exist or holds none of the modules the cases load fails those
# cases (exit 1), naming the folder. On host the reference backend is the backend under test, and
# the differential rows say so.
#   user_cases.sh <gpuplug> <example_cases.so> <modules dir> <bad case library dir>
set -uo pipefail
gpuplug=$1 example=$2 modules=$3 bad=$4
fail=0
out=""
rc=0
run() {  # run <what> <command...>: output in $out, status in $rc
  local what=$1
  shift
  out=$("$@" 2>&1) && rc=0 || rc=$?
  echo "== $what: exit $rc"
}
expect() {  # expect <regex> <what>
  grep -Eq -- "$1" <<<"$out" || { echo "FAIL: $2 (no match for '$1')"; printf '%s\n' "$out" | tail -n 20; fail=1; }
}

run "example only" "$gpuplug" check --backend host --only-user --no-isolate --cases "$example" --modules "$modules"
[[ $rc -eq 0 ]] || { echo "FAIL: the example's cases exit $rc on host"; fail=1; }
expect '^scale_matches_host_and_cpu +passed' "scale_matches_host_and_cpu passes on host"
expect '^scale_on_managed_memory +passed' "scale_on_managed_memory passes on host"
expect '^2 passed, 0 failed, 0 skipped$' "only the two user cases ran (no lints: --only-user)"
expect '^scale_matches_host_and_cpu +passed .*reference is the backend itself \(host:0\)' "a host-only run says the reference was the backend itself"

run "example isolated" "$gpuplug" check --backend host --only-user --cases "$example" --modules "$modules"
[[ $rc -eq 0 ]] || { echo "FAIL: the example's cases exit $rc isolated"; fail=1; }
expect '^2 passed, 0 failed, 0 skipped$' "isolated children find the user cases and their modules"

run "example beside the suite" "$gpuplug" check --backend host --case alloc_copy --case scale_ --cases "$example" --modules "$modules"
expect '^alloc_copy_roundtrip +passed' "a built-in case runs beside the user's"
expect '^lint exports: ok' "the lints run beside the suite"
expect '^8 passed, 0 failed, 0 skipped$' "built-in and user cases together (and the 5 lints)"

run "example without --modules" "$gpuplug" check --backend host --only-user --cases "$example"
expect "^scale_matches_host_and_cpu +skipped +[0-9]+ ms +no image of module 'scale' for plugin 'host'" "a missing module is a skip naming it"

run "--modules that does not exist" "$gpuplug" check --backend host --only-user --cases "$example" --modules /nonexistent/gpuplug-modules
[[ $rc -eq 1 ]] || { echo "FAIL: a --modules folder that does not exist exits $rc, not 1"; fail=1; }
expect "^scale_matches_host_and_cpu +FAILED .*no image of module 'scale' for plugin 'host' in the --modules folder '/nonexistent/gpuplug-modules'.*does not exist" "a missing --modules folder fails the case, naming it"
expect '^0 passed, 2 failed, 0 skipped$' "both cases fail"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/empty/host"
run "--modules without the module" "$gpuplug" check --backend host --only-user --cases "$example" --modules "$tmp/empty"
[[ $rc -eq 1 ]] || { echo "FAIL: a --modules folder without the module exits $rc, not 1"; fail=1; }
expect "^scale_matches_host_and_cpu +FAILED .*no image of module 'scale' for plugin 'host' in the --modules folder '$tmp/empty'" "a --modules folder without the module fails the case, naming it"

mkdir -p "$tmp/flat"
cp "$modules/host/"scale.* "$tmp/flat/"
run "flat --modules folder" "$gpuplug" check --backend host --only-user --isolate --cases "$example" --modules "$tmp/flat"
[[ $rc -eq 0 ]] || { echo "FAIL: a flat --modules folder exits $rc, not 0 (it is still read)"; fail=1; }
expect '^2 passed, 0 failed, 0 skipped$' "the flat folder's module is found"
[[ $(grep -c "holds module files directly (the flat layout" <<<"$out") -eq 1 ]] ||
  { echo "FAIL: the flat layout is not warned about exactly once"; printf '%s\n' "$out" | head -n 8; fail=1; }
expect "put them in $tmp/flat/host/" "the warning names the layout to use"

run "built-in differential case on host" "$gpuplug" check --backend host --case diff_axpy
expect '^diff_axpy +passed .*reference is the backend itself \(host:0\)' "a built-in differential row on host says the reference was the backend itself"

run "list" "$gpuplug" check --list --cases "$example"
expect '^scale_on_managed_memory +scale works on managed memory' "--list shows the user's cases"

run "failing user case" "$gpuplug" check --backend host --only-user --cases "$bad/libcases_failing.so"
[[ $rc -eq 1 ]] || { echo "FAIL: a failing user case exits $rc, not 1"; fail=1; }
expect '^user_passes +passed' "the passing user case passes"
expect 'user_off_by_some +FAILED .*my_kernel vs CPU: 2 of 4 elements outside the tolerance \(abs 1e-06, rel 1e-06\); the worst is element 2 for x = 2: 3.5 \(0x40600000\), expected 3 \(0x40400000\)' "check_close names the worst element, its inputs and both values"

for bad_lib in name:"is named 'Bad-Name': names are snake_case" \
               duplicate:"\('launch_axpy'\) has the name of a case already listed" \
               no_run:"\('no_run_function'\) has no run function" \
               no_entry:"exports no gpuplug_conformance_cases"; do
  name=${bad_lib%%:*} why=${bad_lib#*:}
  run "bad library $name" "$gpuplug" check --backend host --cases "$bad/libcases_$name.so"
  [[ $rc -eq 2 ]] || { echo "FAIL: library $name exits $rc, not 2"; fail=1; }
  expect "--cases '.*libcases_$name.so'.*$why" "library $name is refused naming the mistake"
done
run "missing library" "$gpuplug" check --backend host --cases "$bad/nope.so"
[[ $rc -eq 2 ]] || { echo "FAIL: a missing library exits $rc, not 2"; fail=1; }
expect "--cases '.*nope.so': cannot open" "a missing library is named"
run "only-user alone" "$gpuplug" check --backend host --only-user
[[ $rc -eq 2 ]] || { echo "FAIL: --only-user without --cases exits $rc, not 2"; fail=1; }

[[ $fail -eq 0 ]] && echo "ok: user cases"
exit $fail
