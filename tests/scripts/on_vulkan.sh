#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs a test program on vulkan:0 when `gpuplug list` shows the vulkan plugin available, else
# exits 77 (skipped) saying why: the layer and fault-sweep tests on a real Vulkan driver
# (lavapipe in CI), which a machine without one cannot run.
# Usage: on_vulkan.sh <gpuplug> <test program> [args...]
set -uo pipefail
gpuplug=$1
shift
list=$(timeout 120 "$gpuplug" list 2>&1)
if ! grep -q '^\[vulkan\] available' <<<"$list"; then
  echo "SKIP: no usable Vulkan device: $(grep '^\[vulkan\]' <<<"$list" || echo 'no vulkan plugin')"
  exit 77
fi
exec "$@"
