#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A setuid-root program linked to libgpuplug, run by `nobody` with GPUPLUG_PLUGIN_PATH pointing at
# the fake plugins: the core must ignore the variable (secure_getenv) and warn that it did.
# Usage: setuid_env.sh <test_setuid_env> <fake plugin folder>. Exit 77 (skipped) unless root and
# setpriv is there.
set -euo pipefail
program=$1
fakes=$2
if [[ $(id -u) -ne 0 ]]; then echo "skipped: needs root (chown root + chmod 4755)"; exit 77; fi
if ! command -v setpriv >/dev/null; then echo "skipped: setpriv is missing"; exit 77; fi
tmp=$(mktemp -d /tmp/gpuplug-setuid-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"  # traversable by nobody
cp "$program" "$tmp/test_setuid_env"
chown root:root "$tmp/test_setuid_env"
chmod 4755 "$tmp/test_setuid_env"
# Without setuid, as nobody: the variable is honoured (the fakes are listed), so the check below
# is not vacuous.
cp "$program" "$tmp/plain"
chmod 755 "$tmp/plain"
plain=$(cd / && GPUPLUG_PLUGIN_PATH="$fakes" GPUPLUG_PROBE=inprocess \
  setpriv --reuid=65534 --regid=65534 --clear-groups "$tmp/plain" 2>&1 || true)
out=$(cd / && GPUPLUG_PLUGIN_PATH="$fakes" GPUPLUG_BACKEND=nothing GPUPLUG_LOG=trace \
  setpriv --reuid=65534 --regid=65534 --clear-groups "$tmp/test_setuid_env" 2>&1)
echo "$out"
if ! grep -q "$fakes" <<<"$plain"; then
  echo "FAIL: without setuid the fake plugins should be listed:"; echo "$plain"; exit 1
fi
if grep -q "$fakes" <<<"$out"; then
  echo "FAIL: the setuid program listed plugins from GPUPLUG_PLUGIN_PATH"; exit 1
fi
if ! grep -q "ignoring GPUPLUG_PLUGIN_PATH" <<<"$out"; then
  echo "FAIL: no 'ignoring GPUPLUG_PLUGIN_PATH' warning"; exit 1
fi
if grep -q "\[gpuplug trace\]\|\[gpuplug debug\]" <<<"$out"; then
  echo "FAIL: GPUPLUG_LOG=trace was honoured"; exit 1
fi
echo "ok: GPUPLUG_PLUGIN_PATH ignored in the setuid program"
