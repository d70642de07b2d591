// SPDX-License-Identifier: Apache-2.0
// PluginRegistry: discovers vendor plugins, reports why each is (un)usable, and makes backends.
#pragma once

#include <gpuplug/backend.hpp>
#include <gpuplug/types.hpp>

#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuplug {

enum class PluginState {
  available,    // loaded, probed, at least one device
  unavailable,  // loaded fine, but the driver or device is missing here
  failed,       // could not be used as a plugin at all
};

enum class PluginReason {
  none,
  not_a_shared_object,
  missing_dependency,
  missing_entry_symbol,
  entry_returned_null,
  abi_mismatch,
  table_too_small,
  duplicate_name,
  driver_missing,
  driver_too_old,
  no_device,
  probe_failed,
};

std::string_view to_string(PluginState s) noexcept;
std::string_view to_string(PluginReason r) noexcept;

/// One candidate plugin file and what became of it.
struct PluginInfo {
  std::filesystem::path path;
  std::string name;      // "cuda"; from the file name (libgpuplug-<name>.so) until a table names it
  std::string vendor;
  std::string version;   // the plugin's own version string
  std::uint32_t abi_version = 0;  // negotiated; 0 when none
  PluginState state = PluginState::failed;
  PluginReason reason = PluginReason::none;
  std::string message;   // full reason, e.g. "driver missing: libcuda.so.1 not found"
  std::vector<DeviceInfo> devices;
};

/// A parsed selector element: "cuda:1!" is {name "cuda", ordinal 1, required true}.
struct SelectorItem {
  std::string name;                      // "auto", "cuda", "hip", "host", or any plugin name
  std::optional<std::uint32_t> ordinal;  // nullopt: the first available device
  bool required = false;                 // '!': absence is an error, not a fallback
};

/// Parses "auto", "cuda", "cuda:1", "hip:0!", "cuda,hip,host". Throws Error(invalid_argument)
/// naming the selector and the offending element (empty element, bad ordinal, bad characters).
std::vector<SelectorItem> parse_selector(std::string_view selector);

/// The outcome of a selection: the backend and why earlier candidates were passed over.
struct Selection {
  std::shared_ptr<GpuBackend> backend;
  std::string chosen;                     // "host:0"
  std::vector<std::string> passed_over;   // "cuda: driver missing: libcuda.so.1 not found"
  std::string explain() const;            // one line: "chose host:0 (cuda: ...; hip: ...)"
};

/// Thread-safety: all members may be called concurrently. Backends made by a registry keep
/// their plugin library loaded after the registry is gone.
class PluginRegistry {
 public:
  /// Does not search; call discover().
  PluginRegistry();
  ~PluginRegistry();
  PluginRegistry(const PluginRegistry&) = delete;
  PluginRegistry& operator=(const PluginRegistry&) = delete;

  /// The folders and files searched, in order: GPUPLUG_PLUGIN_PATH (colon-separated), then the
  /// plugin folder beside libgpuplug.so (<libdir>/gpuplug/plugins: the installed folder from an
  /// install, the build tree's plugin folder from a build tree). Only when the core cannot locate
  /// its own file does it fall back to the build tree's folder compiled into it.
  static std::vector<std::filesystem::path> search_path();

  /// (Re)scans search_path(): in folders, files named libgpuplug-*.so; files named directly are
  /// taken whatever their name. Loads and probes each. Never throws for a broken plugin.
  void discover();
  /// Loads and probes one file (e.g. `gpuplug check --plugin FILE`); returns its entry.
  PluginInfo add_plugin_file(const std::filesystem::path& file);

  /// Every candidate seen, in discovery order.
  std::vector<PluginInfo> plugins() const;

  /// Makes a backend for `selector` (GPUPLUG_BACKEND overrides "auto"). Throws Error naming the
  /// selector and why each candidate was refused when nothing matches. The fallback is logged.
  std::shared_ptr<GpuBackend> create(std::string_view selector = "auto", const Options& options = {});
  /// As create, but also says why: what was chosen and what was passed over.
  Selection select(std::string_view selector = "auto", const Options& options = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuplug
