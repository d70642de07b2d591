// SPDX-License-Identifier: Apache-2.0
// A backend made from a plugin table handed to the core directly, for ABI compatibility checks.
#pragma once

#include <gpuplug/config.hpp>  // first: the C++20 check, the export region

#include <gpuplug/abi.h>

#include <cstdint>
#include <filesystem>
#include <gpuplug/backend.hpp>
#include <gpuplug/types.hpp>
#include <memory>

GPUPLUG_API_BEGIN
namespace gpuplug {

/// Makes a backend of device `ordinal` from `table`, exactly as the registry would from the
/// table the entry point of `plugin_file` returned: the same checks (the major version, a
/// struct_size of at least GPUPLUG_PLUGIN_V1_MIN_SIZE, the name, the required slots), the same
/// copy (no byte at or past what docs/architecture.md's ABI-3 allows is read) and the same
/// defaults for the optional slots the copy leaves null (ABI-2). It is how the "ABI skew" group
/// of the conformance suite (`gpuplug check`) hands the core tables truncated at each slot
/// boundary, padded with garbage past their struct_size, or negotiated for another host
/// version, and shows that each works. An application has no use for it: PluginRegistry does
/// this from discovery.
///
/// `table` must be readable for its struct_size bytes and its slots must be functions of
/// `plugin_file`, which is checked as discovery checks a candidate (a regular file on a trusted
/// path with an ELF header for this machine), then loaded, and kept loaded while the backend
/// lives. Throws Error(unavailable, <plugin_file>, "load", why) when the file cannot be loaded and
/// Error(invalid_argument, <plugin_file>, "check table", why) when the table breaks the ABI (the
/// message is the one discovery reports, e.g. "ABI mismatch: plugin speaks ABI 2.0, host speaks
/// 1.1"); the plugin's create failing throws as PluginRegistry::create does.
/// Thread-safety: safe to call from many threads at once.
std::shared_ptr<GpuBackend> create_backend_from_table(const std::filesystem::path& plugin_file,
                                                      const gpuplug_plugin_v1& table,
                                                      std::uint32_t ordinal = 0,
                                                      const Options& options = {});

}  // namespace gpuplug
GPUPLUG_API_END
