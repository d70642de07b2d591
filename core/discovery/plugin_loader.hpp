// SPDX-License-Identifier: Apache-2.0
// Finding, checking, loading and probing plugin files (core-private): what PluginRegistry::discover
// does for each candidate, in this process or in the gpuplug-probe helper, and the entry it keeps.
#pragma once

#include <gpuplug/abi.h>

#include <filesystem>
#include <gpuplug/registry.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "table/plugin_table.hpp"

namespace boost::dll {
class shared_library;
}  // namespace boost::dll

namespace gpuplug::detail {

using Library = boost::dll::shared_library;

/// A plugin library loaded into this process, shared by every copy of its entry (the registry's
/// and the snapshots select() works on). Empty until the library is loaded: at discovery in
/// in-process mode, at the first create() in isolated mode. Guarded by `mutex`; once `library` is
/// set, it and `table` never change.
struct LoadedPlugin {
  std::mutex mutex;
  std::shared_ptr<const Library> library;
  gpuplug_plugin_v1 table{};
};

/// One candidate file and what checking and probing it gave.
/// Invariant: `loaded` is set iff info.state != failed.
struct PluginEntry {
  PluginInfo info;
  std::filesystem::path canonical;  // for "the same file reached twice"
  std::shared_ptr<LoadedPlugin> loaded;
};

/// The steps of a load, in order; a crash or hang in the probe helper is reported with the step
/// it was in.
enum class LoadStage : unsigned char { open, entry, probe, describe, done };
/// "in probe", "while loading the library (static constructors)": where a probe stopped.
std::string_view describe_stage(LoadStage s) noexcept;

/// Called before each step of load_plugin (the probe helper reports it to the registry).
using StageHook = void (*)(LoadStage stage);

/// Files to consider under one search-path element, in a stable order: in a folder the entries
/// named libgpuplug-*.so (whatever their type: a directory or FIFO so named is then refused as
/// not a regular file); a file named directly whatever its name. A missing or unreadable element
/// is logged with its errno text (a warning when it came from the environment, else debug).
std::vector<std::filesystem::path> plugin_candidates(const std::filesystem::path& where,
                                                     bool from_environment);

/// The plugin's name as its file gives it: "libgpuplug-cuda.so" -> "cuda"; a file not named
/// libgpuplug-<name>.so -> its stem. What the registry reports until the plugin's table names it.
std::string name_from_file(const std::filesystem::path& file);

/// The checks made before anything of `file` is loaded: a regular file (opened without blocking),
/// a trusted path (check_path_trust), an ELF header for this machine (64 bytes read).
std::optional<Refusal> preflight(const std::filesystem::path& file);

/// A file the application names (a table's plugin file, a layer file), loaded into this process
/// after preflight, rtld_now | rtld_local. Throws Error(unavailable, <file>, operation, why) when
/// preflight refuses it or it cannot be loaded.
std::shared_ptr<Library> load_checked_library(const std::filesystem::path& file,
                                              const std::string& operation);

/// Loads, checks and probes one file in this process, after preflight. Never throws for a broken
/// plugin: the entry says why. The library stays loaded in the entry unless it was refused.
PluginEntry load_plugin(const std::filesystem::path& file, const std::filesystem::path& canonical,
                        StageHook hook = nullptr);

/// The library and table create() uses: loads the entry's file into this process on first use
/// (under the entry's lock; thread-safe), checks the table again and keeps it. Throws Error
/// (unavailable) naming the file when it cannot be loaded or no longer matches what was probed.
std::pair<std::shared_ptr<const Library>, gpuplug_plugin_v1> acquire_library(const PluginEntry& e);

/// Marks every usable entry whose name an earlier-chosen entry speaks for as duplicate_name: per
/// name the first available entry wins, else the first unavailable one. Losers lose their library.
void resolve_duplicates(std::span<PluginEntry> entries);

/// Why `file` may not be loaded by this process: it, or a folder above it, can be changed by a
/// user other than root and the effective user (see docs/architecture.md, "Trust and
/// containment"). Symbolic links are resolved first; the real path is checked.
std::optional<Refusal> check_path_trust(const std::filesystem::path& file);

}  // namespace gpuplug::detail
