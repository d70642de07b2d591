#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Vulkan plugin on a real Vulkan device (lavapipe in CI): `gpuplug list` shows it available,
# class emulator, and `auto` never picks it over host; `gpuplug check --backend vulkan:0` passes
# the cases of what the plugin implements (memory, copies, memset, managed and mapped memory,
# host_address, the ledger, streams and events as ordering) and fails none (the kernel cases are
# known failures until kernels/vulkan exists). Exit 77 (skipped) when no Vulkan device is usable here, saying why.
# Usage: vulkan_check.sh <gpuplug>
set -uo pipefail
gpuplug=$1
unset GPUPLUG_BACKEND GPUPLUG_LOG GPUPLUG_PROBE
list=$(timeout 120 "$gpuplug" list 2>&1)
block=$(awk '/^\[vulkan\]/{on=1} /^\[/{if($0 !~ /^\[vulkan\]/) on=0} on' <<<"$list")
if ! grep -q '^\[vulkan\] available' <<<"$block"; then
  echo "SKIP: no usable Vulkan device: ${block:-the vulkan plugin is not on the search path}"
  exit 77
fi
fail=0
echo "$block"
if grep -q 'llvmpipe' <<<"$block" && ! grep -q 'class emulator' <<<"$block"; then
  echo "FAIL: lavapipe (llvmpipe) is not listed as class emulator"; fail=1
fi
explain=$(timeout 120 "$gpuplug" list --explain auto 2>&1)
if grep -q 'class emulator' <<<"$block" && grep -q '^\[host\] available' <<<"$list" &&
   ! grep -Eq 'vulkan:0 emulator.*ranked below host:0' <<<"$explain"; then
  echo "$explain"; echo "FAIL: auto does not rank the emulator vulkan:0 below host:0"; fail=1
fi

# The cases the plugin implements: each must pass, not skip.
cases=(alloc_copy_roundtrip zero_byte_alloc double_free copy_out_of_range copies_async_and_d2d
       memset_ordered_on_stream memset_any_offset_and_length sync_copies_complete_on_return managed_memory host_address
       device_memory_limit ledger_stats_and_report sweep_unreleased memory_and_device_info
       streams stream_flags concurrent_alloc_free pitched_copies_keep_stream_order arena_swept
       pinned_zeroed_on_ledger pinned_copy_memset pinned_swept events_eight_threads events_bad_input)
args=()
for c in "${cases[@]}"; do args+=(--case "$c"); done
out=$(timeout 600 "$gpuplug" check --backend vulkan:0 "${args[@]}" 2>&1); rc=$?
echo "$out"
[[ $rc -eq 0 ]] || { echo "FAIL: gpuplug check --backend vulkan:0 exited $rc"; fail=1; }
for c in "${cases[@]}"; do
  grep -Eq "^$c +passed" <<<"$out" || { echo "FAIL: case $c did not pass"; fail=1; }
done

# The whole suite: nothing fails (skips and known failures name their reason).
out=$(timeout 900 "$gpuplug" check --backend vulkan:0 2>&1); rc=$?
echo "$out" | tail -n 1
[[ $rc -eq 0 ]] || { echo "$out"; echo "FAIL: the whole suite on vulkan:0 exited $rc"; fail=1; }
grep -Eq '^[0-9]+ passed, 0 failed' <<<"$(tail -n 1 <<<"$out")" ||
  { echo "FAIL: the whole suite on vulkan:0 has failures"; fail=1; }
exit $fail
