# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# The plugin author's kit, end to end: what a vendor engineer does with an installed gpuplug.
#
#   source scripts/lib/kit.sh
#   gpuplug_check_kit build/dev        # returns non-zero when any step fails
#
# Steps, each against a fresh temporary prefix (removed afterwards; GPUPLUG_KIT_KEEP=1 keeps it):
#   1. cmake --install <build> --prefix <tmp>; installed binaries carry $ORIGIN RPATHs, plugins
#      do not link the core, the package files are there;
#   2. with no GPUPLUG_* variables, the installed `gpuplug list` finds the installed plugins;
#   3. the installed template (share/gpuplug/examples/plugin_template, a copy of
#      examples/plugin_template) builds out of tree with find_package(gpuplug) (CMAKE_PREFIX_PATH);
#   4. `<tmp>/bin/gpuplug check --plugin <template .so>` passes (nothing failed);
#   5. examples/plugin_consumer builds with find_package(gpuplug) and runs axpy on "example!"
#      found through GPUPLUG_PLUGIN_PATH;
#   6. the template installed into the prefix is found with no environment at all, by
#      `gpuplug list` and by the consumer; pkg-config's gpuplug.pc builds the consumer too;
#   7. tests/package (applications against the installed package: logging, version, exports;
#      the SDK's ledger and module-registry lookups from an out-of-tree device)
#      builds with find_package(gpuplug) and its CTest tests pass;
#   8. where clang++-14 exists (Debian 12's default clang++, which cannot compile libstdc++'s
#      <source_location>), tests/package again, built with it: the public headers must compile
#      with the oldest compiler an application team is likely to have;
#   9. the installed examples/conformance_cases (share/gpuplug/examples/conformance_cases: an
#      application's own cases, and its kernel module built by gpuplug_add_kernel_module) builds
#      out of tree against gpuplug::conformance, and the installed `gpuplug check --cases` passes them;
#  10. examples/count_layer (a third-party layer in C and an application that loads it with
#      add_layer_file, docs/layers.md) builds out of tree and counts the calls it sees on host;
#  11. examples/quickstart (the two files docs/quickstart.md shows in full) builds out of tree and
#      runs axpy on the backend "auto" chooses.
# The template, the consumer and step 7 are built with the compiler of <build>.

# gpuplug_check_kit <build-dir>
gpuplug_check_kit() {
  local build=${1:?gpuplug_check_kit needs a build directory}
  # A subshell: its own `set +e`, traps and environment, whatever the caller uses.
  (
    set +e
    set -o pipefail
    _gpuplug_kit_run "$build"
  )
}

_gpuplug_kit_fail() {
  echo "gpuplug kit: FAILED: $*" >&2
  return 1
}

# Runs "$@" with its output in $log; on failure prints the tail of it.
_gpuplug_kit_step() {
  local what=$1 log=$2
  shift 2
  if ! "$@" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    _gpuplug_kit_fail "$what (log: $log)"
    return 1
  fi
  echo "gpuplug kit: ok: $what"
}

_gpuplug_kit_run() {
  local build root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  build=$(cd "$1" 2>/dev/null && pwd) || { _gpuplug_kit_fail "no build directory '$1'"; return 1; }
  [ -f "$build/CMakeCache.txt" ] || { _gpuplug_kit_fail "$build is not a CMake build"; return 1; }

  local tmp
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuplug-kit.XXXXXX") || return 1
  if [ "${GPUPLUG_KIT_KEEP:-0}" = 1 ]; then
    echo "gpuplug kit: keeping $tmp"
  else
    # Expanded now: the trap runs when the subshell exits, after `tmp` has gone out of scope.
    # shellcheck disable=SC2064
    trap "rm -rf '$tmp'" EXIT
  fi
  local prefix="$tmp/prefix"
  # Nothing from the caller's environment may help the installed tree find its plugins.
  unset GPUPLUG_PLUGIN_PATH GPUPLUG_BACKEND GPUPLUG_KNOWN_FAILURES GPUPLUG_LOG LD_LIBRARY_PATH

  # The build's compiler and a generator for the out-of-tree projects.
  local cxx gen=()
  cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
  command -v ninja >/dev/null && gen=(-G Ninja)
  local cmake_args=("${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_PREFIX_PATH=$prefix"
                    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
  [ -n "$cxx" ] && cmake_args+=("-DCMAKE_CXX_COMPILER=$cxx")

  # 1. install
  _gpuplug_kit_step "cmake --install $build --prefix $prefix" "$tmp/install.log" \
    cmake --install "$build" --prefix "$prefix" || return 1
  local f
  for f in bin/gpuplug lib/libgpuplug.so lib/libgpuplug_plugin_sdk.a \
           lib/gpuplug/plugins/libgpuplug-host.so lib/gpuplug/kernels/host/axpy.so \
           include/gpuplug/abi.h include/gpuplug/plugin_sdk.hpp include/gpuplug/plugin_entry.hpp include/gpuplug/gpuplug.hpp \
           include/gpuplug/ledger.hpp include/gpuplug/module_registry.hpp include/gpuplug/e4m3.h \
           share/gpuplug/examples/plugin_template/CMakeLists.txt \
           share/gpuplug/examples/plugin_template/example_plugin.cpp \
           share/gpuplug/examples/conformance_cases/CMakeLists.txt \
           share/gpuplug/examples/conformance_cases/scale_host.cpp include/gpuplug/host_kernel.hpp \
           lib/cmake/gpuplug/GpuplugKernel.cmake share/doc/gpuplug/README.md share/doc/gpuplug/quickstart.md \
           share/doc/gpuplug/plugin-authors.md share/doc/gpuplug/conformance.md share/doc/gpuplug/CHANGELOG.md \
           lib/cmake/gpuplug/gpuplugConfig.cmake lib/cmake/gpuplug/GpuplugPlugin.cmake \
           lib/pkgconfig/gpuplug.pc share/gpuplug/conformance/known_failures.txt; do
    [ -e "$prefix/$f" ] || { _gpuplug_kit_fail "not installed: $f"; return 1; }
  done
  # Installed binaries find their libraries relative to themselves, never in the build tree.
  local elf dyn
  for elf in "$prefix"/bin/gpuplug "$prefix"/lib/libgpuplug*.so "$prefix"/lib/gpuplug/plugins/*.so; do
    dyn=$(readelf -d "$elf" 2>/dev/null) || { _gpuplug_kit_fail "readelf -d $elf"; return 1; }
    if grep -E 'R(UN)?PATH' <<<"$dyn" | grep -qF "$build"; then
      _gpuplug_kit_fail "$elf keeps a build-tree RPATH: $(grep -E 'R(UN)?PATH' <<<"$dyn")"
      return 1
    fi
  done
  dyn=$(readelf -d "$prefix/bin/gpuplug")
  # shellcheck disable=SC2016  # a literal $ORIGIN
  grep -E 'R(UN)?PATH' <<<"$dyn" | grep -qF '$ORIGIN/../lib' ||
    { _gpuplug_kit_fail "bin/gpuplug has no \$ORIGIN/../lib RPATH"; return 1; }
  for elf in "$prefix"/lib/gpuplug/plugins/*.so; do
    if readelf -d "$elf" | grep NEEDED | grep -q 'libgpuplug\.so'; then
      _gpuplug_kit_fail "$elf links libgpuplug (plugins speak only the C ABI)"
      return 1
    fi
  done
  echo "gpuplug kit: ok: installed files, RPATHs, plugins independent of the core"

  # 2. the installed tool finds the installed plugins with no environment
  local listing
  listing=$("$prefix/bin/gpuplug" list 2>&1) ||
    { printf '%s\n' "$listing" >&2; _gpuplug_kit_fail "installed 'gpuplug list'"; return 1; }
  if ! grep -q '^\[host\] available' <<<"$listing" ||
     ! grep -qF "path:    $prefix/lib/gpuplug/plugins/libgpuplug-host.so" <<<"$listing"; then
    printf '%s\n' "$listing" >&2
    _gpuplug_kit_fail "installed 'gpuplug list' does not find $prefix's host plugin"
    return 1
  fi
  if grep -qF "$build" <<<"$listing"; then
    printf '%s\n' "$listing" >&2
    _gpuplug_kit_fail "installed 'gpuplug list' searches the build tree $build"
    return 1
  fi
  echo "gpuplug kit: ok: installed 'gpuplug list' finds the installed plugins (no environment)"

  # 3. the template plugin, out of tree, against the installed package only: the installed copy,
  # the one docs/plugin-authors.md tells authors to copy
  local tdir="$tmp/template"
  _gpuplug_kit_step "configure share/gpuplug/examples/plugin_template (find_package(gpuplug))" "$tmp/template-configure.log" \
    cmake -S "$prefix/share/gpuplug/examples/plugin_template" -B "$tdir" "${cmake_args[@]}" || return 1
  _gpuplug_kit_step "build the installed template" "$tmp/template-build.log" \
    cmake --build "$tdir" || return 1
  local plugin="$tdir/lib/gpuplug/plugins/libgpuplug-example.so"
  [ -f "$plugin" ] || { _gpuplug_kit_fail "the template did not build $plugin"; return 1; }

  # 4. the conformance kit on it
  local check_log="$tmp/check.log"
  "$prefix/bin/gpuplug" check --plugin "$plugin" >"$check_log" 2>&1
  local rc=$? summary
  summary=$(tail -n 1 "$check_log")
  if [ $rc -ne 0 ] || ! [[ $summary =~ ^[0-9]+\ passed,\ 0\ failed ]]; then
    grep -vE '\bpass(ed)?\b' "$check_log" | tail -n 40 >&2
    _gpuplug_kit_fail "gpuplug check --plugin $plugin: exit $rc, '$summary'"
    return 1
  fi
  echo "gpuplug kit: ok: gpuplug check --plugin libgpuplug-example.so: $summary"

  # 5. a consumer built with find_package(gpuplug), selecting the plugin by name
  local cdir="$tmp/consumer" out
  _gpuplug_kit_step "configure examples/plugin_consumer (find_package(gpuplug))" "$tmp/consumer-configure.log" \
    cmake -S "$root/examples/plugin_consumer" -B "$cdir" "${cmake_args[@]}" || return 1
  _gpuplug_kit_step "build examples/plugin_consumer" "$tmp/consumer-build.log" \
    cmake --build "$cdir" || return 1
  out=$(GPUPLUG_PLUGIN_PATH="$(dirname "$plugin")" "$cdir/plugin_consumer" 'example!' 2>&1) ||
    { printf '%s\n' "$out" >&2; _gpuplug_kit_fail "plugin_consumer example! (GPUPLUG_PLUGIN_PATH)"; return 1; }
  grep -q 'correct' <<<"$out" || { printf '%s\n' "$out" >&2; _gpuplug_kit_fail "plugin_consumer output"; return 1; }
  echo "gpuplug kit: ok: plugin_consumer 'example!' via GPUPLUG_PLUGIN_PATH: $(tail -n 1 <<<"$out")"

  # 6. installed into the prefix: found with no environment; and the pkg-config route
  _gpuplug_kit_step "cmake --install the template into $prefix" "$tmp/template-install.log" \
    cmake --install "$tdir" --prefix "$prefix" || return 1
  listing=$("$prefix/bin/gpuplug" list 2>&1)
  grep -q '^\[example\] available' <<<"$listing" ||
    { printf '%s\n' "$listing" >&2; _gpuplug_kit_fail "installed example plugin not listed"; return 1; }
  if ! out=$("$cdir/plugin_consumer" 'example!' 2>&1) || ! grep -q 'correct' <<<"$out"; then
    printf '%s\n' "$out" >&2
    _gpuplug_kit_fail "plugin_consumer example! (installed, no environment)"
    return 1
  fi
  echo "gpuplug kit: ok: installed example plugin found with no environment (gpuplug list, plugin_consumer)"

  if command -v pkg-config >/dev/null; then
    local flags
    flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs gpuplug) ||
      { _gpuplug_kit_fail "pkg-config gpuplug"; return 1; }
    # shellcheck disable=SC2086  # the flags are words
    # No -std here: the .pc file's Cflags carry -std=c++20 (the headers refuse anything older).
    _gpuplug_kit_step "pkg-config gpuplug ($flags): build the consumer" "$tmp/pkgconfig-build.log" \
      "${cxx:-c++}" "$root/examples/plugin_consumer/main.cpp" $flags \
      "-Wl,-rpath,$prefix/lib" -o "$tmp/consumer-pc" || return 1
    if ! out=$("$tmp/consumer-pc" 'example!' 2>&1) || ! grep -q 'correct' <<<"$out"; then
      printf '%s\n' "$out" >&2
      _gpuplug_kit_fail "pkg-config consumer"
      return 1
    fi
    echo "gpuplug kit: ok: pkg-config consumer runs"
  fi

  # 7. applications against the installed package: their own CTest project
  local pdir="$tmp/package-tests"
  _gpuplug_kit_step "configure tests/package (find_package(gpuplug))" "$tmp/package-configure.log" \
    cmake -S "$root/tests/package" -B "$pdir" "${cmake_args[@]}" || return 1
  _gpuplug_kit_step "build tests/package" "$tmp/package-build.log" cmake --build "$pdir" || return 1
  _gpuplug_kit_step "ctest tests/package" "$tmp/package-ctest.log" \
    ctest --test-dir "$pdir" --output-on-failure || return 1
  echo "gpuplug kit: ok: tests/package: $(grep -E 'tests passed' "$tmp/package-ctest.log")"

  # 8. the same applications built with clang 14, where it is installed
  local clang14
  if clang14=$(command -v clang++-14); then
    local cargs=("${cmake_args[@]}") i
    for i in "${!cargs[@]}"; do  # the build's compiler out, clang 14 in
      [[ ${cargs[$i]} == -DCMAKE_CXX_COMPILER=* ]] && unset 'cargs[i]'
    done
    local qdir="$tmp/package-tests-clang14"
    _gpuplug_kit_step "configure tests/package with $clang14" "$tmp/clang14-configure.log" \
      cmake -S "$root/tests/package" -B "$qdir" "${cargs[@]}" "-DCMAKE_CXX_COMPILER=$clang14" || return 1
    _gpuplug_kit_step "build tests/package with clang 14" "$tmp/clang14-build.log" \
      cmake --build "$qdir" || return 1
    _gpuplug_kit_step "ctest tests/package (clang 14)" "$tmp/clang14-ctest.log" \
      ctest --test-dir "$qdir" --output-on-failure || return 1
    echo "gpuplug kit: ok: tests/package with clang 14: $(grep -E 'tests passed' "$tmp/clang14-ctest.log")"
  else
    echo "gpuplug kit: skipped: clang++-14 not installed (step 8)"
  fi

  # 9. an application's own conformance cases, out of tree, run by the installed tool on host
  local udir="$tmp/user-cases"
  _gpuplug_kit_step "configure share/gpuplug/examples/conformance_cases (find_package(gpuplug))" "$tmp/cases-configure.log" \
    cmake -S "$prefix/share/gpuplug/examples/conformance_cases" -B "$udir" "${cmake_args[@]}" || return 1
  _gpuplug_kit_step "build examples/conformance_cases" "$tmp/cases-build.log" cmake --build "$udir" || return 1
  _gpuplug_kit_step "installed gpuplug check --cases (the example's cases on host)" "$tmp/cases-check.log" \
    "$prefix/bin/gpuplug" check --backend 'host!' --only-user --cases "$udir/libexample_cases.so" \
      --modules "$udir/modules" || return 1
  echo "gpuplug kit: ok: user cases: $(tail -n 1 "$tmp/cases-check.log")"

  # 10. a third-party layer, out of tree, loaded from its file by an application
  local ldir="$tmp/count-layer"
  _gpuplug_kit_step "configure examples/count_layer (find_package(gpuplug))" "$tmp/layer-configure.log" \
    cmake -S "$root/examples/count_layer" -B "$ldir" "${cmake_args[@]}" || return 1
  _gpuplug_kit_step "build examples/count_layer" "$tmp/layer-build.log" cmake --build "$ldir" || return 1
  _gpuplug_kit_step "run count_layer_demo with the out-of-tree layer" "$tmp/layer-run.log" \
    "$ldir/count_layer_demo" "$ldir/libgpuplug-layer-count.so" || return 1
  grep -q "count: 3 allocs, 3 frees, 0 launches" "$tmp/layer-run.log" ||
    _gpuplug_kit_fail "count_layer_demo did not log the layer's counts: $(tail -n 3 "$tmp/layer-run.log")" ||
    return 1
  echo "gpuplug kit: ok: out-of-tree layer: $(grep 'count: ' "$tmp/layer-run.log")"

  # 11. docs/quickstart.md's application (examples/quickstart, the files the page shows in full)
  local qsdir="$tmp/quickstart"
  _gpuplug_kit_step "configure examples/quickstart (docs/quickstart.md)" "$tmp/quickstart-configure.log" \
    cmake -S "$root/examples/quickstart" -B "$qsdir" "${cmake_args[@]}" || return 1
  _gpuplug_kit_step "build examples/quickstart" "$tmp/quickstart-build.log" cmake --build "$qsdir" || return 1
  _gpuplug_kit_step "run quickstart (auto, no environment)" "$tmp/quickstart-run.log" \
    "$qsdir/quickstart" || return 1
  grep -q "elements, all 5" "$tmp/quickstart-run.log" ||
    _gpuplug_kit_fail "quickstart printed no result: $(tail -n 3 "$tmp/quickstart-run.log")" || return 1
  echo "gpuplug kit: ok: quickstart: $(tail -n 1 "$tmp/quickstart-run.log")"
  echo "gpuplug kit: all steps passed"
}
