#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpuplug list` with a hostile plugin file name on the path (CR/LF, a forged "[x] available"
# line, an ESC sequence, a Latin-1 byte): the text output holds no raw control byte and forges
# no line; --json is valid UTF-8 and keeps the exact bytes in "path_bytes".
# usage: list_escape_check.sh <gpuplug> <host plugin folder>
set -euo pipefail
tool=$1
plugins=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
name=$'libgpuplug-evil\r\n[forged] available\x1b[31m\xe9.so'
printf 'junk' >"$dir/$name"
export GPUPLUG_PLUGIN_PATH="$plugins:$dir" GPUPLUG_LOG=error
fail() { echo "FAIL: $*" >&2; exit 1; }

text=$("$tool" list)
if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' <<<"$text"; then fail "raw control byte in:"$'\n'"$text"; fi
if LC_ALL=C grep -q $'\r' <<<"$text"; then fail "raw CR in the text output"; fi
if grep -q '^\[forged\]' <<<"$text"; then fail "a forged line:"$'\n'"$text"; fi
grep -qF 'evil\r\n[forged] available\x1b[31m\xe9.so' <<<"$text" || fail "no escaped path in:"$'\n'"$text"
grep -q '^\[host\] available' <<<"$text" || fail "host is not listed"

command -v python3 >/dev/null || { echo "python3 missing: JSON half skipped"; exit 77; }
"$tool" list --json | python3 -c '
import json, sys
doc = json.loads(sys.stdin.buffer.read().decode("utf-8"))  # strict: raises on invalid UTF-8
evil = [p for p in doc["plugins"] if "evil" in p["name"]]
assert len(evil) == 1, doc
raw = bytes.fromhex(evil[0]["path_bytes"])
assert raw.endswith(b"evil\r\n[forged] available\x1b[31m\xe9.so"), raw
assert "\ufffd" in evil[0]["path"], evil[0]["path"]
assert all("path_bytes" not in p for p in doc["plugins"] if p["name"] == "host")
'
echo "ok"
