#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpuplug modules` (kernel preflight) on host, with the cuda plugin on the path where it
# was built (no driver here: it must be shown unavailable with its reason): every built host
# module listed with its kernels and published n_tile / a_e4m3; a --modules folder holding a
# garbage module whose name is hostile (CR/LF, a forged line, ESC, Latin-1) reported as
# invalid_image with the name escaped; --json valid UTF-8 with the same facts; bad arguments
# named with exit 1 or 2.
# usage: modules_check.sh <gpuplug> <plugin folder>
set -euo pipefail
tool=$1
plugins=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
name=$'evil\r\n[forged] available\x1b[31m\xe9.so'
printf 'junk, not an ELF file' >"$dir/$name"
path="$plugins/libgpuplug-host.so"
[ -f "$plugins/libgpuplug-cuda.so" ] && path="$path:$plugins/libgpuplug-cuda.so"
export GPUPLUG_PLUGIN_PATH="$path" GPUPLUG_LOG=error
fail() { echo "FAIL: $*" >&2; exit 1; }

text=$("$tool" modules --modules "$dir")
echo "$text"
if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' <<<"$text"; then fail "raw control byte in the output"; fi
if grep -q '^\[forged\]' <<<"$text"; then fail "a forged line"; fi
grep -q '^\[host\] available' <<<"$text" || fail "host is not listed"
grep -qE '^  gemm\.so$' <<<"$text" || fail "gemm.so is not listed"
grep -qE '^    device 0: loads (x86_64|aarch64) \[ELF shared object; targets: ' <<<"$text" ||
  fail "no loadable target for host"
grep -qE '^      gemm_f32 n_tile=128$' <<<"$text" || fail "gemm_f32 without its n_tile"
grep -qE '^      gemm_a_e4m3 n_tile=128 a_e4m3=1$' <<<"$text" || fail "gemm_a_e4m3 without its values"
grep -qE '^      axpy$' <<<"$text" || fail "axpy is not listed"
grep -qF 'evil\r\n[forged] available\x1b[31m\xe9.so' <<<"$text" || fail "no escaped module name"
grep -qE '^    device 0: error \(invalid_image\): not a host module: not an ELF file' <<<"$text" ||
  fail "the garbage module is not reported as invalid_image"
if [ -f "$plugins/libgpuplug-cuda.so" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
  grep -qE '^\[cuda\] unavailable \(driver_missing\)$' <<<"$text" || fail "cuda is not shown unavailable"
  grep -qE '^  reason:  driver missing: ' <<<"$text" || fail "cuda's reason is not shown"
  grep -qE '^  not inspected: the cuda plugin has no usable device here' <<<"$text" ||
    fail "cuda's modules are not marked as not inspected"
fi

# --backend narrows to one plugin.
only=$("$tool" modules --backend host:0)
grep -q '^\[cuda\]' <<<"$only" && fail "--backend host:0 listed cuda"
grep -q '^\[host\] available' <<<"$only" || fail "--backend host:0 did not list host"

# Errors: named, with their exit statuses.
set +e
err=$("$tool" modules --modules "$dir/nonexistent" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "nonexistent" <<<"$err" || fail "missing --modules folder: rc $rc: $err"
mkdir -p "$dir/empty/host" "$dir/layout/host"
err=$("$tool" modules --modules "$dir/empty" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "empty': no module file in it" <<<"$err" || fail "--modules folder without modules: rc $rc: $err"
cp "$plugins/../kernels/host/axpy.so" "$dir/layout/host/mine.so"
out=$("$tool" modules --backend host --modules "$dir/layout" 2>&1)
grep -qE '^  mine\.so$' <<<"$out" || fail "DIR/host/mine.so (the layout) is not listed: $out"
grep -q "flat layout" <<<"$out" && fail "the layout warned as flat: $out"
err=$("$tool" modules --backend host --modules "$dir" 2>&1 >/dev/null)
[ "$(grep -c "holds module files directly (the flat layout" <<<"$err")" -eq 1 ] ||
  fail "a flat --modules folder is not warned about once: $err"
err=$("$tool" modules --backend nosuch 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "no plugin named 'nosuch'" <<<"$err" || fail "unknown backend: rc $rc: $err"
err=$("$tool" modules --backend host:3 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "no device 3" <<<"$err" || fail "absent device: rc $rc: $err"
err=$("$tool" modules --backend 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q -- "--backend needs a selector" <<<"$err" || fail "missing value: rc $rc: $err"
set -e

command -v python3 >/dev/null || { echo "python3 missing: JSON half skipped"; exit 77; }
"$tool" modules --modules "$dir" --json | python3 -c '
import json, sys
doc = json.loads(sys.stdin.buffer.read().decode("utf-8"))  # strict: raises on invalid UTF-8
assert doc["schema"] == 1, doc.get("schema")
host = [p for p in doc["plugins"] if p["name"] == "host"][0]
gemm = [m for m in host["modules"] if m["file"] == "gemm.so"][0]
dev = gemm["devices"][0]
assert dev["loadable"] is True, dev
fns = {f["name"]: f for f in dev["functions"]}
assert fns["gemm_f32"]["n_tile"] == 128 and fns["gemm_f32"]["a_e4m3"] is None, fns
assert fns["gemm_a_e4m3"]["a_e4m3"] == 1, fns
evil = [m for m in host["modules"] if "evil" in m["file"]][0]
assert bytes.fromhex(evil["file_bytes"]).startswith(b"evil\r\n[forged]"), evil
assert evil["devices"][0]["error"]["status"] == "invalid_image", evil
'
echo "ok"
