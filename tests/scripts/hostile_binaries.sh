#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The programs still run on host with the hostile plugins (tests/unit/hostile_plugins) on the
# path: `gpuplug list` names each culprit, `gpuplug check --backend host` (a fast subset) passes,
# `gemm_pipeline --backend auto` verifies its run; each finishes within the probe timeout plus
# slack. Usage: hostile_binaries.sh <gpuplug> <gemm_pipeline> <hostile plugin folder>
set -uo pipefail
gpuplug=$1
gemm=$2
hostile=$3
export GPUPLUG_PLUGIN_PATH=$hostile GPUPLUG_PROBE_TIMEOUT=2
unset GPUPLUG_BACKEND GPUPLUG_LOG GPUPLUG_PROBE
fail=0
run() {  # run <name> <command...>: output in $out, status in $rc, at most 60 s
  local name=$1; shift
  local start=$SECONDS
  out=$(timeout 60 "$@" 2>&1); rc=$?
  echo "== $name: exit $rc after $((SECONDS - start)) s"
}
expect() {  # expect <regex> <what>
  if ! grep -Eq -- "$1" <<<"$out"; then echo "FAIL: $2 (no match for /$1/)"; fail=1; fi
}

run "gpuplug list" "$gpuplug" list
echo "$out"
[[ $rc -eq 0 ]] || { echo "FAIL: gpuplug list exited $rc"; fail=1; }
expect '\[host\] available' "host is available"
expect 'segv_entry.*crashed' "segv_entry is reported as crashed"
expect 'abort_ctor.*crashed' "abort_ctor is reported as crashed"
expect 'hostile_exit.*exited|exit_probe.*exited' "exit_probe is reported as exited"
expect 'hostile_hang.*timed_out|hang_probe.*timed_out' "hang_probe is reported as timed_out"
expect 'SIGSEGV' "the signal is named"

run "gpuplug check --backend host" "$gpuplug" check --backend host --case alloc
echo "$out" | tail -3
[[ $rc -eq 0 ]] || { echo "FAIL: gpuplug check exited $rc"; fail=1; }
expect '[1-9][0-9]* passed, 0 failed' "the check cases pass on host"

# auto prefers any usable non-host plugin, and the overrun liar is usable: auto runs beside the
# plugins that crash, exit and hang (links in a private folder; the files are checked at their
# real path).
crashers=$(mktemp -d /tmp/gpuplug-hostile-XXXXXX)
trap 'rm -rf "$crashers"' EXIT
for f in "$hostile"/libgpuplug-*.so; do
  [[ $f == */libgpuplug-overrun.so ]] || ln -s "$f" "$crashers/"
done
GPUPLUG_PLUGIN_PATH=$crashers run "gemm_pipeline --backend auto" "$gemm" --backend auto --steps 2
echo "$out" | tail -5
[[ $rc -eq 0 ]] || { echo "FAIL: gemm_pipeline exited $rc"; fail=1; }
expect 'chose host:0' "gemm_pipeline ran on host"
expect 'hang_probe: timed out' "gemm_pipeline's choice names the plugins it passed over"
exit $fail
