// SPDX-License-Identifier: Apache-2.0
// ModuleRegistry: one device instance's kernel modules by name, and the globals they published.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "plugin_sdk.hpp"

namespace gpuplug::sdk {

/// Name -> VendorModule bookkeeping for one Device; the vendor hooks do the loading.
///
/// A module is loaded explicitly (`load`, from bytes) or lazily the first time it is asked for
/// by name: then `<modules_dir>/<name><ext>` is read for each of the device's
/// vendor_module_file_extensions(), in order. Names are plain file stems: no '/', not "." or "..".
///
/// Globals: every global `get_global` resolved is recorded with its module until that module is
/// unloaded, so that copies may name it (`global_access`, asked by the SDK's range check).
///
/// Thread-safety: every member may be called concurrently. Lookups of loaded modules share a
/// lock; a load (explicit or lazy) is exclusive, so one name is never loaded twice. Handles
/// returned by get_function / get_global are invalid once their module is unloaded.
class ModuleRegistry {
 public:
  /// `device` must outlive the registry (the Device owns it).
  ModuleRegistry(Device& device, std::optional<std::filesystem::path> modules_dir);
  ModuleRegistry(const ModuleRegistry&) = delete;
  ModuleRegistry& operator=(const ModuleRegistry&) = delete;
  /// Does not unload (vendor hooks are gone by then): Device::shutdown calls unload_all first.
  ~ModuleRegistry();

  /// Loads `image` under `name`. Failure(INVALID_ARGUMENT) if the name is taken or malformed;
  /// the vendor's Failure(INVALID_IMAGE) if the bytes do not load.
  void load(std::string_view name, std::span<const std::byte> image);
  /// True when `name` is loaded or a file for it exists in modules_dir (it is not loaded here).
  bool has(std::string_view name) const;
  /// The module, loaded from modules_dir on first use. Failure(NOT_FOUND) names the module, the
  /// files tried, the modules_dir and the loaded modules.
  VendorModule get(std::string_view name);
  /// Failure(NOT_FOUND) "kernel gemm::gemm_f16 not found (module gemm has: gemm_a_e4m3, gemm_f32)".
  std::uint64_t get_function(std::string_view module, std::string_view func);
  /// {address, bytes}, recorded for `global_access`; Failure(NOT_FOUND) naming module and symbol.
  std::pair<std::uint64_t, std::uint64_t> get_global(std::string_view module,
                                                     std::string_view symbol);
  /// What a device may do with [ptr, ptr + bytes) as far as the recorded globals say: read_write
  /// (or read, for a read-only global) when one global holds the whole range, else none.
  Access global_access(std::uint64_t ptr, std::uint64_t bytes) const;
  /// Failure(NOT_FOUND) when `name` is not loaded.
  void unload(std::string_view name);
  /// Unloads every module. Never throws.
  void unload_all() noexcept;

  /// Names of the loaded modules, sorted.
  std::vector<std::string> names() const;
  const std::optional<std::filesystem::path>& modules_dir() const noexcept { return modules_dir_; }

 private:
  struct Global {
    std::uint64_t bytes;
    bool writable;
    VendorModule module;
  };

  static void check_name(std::string_view name);
  std::string loaded_list() const;  // caller holds mutex_
  /// get(module), then `use(handle)` under the shared lock, so the module cannot be unloaded
  /// meanwhile. Failure(NOT_FOUND) when it was unloaded between the two.
  template <class Use>
  auto with_module(std::string_view module, Use&& use);
  void forget_globals(VendorModule module) noexcept;

  Device& device_;
  const std::optional<std::filesystem::path> modules_dir_;
  mutable std::shared_mutex mutex_;
  std::map<std::string, VendorModule, std::less<>> modules_;  // guarded by mutex_
  // Taken after mutex_ when both are held. A module's globals are forgotten before it unloads.
  mutable std::shared_mutex globals_mutex_;
  std::map<std::uint64_t, Global> globals_;  // by address; guarded by globals_mutex_
};

}  // namespace gpuplug::sdk
