#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# check_exports.sh <libgpuplug.so> <exports.txt>
# The dynamic symbols libgpuplug defines (nm -D --defined-only, demangled) must be exactly the
# checked-in list of public names, and none may be STB_GNU_UNIQUE ('u'): one such symbol makes
# glibc mark the library NODELETE, so an application that dlopens gpuplug could never unload it.
# On a difference it prints what was added and what was removed; a deliberate API change is
# recorded by regenerating the list (the command is printed).
# A line "? <name>" lists a name that only some builds export: inline entities of the public
# headers (a template's vtable, an inline variable) are emitted where the core odr-uses them, which
# depends on the optimisation level (the sanitizer presets build at -O1), and the DLPack functions
# exist only in builds with the DLPack header (GPUPLUG_WITH_DLPACK). Such a name may be exported
# or not; a name that is not listed at all may not.
set -u -o pipefail
lib=${1:?usage: check_exports.sh <libgpuplug.so> <exports.txt>}
expected=${2:?usage: check_exports.sh <libgpuplug.so> <exports.txt>}
command -v nm >/dev/null || { echo "check_exports: nm not found (binutils)"; exit 1; }
[ -f "$lib" ] || { echo "check_exports: no library $lib"; exit 1; }

symbols=$(nm -D --defined-only "$lib") || { echo "check_exports: nm -D $lib failed"; exit 1; }
rc=0
unique=$(awk '$2 == "u"' <<<"$symbols")
if [ -n "$unique" ]; then
  echo "check_exports: $lib has STB_GNU_UNIQUE symbols (dlclose can never unload it):"
  c++filt <<<"$unique" | sed 's/^/  /'
  rc=1
fi
# Names only (types and addresses vary with the build), demangled, sorted by bytes.
actual=$(awk 'NF >= 3 { print $3 }' <<<"$symbols" | c++filt |
         LC_ALL=C sort -u)
required=$(grep -v '^? ' "$expected" | LC_ALL=C sort -u)
optional=$(sed -n 's/^? //p' "$expected" | LC_ALL=C sort -u)
# What the library exports, less the optional names it does not export, against the list.
listed=$( { printf '%s\n' "$required"; comm -12 <(printf '%s\n' "$optional") <(printf '%s\n' "$actual"); } |
         grep -v '^$' | LC_ALL=C sort -u)
if ! diff_out=$(diff <(printf '%s\n' "$listed") <(printf '%s\n' "$actual")); then
  echo "check_exports: libgpuplug's exports differ from $expected"
  echo "  ('>' exported but not listed: new API or a leak; '<' listed but no longer exported)"
  sed 's/^/  /' <<<"$diff_out"
  echo "An intended API change: nm -D --defined-only $lib | awk 'NF>=3{print \$3}' | c++filt | LC_ALL=C sort -u > $expected"
  echo "(then restore the '? ' lines: names only some builds export)"
  rc=1
fi
[ $rc -eq 0 ] && echo "check_exports: $(wc -l <<<"$actual") exported names, as listed; no unique symbols"
exit $rc
