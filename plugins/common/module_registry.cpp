// SPDX-License-Identifier: Apache-2.0
// ModuleRegistry: names, lazy loading from modules_dir, "not found" messages listing what exists.
#include "module_registry.hpp"

#include <algorithm>
#include <mutex>
#include <system_error>

#include "gpuplug/support/escape.hpp"
#include "gpuplug/support/regular_file.hpp"
#include "gpuplug/support/text.hpp"

namespace gpuplug::sdk {
namespace {

/// The largest module file read: its size is checked (fstat) before a byte is read, so a huge
/// or endless file (a FIFO, a device) never fills the process's memory or blocks it.
constexpr std::uint64_t kMaxModuleFileBytes = std::uint64_t{256} << 20;

/// Messages put file and module names through this: they come from the caller and the file
/// system, and end up in logs and terminals.
std::string shown(std::string_view text) { return support::escape_text(text); }

}  // namespace

ModuleRegistry::ModuleRegistry(Device& device, std::vector<std::filesystem::path> search_path)
    : device_(device), search_path_(std::move(search_path)) {}

// No unloading here: the registry dies inside ~Device, after the vendor part of the object is
// gone, so vendor hooks can no longer be called. Device::shutdown unloads everything first.
ModuleRegistry::~ModuleRegistry() = default;

void ModuleRegistry::check_name(std::string_view name) {
  const bool ok = !name.empty() && name != "." && name != ".." &&
                  name.find_first_of(std::string_view("/\0", 2)) == std::string_view::npos;
  if (!ok)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
         "invalid module name '" + shown(name) + "' (a non-empty file stem without '/')");
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

void ModuleRegistry::load_file(std::string_view name, const std::filesystem::path& file) {
  check_name(name);
  std::unique_lock lock(mutex_);
  if (modules_.find(name) != modules_.end())
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "module " + std::string(name) + " is already loaded");
  auto [slot, inserted] = modules_.try_emplace(std::string(name), VendorModule{0});
  // The caller named the file, and the core's message names it: no "(from ...)" here.
  load_into(slot, name, file, false);
}

void ModuleRegistry::load_into(std::map<std::string, VendorModule, std::less<>>::iterator slot,
                               std::string_view name, const std::filesystem::path& file,
                               bool lazy) {
  try {
    // Read through one descriptor: the vendor validates these bytes and may check that the
    // file it loads by path is still this one (the host backend does).
    std::string why;
    std::optional<support::RegularFile> opened = support::RegularFile::open(file, why);
    std::optional<std::vector<std::byte>> image;
    if (opened) image = opened->read_all(kMaxModuleFileBytes, why);
    if (!image) {
      // Lazily, a module that cannot be read is not found; named by the caller, only a file
      // that does not exist is (a FIFO, a directory or an unreadable file is the caller's error).
      std::error_code ec;
      const bool missing = !std::filesystem::exists(file, ec);
      fail(lazy || missing ? GPUPLUG_STATUS_NOT_FOUND : GPUPLUG_STATUS_INVALID_ARGUMENT,
           "module " + shown(name) + ": cannot read " + shown(file.string()) + ": " + shown(why));
    }
    try {
      slot->second = device_.vendor_load_module_file(name, *image, *opened);
    } catch (const Failure& e) {
      if (!lazy) throw;
      throw Failure(e.status(), std::string(e.what()) + " (from " + shown(file.string()) + ")");
    }
  } catch (...) {
    modules_.erase(slot);
    throw;
  }
}

std::optional<std::pair<std::filesystem::path, std::size_t>> ModuleRegistry::find_file(
    std::string_view name, std::vector<std::string>* tried) const {
  const std::vector<std::string> extensions = device_.vendor_module_file_extensions();
  for (std::size_t i = 0; i < search_path_.size(); ++i) {
    for (const std::string& ext : extensions) {
      std::filesystem::path file = search_path_[i] / (std::string(name) + ext);
      std::error_code ec;
      if (std::filesystem::is_regular_file(file, ec)) return std::pair{std::move(file), i};
    }
  }
  if (tried != nullptr)
    for (const std::string& ext : extensions) tried->push_back(shown(name) + ext);
  return std::nullopt;
}

void ModuleRegistry::warn_shadowed(std::string_view name, const std::filesystem::path& chosen,
                                   std::size_t folder) const {
  const std::vector<std::string> extensions = device_.vendor_module_file_extensions();
  for (std::size_t i = folder + 1; i < search_path_.size(); ++i) {
    for (const std::string& ext : extensions) {
      const std::filesystem::path other = search_path_[i] / (std::string(name) + ext);
      std::error_code ec;
      if (!std::filesystem::is_regular_file(other, ec)) continue;
      if (std::filesystem::equivalent(other, chosen, ec)) continue;  // one folder named twice
      device_.log(GPUPLUG_LOG_WARNING,
                  "module " + shown(name) + ": using " + shown(chosen.string()) + "; " +
                      shown(other.string()) +
                      " is shadowed by it (module folders are searched in order, the built-in "
                      "one first)");
    }
  }
}

bool ModuleRegistry::has(std::string_view name) const {
  check_name(name);
  {
    std::shared_lock lock(mutex_);
    if (modules_.find(name) != modules_.end()) return true;
  }
  return find_file(name, nullptr).has_value();
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
  if (const auto found = find_file(name, &tried)) {
    const std::filesystem::path& file = found->first;
    warn_shadowed(name, file, found->second);
    auto [slot, inserted] = modules_.try_emplace(std::string(name), VendorModule{0});
    load_into(slot, name, file, true);
    return slot->second;
  }
  std::vector<std::string> folders;
  for (const auto& f : search_path_) folders.push_back(shown(f.string()));
  std::string msg = "module " + shown(name) + " not found: not loaded";
  if (!search_path_.empty() && tried.empty())
    msg += ", and this plugin names no module file extensions, so it reads no module files from "
           "the module folders " + support::join(folders, ":") + " (load the module from memory)";
  else if (!search_path_.empty())
    msg += ", and no " + support::join(tried) + " in the module folders " +
           support::join(folders, ":") + " (modules_dir after the built-in one)";
  else
    msg += " (no module folders)";
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
