#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CTest script.device_check_dry_run: scripts/device-check --prepare, then --run as a dry run on
# this machine (no NVIDIA driver: exit 3), and checks that what it leaves for the device tool to
# bring back fits what the tool returns: at most 8 files, each under 16 MiB, at most 2 folders
# deep, named with [A-Za-z0-9._-] only; that they are summary.txt and logs.tar.gz (plus
# bench_gpu.json where bench_gpu measured); that summary.txt names the missing driver and gives
# each step's duration; and that logs.tar.gz holds the step logs.
#   device_check_dry_run.sh <source dir> <build dir>
# Fast: --no-build (the build under test, as it is), and --skip ctest,gpuplug-check (CTest would
# run this test again; the conformance cases have their own test).
set -euo pipefail

source_dir=${1:?usage: device_check_dry_run.sh <source dir> <build dir>}
build_dir=${2:?usage: device_check_dry_run.sh <source dir> <build dir>}
script=$source_dir/scripts/device-check

fail() { echo "FAIL: $*" >&2; exit 1; }

if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
  echo "this machine has an NVIDIA driver: a run here is no dry run; skipped"
  exit 77  # SKIP_RETURN_CODE
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/gpuplug-device-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/stage
out=$work/out
mkdir -p "$out"

echo "== $script --prepare $stage --build-dir $build_dir --no-build"
"$script" --prepare "$stage" --build-dir "$build_dir" --no-build >"$work/prepare.log" 2>&1 ||
  { cat "$work/prepare.log"; fail "--prepare exited $?"; }
tail -n 8 "$work/prepare.log"

echo "== $script --run $stage --logs $out --skip ctest,gpuplug-check"
rc=0
"$script" --run "$stage" --logs "$out" --skip ctest,gpuplug-check >"$work/run.log" 2>&1 || rc=$?
tail -n 25 "$work/run.log"
[ "$rc" -eq 3 ] || fail "--run exited $rc, expected 3 (no NVIDIA driver: a dry run)"

echo "== what would come back"
(cd "$out" && find . -mindepth 1 -printf '%y %s %P\n' | sort -k3)

# The device tool's limits on what comes back.
files=$(find "$out" -type f | wc -l)
((files <= 8)) || fail "$files files under the output folder (at most 8 come back)"
big=$(find "$out" -type f -size +16383k -printf '%P\n')
[ -z "$big" ] || fail "files of 16 MiB or more: $big"
deep=$(find "$out" -mindepth 4 -printf '%P\n')
[ -z "$deep" ] || fail "more than 2 folders deep: $deep"
odd=$(find "$out" -mindepth 1 -printf '%f\n' | grep -v -E '^[A-Za-z0-9._-]+$' || true)
[ -z "$odd" ] || fail "names outside [A-Za-z0-9._-]: $odd"
notfile=$(find "$out" -mindepth 1 ! -type f ! -type d -printf '%P\n')
[ -z "$notfile" ] || fail "neither files nor folders (links?): $notfile"

# Exactly summary.txt, logs.tar.gz and, where measured, bench_gpu.json.
got=$(cd "$out" && find . -type f -printf '%P\n' | sort | paste -sd ' ' -)
case "$got" in
  "device-check/logs.tar.gz device-check/summary.txt") ;;
  "device-check/bench_gpu.json device-check/logs.tar.gz device-check/summary.txt") ;;
  *) fail "unexpected files: $got" ;;
esac

summary=$out/device-check/summary.txt
grep -q "no NVIDIA driver on this machine (libcuda.so.1 not found)" "$summary" ||
  fail "summary.txt does not name the missing driver"
grep -qE '^ +(PASS|FAIL|SKIP|TIMEOUT) +[0-9]+s +([0-9]+s|-) +gpuplug-list ' "$summary" ||
  fail "summary.txt has no duration for gpuplug-list"
grep -qE '^ +SKIP +0s .* ctest +skipped \(--skip\)' "$summary" || fail "summary.txt does not show ctest skipped"
listing=$(tar -tzf "$out/device-check/logs.tar.gz")
expected_logs=(logs/summary.txt logs/gpuplug-list.log logs/test_cuda_plugin.log)
# bench_gpu has a log only where it was built (the sanitizer presets build no benchmarks).
[ -x "$build_dir/bin/bench_gpu" ] && expected_logs+=(logs/bench_gpu.log)
for log in "${expected_logs[@]}"; do
  grep -qx "$log" <<<"$listing" || fail "logs.tar.gz has no $log (has: $(paste -sd ' ' - <<<"$listing"))"
done
echo "PASS: $files file(s) come back: $got"
