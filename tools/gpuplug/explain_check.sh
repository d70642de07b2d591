#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpuplug list --explain`, a dry run of a selection: with an emulator, a plugin from
# before ABI 1.1, host, an integrated and a discrete GPU (tests/unit/fake_plugins/ranked_host.c)
# named in that discovery order, "auto" would choose the discrete GPU, and every candidate is
# listed with its rank, class and score, the emulator last; a plugin that cannot be used is
# passed over with its reason; an unknown name exits 1 naming it; a missing SELECTOR exits 2.
# A real GPU on the machine (the build's cuda/hip plugins are searched too) may rank above the
# fake GPU: the check then wants it to be a discrete GPU, and the fakes still in their order.
# usage: explain_check.sh <gpuplug> <plugin folder> <ranked fakes folder> <1.0 plugin> <fakes folder>
set -euo pipefail
tool=$1
plugins=$2
ranked=$3
old=$4
fakes=$5
export GPUPLUG_PLUGIN_PATH="$ranked/libgpuplug-fake_emu.so:$old:$plugins/libgpuplug-host.so:$ranked/libgpuplug-fake_igpu.so:$ranked/libgpuplug-fake_gpu.so:$fakes/libgpuplug-fake_missing.so"
export GPUPLUG_LOG=error
unset GPUPLUG_BACKEND
fail() { echo "FAIL: $*" >&2; exit 1; }

text=$("$tool" list --explain auto) || fail "exit $? for a selector that would choose"
echo "$text"
grep -qE "^selector 'auto' \(dry run\): would choose (fake_gpu|cuda|hip):0$" <<<"$text" ||
  fail "auto would not choose a discrete GPU"
grep -qE '^  1\. [a-z_]+:[0-9]+ discrete_gpu, score: .*: would be chosen$' <<<"$text" ||
  fail "rank 1 is not a discrete GPU that would be chosen"
# The fakes' lines, in rank order: the integrated GPU's 9000 and the emulator's 50000 GFLOP/s
# do not lift them above a discrete GPU's 1000.
order=$(grep -oE '^  [0-9]+\. (fake_gpu|fake_igpu|host_info_v1_0|host|fake_emu):0 [a-z_]+' <<<"$text" |
  awk '{print $2, $3}' | tr '\n' ';')
[ "$order" = "fake_gpu:0 discrete_gpu;fake_igpu:0 integrated_gpu;host_info_v1_0:0 accelerator;host:0 cpu;fake_emu:0 emulator;" ] ||
  fail "ranking order: $order"
grep -qE '^  [0-9]+\. fake_gpu:0 discrete_gpu, score: 1000 GFLOP/s, [0-9]+ MiB, [0-9]+ CUs: (would be chosen|ranked below [a-z_]+:0)$' <<<"$text" ||
  fail "fake_gpu's line lacks its score"
grep -qE '^  [0-9]+\. host_info_v1_0:0 accelerator \(declared unknown\), score: peak unknown, ' <<<"$text" ||
  fail "the 1.0 plugin is not shown as an accelerator with an unknown peak"
grep -qE '^  [0-9]+\. fake_emu:0 emulator, score: 50000 GFLOP/s, .*: ranked below (fake_gpu|cuda|hip):0$' <<<"$text" ||
  fail "the emulator is not ranked below the winner"
grep -qE '^passed over:$' <<<"$text" || fail "no passed-over section"
grep -qE '^  fake_missing: ' <<<"$text" || fail "the unusable plugin is not passed over with its reason"

# A named selector: no ranking, the name is what would be chosen.
text=$("$tool" list --explain=fake_emu) || fail "exit $? for fake_emu"
grep -qE "^selector 'fake_emu' \(dry run\): would choose fake_emu:0$" <<<"$text" || fail "fake_emu: $text"
if grep -q '^ranking' <<<"$text"; then fail "a named selector shows a ranking"; fi

# Nothing would be chosen: exit 1, the reason on stderr naming the selector.
set +e
err=$("$tool" list --explain 'cdua' 2>&1 >/dev/null); rc=$?
set -e
[ "$rc" = 1 ] || fail "unknown name: exit $rc, want 1"
grep -q "no backend for selector 'cdua'" <<<"$err" || fail "unknown name: $err"
set +e
"$tool" list --explain >/dev/null 2>&1; rc=$?
"$tool" list --json --explain auto >/dev/null 2>&1; rc2=$?
set -e
[ "$rc" = 2 ] || fail "--explain without a selector: exit $rc, want 2"
[ "$rc2" = 2 ] || fail "--json with --explain: exit $rc2, want 2"
echo "explain_check: ok"
