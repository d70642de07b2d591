// SPDX-License-Identifier: Apache-2.0
// Isolated probing (core-private): each candidate is loaded and probed by the gpuplug-probe helper
// in a child process, which sends back one bounded record; a crash, exit or hang is reported.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "discovery/plugin_loader.hpp"

namespace gpuplug::detail {

/// The most bytes a probe record may hold, and the most one string field in it may hold: a
/// child that sends more is refused (probe_failed) without the parent allocating more.
inline constexpr std::size_t max_probe_record_bytes = 64 * 1024;
inline constexpr std::size_t max_probe_field_bytes = 4096;

/// One file to probe: the name it is reported under and its real path.
struct ProbeJob {
  std::filesystem::path file;
  std::filesystem::path canonical;
};

/// Starts one gpuplug-probe child per job (all at once) and waits for them together, at most
/// `timeout` in all: an entry per job, in order. A child that dies of a signal is `crashed`, one
/// that exits before sending its whole record is `exited`, one still running at the deadline is
/// killed (SIGKILL), reaped and `timed_out`; each message names the step it was in. A record that
/// breaks the format or its caps is probe_failed, naming the defect. Entries that a child reports
/// usable hold an empty LoadedPlugin: the library is loaded into this process only by
/// acquire_library. Never throws but std::bad_alloc.
std::vector<PluginEntry> probe_isolated(std::span<const ProbeJob> jobs,
                                        const std::filesystem::path& helper,
                                        std::chrono::milliseconds timeout);

/// The record format: what a probe found, as the helper sends it (length-prefixed fields).
std::string encode_probe_record(const PluginInfo& info);
/// Parses and validates a record; the PluginInfo (path unset) or the defect in words.
std::variant<PluginInfo, std::string> decode_probe_record(std::string_view record);

/// The gpuplug-probe helper's main: `gpuplug-probe FILE` loads and probes FILE (load_plugin) and
/// writes its stage frames and record to file descriptor 3, then leaves without running the
/// plugin's destructors.
int probe_helper_main(int argc, char** argv);

}  // namespace gpuplug::detail
