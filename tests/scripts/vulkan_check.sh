#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Vulkan plugin on a real Vulkan device (lavapipe in CI): `gpuplug list` shows it available,
# class emulator, and `auto` never picks it over host; `gpuplug check --backend vulkan:0` fails
# no case and passes, not skips, the cases of what the plugin implements (memory, copies, memset,
# managed and mapped memory, host_address, the ledger, streams and events, the gate cases, kernel
# modules and launch); the whole suite again in one process under the Khronos validation layer
# with synchronization validation, with no validation message; gemm_pipeline --backend vulkan
# PASSes.
# Exit 77 (skipped) when no Vulkan device is usable here, saying why.
# Usage: vulkan_check.sh <gpuplug> [<sanitizer>]: with a sanitizer named (a sanitizer build),
# only the listing is checked here: that build's test_conformance runs the whole suite on vulkan:0
# in one process and scripts/test's matrix again case by case, and the plain build runs the rest.
set -uo pipefail
gpuplug=$1
sanitizer=${2:-}
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

if [[ -n $sanitizer ]]; then
  echo "the suite on vulkan:0: left out in this $sanitizer build (its test_conformance and the" \
       "matrix of scripts/test run it; the plain build runs it here)"
  exit $fail
fi

# The whole suite, once: nothing fails (skips and known failures name their reason), and the
# cases of what the plugin implements pass, not skip (the gate cases among them).
cases=(alloc_copy_roundtrip zero_byte_alloc double_free copy_out_of_range copies_async_and_d2d
       memset_ordered_on_stream memset_any_offset_and_length sync_copies_complete_on_return managed_memory host_address
       device_memory_limit ledger_stats_and_report sweep_unreleased memory_and_device_info
       streams stream_flags concurrent_alloc_free pitched_copies_keep_stream_order arena_swept
       pinned_zeroed_on_ledger pinned_copy_memset pinned_swept events_eight_threads events_bad_input
       corrupt_module_image load_module_from_bytes device_symbols launch_axpy launch_errors
       launch_grid_past_65535 launch_argument_count kernel_args_published
       launch_arguments_copied_during_launch
       unknown_and_destroyed_streams_refused activation_bias_relu diff_axpy diff_gemm_f32
       diff_gemm_a_e4m3 diff_cast_f32_e4m3 diff_cast_e4m3_f32 pinned_kernel_access
       concurrent_launches_on_streams events_cross_stream_ordering
       memset_waits_for_its_stream async_copies_wait_for_their_stream
       async_upload_source_is_free_at_return default_stream_waits_for_other_streams
       default_stream_skips_non_blocking_streams sync_copy_waits_for_queued_work
       stream_destroy_waits_for_its_work events_streams_destroyed_after_waits)
out=$(timeout 900 "$gpuplug" check --backend vulkan:0 2>&1); rc=$?
echo "$out" | tail -n 1
[[ $rc -eq 0 ]] || { echo "$out"; echo "FAIL: the whole suite on vulkan:0 exited $rc"; fail=1; }
grep -Eq '^[0-9]+ passed, 0 failed' <<<"$(tail -n 1 <<<"$out")" ||
  { echo "FAIL: the whole suite on vulkan:0 has failures"; fail=1; }
for c in "${cases[@]}"; do
  grep -Eq "^$c +passed" <<<"$out" || { grep -E "^$c " <<<"$out"; echo "FAIL: case $c did not pass"; fail=1; }
done
# The same suite under the Khronos validation layer (errors and synchronization hazards), in one
# process so that every message reaches this output; the layer prints "Validation Error" for each.
if [[ -e /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json ]]; then
  out=$(VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation \
        VK_LAYER_ENABLES=VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT \
        timeout 900 "$gpuplug" check --backend vulkan:0 --no-isolate 2>&1); rc=$?
  echo "validation layer: $(tail -n 1 <<<"$out")"
  [[ $rc -eq 0 ]] || { echo "$out"; echo "FAIL: the suite under the validation layer exited $rc"; fail=1; }
  if grep -q 'Validation Error' <<<"$out"; then
    grep -A3 'Validation Error' <<<"$out" | head -n 60
    echo "FAIL: $(grep -c 'Validation Error' <<<"$out") validation messages"; fail=1
  fi
else
  echo "validation layer: not installed (vulkan-validationlayers), that run skipped"
fi

# The example engine on vulkan: both GEMM routes, no allocation after warm-up, an empty ledger.
pipeline=$(dirname "$gpuplug")/gpuplug-gemm-pipeline
if [[ -x $pipeline ]]; then
  out=$(timeout 600 "$pipeline" --backend vulkan 2>&1); rc=$?
  grep -E 'route|allocations after|ledger at exit|^result' <<<"$out"
  [[ $rc -eq 0 ]] && grep -q '^result: PASS' <<<"$out" ||
    { echo "$out"; echo "FAIL: gemm_pipeline --backend vulkan exited $rc"; fail=1; }
fi
exit $fail
