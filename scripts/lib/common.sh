# SPDX-License-Identifier: Apache-2.0
# Shared by scripts/*: installs what the build needs on Debian 12, and configures/builds a preset.

GPUPLUG_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# Debian packages the build and tests need. CUDA is not a Debian package: it is used when found
# at /usr/local/cuda (or CUDA_PATH), and skipped with a configure message otherwise.
GPUPLUG_DEBIAN_PACKAGES=(
  cmake ninja-build g++ clang pkg-config file
  libboost-dev libboost-log-dev libboost-test-dev libboost-filesystem-dev
  libbenchmark-dev
  libopenblas-dev  # examples/interop: the host backend's vendor BLAS beside gpuplug's GEMM
  python3 python3-jsonschema  # tool.list.schema validates `gpuplug list --json` against its schema
  libxml2-utils  # xmllint: tool.matrix validates `gpuplug check --junit` against tools/gpuplug/junit.xsd
  chromium  # tool.matrix.page renders `gpuplug matrix --html` in a real (headless) browser
  hipcc libamdhip64-dev
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
}

# gpuplug_build <preset>: configures (once) and builds build/<preset>.
gpuplug_build() {
  local preset=$1
  cmake --preset "$preset" -S "$GPUPLUG_ROOT" >/dev/null || cmake --preset "$preset" -S "$GPUPLUG_ROOT" || return 1
  cmake --build --preset "$preset" || return 1
}
