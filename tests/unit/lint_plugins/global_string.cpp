// SPDX-License-Identifier: Apache-2.0
// Lint plugin "lint_global_string": the host plugin under another name, whose name lives in a
// global std::string. Its destructor is registered with __cxa_atexit when the plugin loads: lint
// static_destructors must name that import. (Everything else is right: hidden visibility, the
// name of its file.)
#include <string>

extern "C" {
#include "../forward_host.h"
}

namespace {

const std::string plugin_name = "lint_global_string";  // the mistake: a static destructor
gpuplug_plugin_v1 table;

}  // namespace

extern "C" GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(
    uint32_t host_abi_version) {
  return forward_host(host_abi_version, plugin_name.c_str(), &table, NULL);
}
