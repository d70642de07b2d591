#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# No ELF file of the build tree may make the loader search the current directory.
# 1. Every RUNPATH/RPATH element of every ELF file under <build dir> is absolute or starts with
#    $ORIGIN (an empty element, which CMake's padding produces, means "."). The lint plugin that
#    must have a "." element gets it only in a temporary copy (tests/scripts/check_lints.sh).
# 2. `gpuplug list`, run from a folder holding a junk libstdc++.so.6 and libcuda.so.1, works.
# usage: check_runpath.sh <build dir> <gpuplug executable>
set -uo pipefail
build=$1
tool=$(realpath "$2")
bad=0
checked=0
while IFS= read -r -d '' f; do
  magic=$(head -c 4 "$f" 2>/dev/null | od -An -tx1 | tr -d ' \n')
  [[ $magic == 7f454c46 ]] || continue
  checked=$((checked + 1))
  while IFS= read -r line; do
    [[ $line =~ \((RUNPATH|RPATH)\).*\[(.*)\] ]] || continue
    kind=${BASH_REMATCH[1]}
    value=${BASH_REMATCH[2]}
    # Split on ':' keeping empty elements ("a::b" -> a, "", b; "" -> one empty element).
    rest=$value
    while :; do
      e=${rest%%:*}
      if [[ -z $e ]]; then
        echo "FAIL: $f: $kind [$value] has an empty element (the current directory)"
        bad=1
        break
      elif [[ $e != /* && $e != '$ORIGIN'* ]]; then
        echo "FAIL: $f: $kind [$value] has the relative element '$e'"
        bad=1
        break
      fi
      [[ $rest == *:* ]] || break
      rest=${rest#*:}
    done
  done < <(readelf -d "$f" 2>/dev/null)
done < <(find "$build" -type f ! -name '*.o' ! -name '*.a' ! -name '*.obj' -print0)
echo "checked $checked ELF files under $build"
[[ $checked -gt 0 ]] || { echo "FAIL: no ELF file found"; bad=1; }

# A junk libstdc++.so.6 and libcuda.so.1 in the current directory must not be loaded.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for lib in libstdc++.so.6 libcuda.so.1 libgpuplug.so libboost_log.so; do
  printf 'junk, not an ELF file\n' >"$dir/$lib"
done
if ! out=$(cd "$dir" && GPUPLUG_LOG=error "$tool" list 2>&1); then
  echo "FAIL: gpuplug list in a folder with a junk libstdc++.so.6 failed:"
  echo "$out"
  bad=1
elif ! grep -q '^\[host\] available' <<<"$out"; then
  echo "FAIL: gpuplug list from $dir does not list host as available:"
  echo "$out"
  bad=1
fi
exit $bad
