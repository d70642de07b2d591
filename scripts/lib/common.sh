# SPDX-License-Identifier: Apache-2.0
# Shared by scripts/*: installs what the build needs on Debian 12, and configures/builds a preset.

GPUPLUG_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# Debian packages the build and tests need. CUDA is not a Debian package: it is used when found
# at /usr/local/cuda (or CUDA_PATH), and skipped with a configure message otherwise.
GPUPLUG_DEBIAN_PACKAGES=(
  cmake ninja-build g++ clang pkg-config file
  libboost-dev libboost-log-dev libboost-test-dev libboost-filesystem-dev
  libbenchmark-dev
  nlohmann-json3-dev  # support/json.hpp: every JSON document the core, the plugin SDK and the tool write or read
  libcli11-dev  # tools/gpuplug/cli.hpp: the command line of every `gpuplug` command
  libopenblas-dev  # examples/interop: the host backend's vendor BLAS beside gpuplug's GEMM
  python3 python3-jsonschema  # tool.list.schema validates `gpuplug list --json` against its schema
  libxml2-utils  # xmllint: tool.matrix validates `gpuplug check --junit` against tools/gpuplug/junit.xsd
  chromium  # tool.matrix.page renders `gpuplug matrix --html` in a real (headless) browser
  python3-numpy  # dlpack.numpy: NumPy's from_dlpack reads gpuplug's tensors and the reverse
  pybind11-dev  # python/: the extension gpuplug._gpuplug (headers and the pybind11 CMake package)
  python3-pybind11  # cmake/GpuplugPython.cmake finds pybind11's CMake package through it
  python3-pytest  # tests/python: the Python module's tests and its pytest plugin run under pytest
  python3-torch  # tests/python/test_dlpack.py: PyTorch 1.13 (CPU) takes gpuplug's tensors and gives its own
  openmpi-bin libopenmpi-dev  # examples/mpi_allreduce: example.mpi_allreduce* run two ranks under mpirun
  hipcc libamdhip64-dev
  libvulkan-dev  # plugins/vulkan: vulkan/vulkan.h (the plugin dlopens libvulkan.so.1, never links it)
  mesa-vulkan-drivers  # lavapipe: the Vulkan device script.vulkan_check and the matrix's vulkan row run on
  glslc spirv-tools vulkan-validationlayers  # Vulkan kernels and the Khronos validation layer (next slices)
  clang-19 lld-19 clang-tools-19  # the HIP targets HIP 5.2 cannot build (docs/device-check.md)
)

gpuplug_install_deps() {
  local missing=()
  for pkg in "${GPUPLUG_DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    echo "gpuplug: installing Debian packages: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  gpuplug_install_dlpack
}

# DLPack 1.0 (DLManagedTensorVersioned). Debian 12's libdlpack-dev is 0.6, which lacks it, so
# Debian 13's package is used: a header and CMake files only. It is unpacked with dpkg-deb -x into
# build/deps/dlpack (never dpkg -i: its Depends on libc6 >= 2.38 means nothing for a header, and
# the system's packages stay Debian 12's). CMakePresets.json puts build/deps/dlpack/usr on
# CMAKE_PREFIX_PATH; without it the build leaves DLPack support out (cmake/GpuplugDlpack.cmake).
GPUPLUG_DLPACK_DEB_URL=http://deb.debian.org/debian/pool/main/d/dlpack/libdlpack-dev_1.0-1_amd64.deb
GPUPLUG_DLPACK_DEB_SHA256=da984e7ca45390e1a8ace03a6119f11690654d761b98cd5090ffe3b41c5f5243
GPUPLUG_DLPACK_PREFIX=$GPUPLUG_ROOT/build/deps/dlpack

# Idempotent: the unpacked tree records the checksum of the .deb it came from, and a tree from
# the same .deb is kept. Returns non-zero, saying what failed, when the .deb cannot be fetched,
# does not match its checksum or cannot be unpacked; the previous tree is then left as it was.
gpuplug_install_dlpack() {
  local prefix=$GPUPLUG_DLPACK_PREFIX want=$GPUPLUG_DLPACK_DEB_SHA256 url=$GPUPLUG_DLPACK_DEB_URL
  if [ "$(cat "$prefix/.deb-sha256" 2>/dev/null)" = "$want" ] &&
     [ -f "$prefix/usr/include/dlpack/dlpack.h" ]; then
    return 0
  fi
  echo "gpuplug: fetching the DLPack 1.0 header ($url) into $prefix"
  local tmp got
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuplug-dlpack.XXXXXX") || return 1
  if ! curl -fsSL --retry 2 --max-time 120 -o "$tmp/dlpack.deb" "$url"; then
    echo "gpuplug: error: cannot download $url (see curl's message above); DLPack support needs it (docs/interop.md)" >&2
    rm -rf "$tmp"; return 1
  fi
  got=$(sha256sum "$tmp/dlpack.deb" | cut -d' ' -f1)
  if [ "$got" != "$want" ]; then
    echo "gpuplug: error: $url has sha256 $got, expected $want: not unpacked" >&2
    rm -rf "$tmp"; return 1
  fi
  if ! dpkg-deb -x "$tmp/dlpack.deb" "$tmp/tree" || [ ! -f "$tmp/tree/usr/include/dlpack/dlpack.h" ]; then
    echo "gpuplug: error: dpkg-deb -x could not unpack usr/include/dlpack/dlpack.h from $url" >&2
    rm -rf "$tmp"; return 1
  fi
  echo "$want" >"$tmp/tree/.deb-sha256"
  # Replaced as a whole, so that a failed run never leaves half a tree behind.
  mkdir -p "$(dirname "$prefix")" && rm -rf "$prefix" && mv "$tmp/tree" "$prefix"
  local rc=$?
  rm -rf "$tmp"
  return $rc
}

# gpuplug_build <preset>: configures (once) and builds build/<preset>.
gpuplug_build() {
  local preset=$1
  cmake --preset "$preset" -S "$GPUPLUG_ROOT" >/dev/null || cmake --preset "$preset" -S "$GPUPLUG_ROOT" || return 1
  cmake --build --preset "$preset" || return 1
}
