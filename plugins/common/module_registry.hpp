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
/// by name: then `<folder>/<name><ext>` is looked for in each folder of the search path (the
/// built-in folder, then the modules_dir option's folders, in order), for each of the device's
/// vendor_module_file_extensions() in order; the first file found is loaded
/// (vendor_load_module_file). A file of the same name in a later folder is shadowed: the load
/// logs a warning naming both paths, because a user who adds a folder holding their own "axpy"
/// would otherwise silently get the built-in one. Names are plain file stems: no '/', not "." or
/// "..".
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
  ModuleRegistry(Device& device, std::vector<std::filesystem::path> search_path);
  ModuleRegistry(const ModuleRegistry&) = delete;
  ModuleRegistry& operator=(const ModuleRegistry&) = delete;
  /// Does not unload (vendor hooks are gone by then): Device::shutdown calls unload_all first.
  ~ModuleRegistry();

  /// Loads `image` under `name`. Failure(INVALID_ARGUMENT) if the name is taken or malformed;
  /// the vendor's Failure(INVALID_IMAGE) if the bytes do not load.
  void load(std::string_view name, std::span<const std::byte> image);
  /// Loads the module file `file` under `name` (the load_module_file slot): read through one
  /// descriptor, then vendor_load_module_file, as a module found in a module folder is.
  /// Failure(INVALID_ARGUMENT) if the name is taken or malformed or the file is no regular file
  /// that can be read; Failure(NOT_FOUND) naming the file when it does not exist; the vendor's
  /// failure otherwise.
  void load_file(std::string_view name, const std::filesystem::path& file);
  /// True when `name` is loaded or a file for it exists in a module folder (not loaded here).
  bool has(std::string_view name) const;
  /// The module, loaded from the module folders on first use. Failure(NOT_FOUND) names the
  /// module, the files tried, the folders and the loaded modules.
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
  /// The folders searched by name, in order.
  const std::vector<std::filesystem::path>& search_path() const noexcept { return search_path_; }

 private:
  struct Global {
    std::uint64_t bytes;
    bool writable;
    VendorModule module;
  };

  static void check_name(std::string_view name);
  /// Reads `file` through one descriptor and loads it with vendor_load_module_file into the
  /// reserved entry `slot` of modules_ (erased when the load fails). Caller holds mutex_.
  /// `lazy` (loading from a module folder on first use): append " (from <file>)" to the vendor's
  /// failure message, and report a file that cannot be read as NOT_FOUND whatever the reason
  /// (else only a file that does not exist is NOT_FOUND; any other is INVALID_ARGUMENT).
  void load_into(std::map<std::string, VendorModule, std::less<>>::iterator slot,
                 std::string_view name, const std::filesystem::path& file, bool lazy);
  std::string loaded_list() const;  // caller holds mutex_
  /// get(module), then `use(handle)` under the shared lock, so the module cannot be unloaded
  /// meanwhile. Failure(NOT_FOUND) when it was unloaded between the two.
  template <class Use>
  auto with_module(std::string_view module, Use&& use);
  void forget_globals(VendorModule module) noexcept;

  Device& device_;
  const std::vector<std::filesystem::path> search_path_;
  /// The first file for `name` in the search path and its folder's index, or nullopt; then
  /// `tried` (when not null) gets the file names looked for.
  std::optional<std::pair<std::filesystem::path, std::size_t>> find_file(
      std::string_view name, std::vector<std::string>* tried) const;
  /// Logs a warning for each file of `name` in a folder after `chosen`'s.
  void warn_shadowed(std::string_view name, const std::filesystem::path& chosen,
                     std::size_t folder) const;
  mutable std::shared_mutex mutex_;
  std::map<std::string, VendorModule, std::less<>> modules_;  // guarded by mutex_
  // Taken after mutex_ when both are held. A module's globals are forgotten before it unloads.
  mutable std::shared_mutex globals_mutex_;
  std::map<std::uint64_t, Global> globals_;  // by address; guarded by globals_mutex_
};

}  // namespace gpuplug::sdk
