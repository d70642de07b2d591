// SPDX-License-Identifier: Apache-2.0
// ModuleRegistry: names, lazy loading from modules_dir, "not found" messages listing what exists.
#include "module_registry.hpp"

#include <algorithm>
#include <mutex>
#include <system_error>

#include "gpuplug/support/regular_file.hpp"
#include "gpuplug/support/text.hpp"

namespace gpuplug::sdk {
namespace {

/// The largest module file read: its size is checked (fstat) before a byte is read, so a huge
/// or endless file (a FIFO, a device) never fills the process's memory or blocks it.
constexpr std::uint64_t kMaxModuleFileBytes = std::uint64_t{256} << 20;

std::vector<std::byte> read_image(const std::filesystem::path& file, std::string_view module) {
  std::string why;
  std::optional<std::vector<std::byte>> bytes =
      support::read_regular_file(file, kMaxModuleFileBytes, why);
  if (!bytes)
    fail(GPUPLUG_STATUS_NOT_FOUND,
         "module " + std::string(module) + ": cannot read " + file.string() + ": " + why);
  return std::move(*bytes);
}

}  // namespace

ModuleRegistry::ModuleRegistry(Device& device, std::optional<std::filesystem::path> modules_dir)
    : device_(device), modules_dir_(std::move(modules_dir)) {}

// No unloading here: the registry dies inside ~Device, after the vendor part of the object is
// gone, so vendor hooks can no longer be called. Device::shutdown unloads everything first.
ModuleRegistry::~ModuleRegistry() = default;

void ModuleRegistry::check_name(std::string_view name) {
  const bool ok = !name.empty() && name != "." && name != ".." &&
                  name.find_first_of(std::string_view("/\0", 2)) == std::string_view::npos;
  if (!ok)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
         "invalid module name '" + std::string(name) + "' (a non-empty file stem without '/')");
}

void ModuleRegistry::load(std::string_view name, std::span<const std::byte> image) {
  check_name(name);
  std::unique_lock lock(mutex_);
  if (modules_.find(name) != modules_.end())
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "module " + std::string(name) + " is already loaded");
  // Reserve the map node first so that a failed insert cannot leak a loaded vendor module.
  auto [it, inserted] = modules_.try_emplace(std::string(name), VendorModule{0});
  try {
    it->second = device_.vendor_load_module(name, image);
  } catch (...) {
    modules_.erase(it);
    throw;
  }
}

bool ModuleRegistry::has(std::string_view name) const {
  check_name(name);
  {
    std::shared_lock lock(mutex_);
    if (modules_.find(name) != modules_.end()) return true;
  }
  if (!modules_dir_) return false;
  for (const std::string& ext : device_.vendor_module_file_extensions()) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(*modules_dir_ / (std::string(name) + ext), ec))
      return true;
  }
  return false;
}

std::string ModuleRegistry::loaded_list() const {
  std::vector<std::string> names;
  for (const auto& [name, _] : modules_) names.push_back(name);
  return names.empty() ? "none" : support::join(names);
}

VendorModule ModuleRegistry::get(std::string_view name) {
  check_name(name);
  {
    std::shared_lock lock(mutex_);
    auto it = modules_.find(name);
    if (it != modules_.end()) return it->second;
  }
  std::unique_lock lock(mutex_);
  auto it = modules_.find(name);  // another thread may have loaded it meanwhile
  if (it != modules_.end()) return it->second;

  std::vector<std::string> tried;
  if (modules_dir_) {
    for (const std::string& ext : device_.vendor_module_file_extensions()) {
      const std::filesystem::path file = *modules_dir_ / (std::string(name) + ext);
      std::error_code ec;
      if (!std::filesystem::is_regular_file(file, ec)) {
        tried.push_back(file.filename().string());
        continue;
      }
      const std::vector<std::byte> image = read_image(file, name);
      auto [slot, inserted] = modules_.try_emplace(std::string(name), VendorModule{0});
      try {
        slot->second = device_.vendor_load_module(name, image);
      } catch (const Failure& e) {
        modules_.erase(slot);
        throw Failure(e.status(), std::string(e.what()) + " (from " + file.string() + ")");
      } catch (...) {
        modules_.erase(slot);
        throw;
      }
      return slot->second;
    }
  }
  std::string msg = "module " + std::string(name) + " not found: not loaded";
  if (modules_dir_)
    msg += ", and no " + support::join(tried) + " in modules_dir " + modules_dir_->string();
  else
    msg += " (no modules_dir)";
  msg += "; loaded modules: " + loaded_list();
  fail(GPUPLUG_STATUS_NOT_FOUND, msg);
}

template <class Use>
auto ModuleRegistry::with_module(std::string_view module, Use&& use) {
  get(module);  // loads it if needed; the lookup below holds the lock against a concurrent unload
  std::shared_lock lock(mutex_);
  auto it = modules_.find(module);
  if (it == modules_.end())
    fail(GPUPLUG_STATUS_NOT_FOUND, "module " + std::string(module) + " was unloaded concurrently");
  return use(it->second);
}

std::uint64_t ModuleRegistry::get_function(std::string_view module, std::string_view func) {
  const std::string name(func);
  return with_module(module, [&](VendorModule m) {
    if (!name.empty()) {
      if (const std::uint64_t f = device_.vendor_get_function(m, name); f != 0) return f;
    }
    std::vector<std::string> functions = device_.vendor_list_functions(m);
    std::sort(functions.begin(), functions.end());
    fail(GPUPLUG_STATUS_NOT_FOUND,
         "kernel " + std::string(module) + "::" + name + " not found (module " +
             std::string(module) + " has: " +
             (functions.empty() ? std::string("no kernels") : support::join(functions)) + ")");
  });
}

std::pair<std::uint64_t, std::uint64_t> ModuleRegistry::get_global(std::string_view module,
                                                                   std::string_view symbol) {
  const std::string name(symbol);
  return with_module(module, [&](VendorModule m) {
    const std::optional<VendorGlobal> g =
        name.empty() ? std::nullopt : device_.vendor_get_global(m, name);
    if (!g || g->address == 0)
      fail(GPUPLUG_STATUS_NOT_FOUND, "symbol " + std::string(module) + "::" + name +
                                         " not found in module " + std::string(module));
    {
      std::unique_lock lock(globals_mutex_);
      globals_.insert_or_assign(g->address, Global{g->bytes, g->writable, m});
    }
    return std::pair<std::uint64_t, std::uint64_t>{g->address, g->bytes};
  });
}

Access ModuleRegistry::global_access(std::uint64_t ptr, std::uint64_t bytes) const {
  std::shared_lock lock(globals_mutex_);
  auto it = globals_.upper_bound(ptr);
  if (it == globals_.begin()) return Access::none;
  --it;
  const std::uint64_t offset = ptr - it->first;
  if (offset >= it->second.bytes || bytes > it->second.bytes - offset) return Access::none;
  return it->second.writable ? Access::read_write : Access::read;
}

void ModuleRegistry::forget_globals(VendorModule module) noexcept {
  std::unique_lock lock(globals_mutex_);
  std::erase_if(globals_, [module](const auto& g) { return g.second.module == module; });
}

void ModuleRegistry::unload(std::string_view name) {
  check_name(name);
  std::unique_lock lock(mutex_);
  auto it = modules_.find(name);
  if (it == modules_.end())
    fail(GPUPLUG_STATUS_NOT_FOUND,
         "module " + std::string(name) + " is not loaded (loaded modules: " + loaded_list() + ")");
  const VendorModule m = it->second;
  modules_.erase(it);
  forget_globals(m);
  // Unload under the exclusive lock: every lookup that found the module has finished with it.
  device_.vendor_unload_module(m);
}

void ModuleRegistry::unload_all() noexcept {
  std::unique_lock lock(mutex_);
  {
    std::unique_lock globals_lock(globals_mutex_);
    globals_.clear();
  }
  for (auto& [name, m] : modules_) device_.vendor_unload_module(m);
  modules_.clear();
}

std::vector<std::string> ModuleRegistry::names() const {
  std::shared_lock lock(mutex_);
  std::vector<std::string> out;
  out.reserve(modules_.size());
  for (const auto& [name, _] : modules_) out.push_back(name);
  return out;
}

}  // namespace gpuplug::sdk
