// SPDX-License-Identifier: Apache-2.0
// gpuplug-probe: the helper libgpuplug starts to probe one plugin in a process of its own.
#include "discovery/isolated_probe.hpp"

int main(int argc, char** argv) { return gpuplug::detail::probe_helper_main(argc, argv); }
