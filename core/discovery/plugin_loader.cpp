// SPDX-License-Identifier: Apache-2.0
// Loading one plugin file: the checks before loading (regular file, trusted path, ELF header),
// dynamic loading (Boost.DLL), the entry symbol, the v1 table's checks, and the probe; every
// refusal says why. Also the lazy load for create() and the duplicate-name rule.
#include "discovery/plugin_loader.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <boost/dll/shared_library.hpp>
#include <gpuplug/log.hpp>
#include <gpuplug/support/c_string.hpp>
#include <gpuplug/support/elf_image.hpp>
#include <gpuplug/support/plugin_name.hpp>
#include <gpuplug/support/regular_file.hpp>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "table/plugin_table.hpp"

namespace gpuplug::detail {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view channel = "registry";

// A plausibility bound, so that a broken probe cannot make discovery describe billions of
// devices; no machine has more than a few dozen GPUs.
constexpr std::uint32_t kMaxDevicesPerPlugin = 1024;

bool is_plugin_file_name(const fs::path& file) {
  return !support::plugin_name_of_file(file.filename().string()).empty();
}

// ---- the steps of load_plugin: each returns why it refuses the file, or nothing ---------------

/// Why `file` cannot be an ELF shared object for this process, found from its first 64 bytes
/// without asking the dynamic loader: a directory, FIFO or device is refused without being opened
/// (a FIFO would block discovery), a foreign machine or class is named ("aarch64").
std::optional<Refusal> check_elf(const fs::path& file) {
  std::string why;
  const auto file_handle = support::RegularFile::open(file, why);
  if (!file_handle) return Refusal{PluginReason::not_a_regular_file, why};
  const auto head = file_handle->read_head(support::elf_header_size, why);
  if (!head) return Refusal{PluginReason::not_a_shared_object, "not a shared object: " + why};
  if (const auto verdict = support::validate_elf_header(*head, file_handle->size()); !verdict) {
    return Refusal{PluginReason::not_a_shared_object,
                   "not a shared object: '" + file.string() + "': " + verdict.defect};
  }
  return std::nullopt;
}

/// Loads `file` (symbols resolved now, kept local); a failure is classified from dlerror.
std::optional<Refusal> open_library(const fs::path& file, Library& library) {
  boost::dll::fs::error_code ec;
  ::dlerror();  // clear a stale message: dlerror is per thread and read right after the load
  library.load(boost::dll::fs::path(file.string()),
               boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, ec);
  if (!ec && library.is_loaded()) return std::nullopt;
  const char* dl = ::dlerror();
  const std::string why = dl != nullptr ? dl : ec.message();
  if (why.find("cannot open shared object file") != std::string::npos) {
    return Refusal{PluginReason::missing_dependency, "missing dependency: " + why};
  }
  if (why.find("undefined symbol") != std::string::npos) {
    return Refusal{PluginReason::missing_dependency,
                   "missing dependency (unresolved symbol): " + why};
  }
  return Refusal{PluginReason::not_a_shared_object, "not a loadable shared object: " + why};
}

/// Calls the entry symbol with the host's ABI version; `published` is the table it returns.
std::optional<Refusal> call_entry(const Library& library, const fs::path& file,
                                  const gpuplug_plugin_v1*& published) {
  if (!library.has(GPUPLUG_PLUGIN_ENTRY_SYMBOL)) {
    return Refusal{PluginReason::missing_entry_symbol,
                   "missing entry symbol: '" + file.string() +
                       "' exports no " GPUPLUG_PLUGIN_ENTRY_SYMBOL " (not a gpuplug plugin?)"};
  }
  auto& entry = library.get<const gpuplug_plugin_v1*(std::uint32_t)>(GPUPLUG_PLUGIN_ENTRY_SYMBOL);
  published = entry(GPUPLUG_ABI_VERSION);
  if (published != nullptr) return std::nullopt;
  return Refusal{PluginReason::entry_returned_null,
                 GPUPLUG_PLUGIN_ENTRY_SYMBOL "(" + abi_version_text(GPUPLUG_ABI_VERSION) +
                     ") returned null: the plugin shares no ABI version with this host"};
}

/// The refused entry: failed, with the reason, and no library.
PluginEntry refused(PluginEntry&& e, Refusal&& why) {
  e.info.state = PluginState::failed;
  e.info.reason = why.reason;
  e.info.message = std::move(why.message);
  e.loaded.reset();
  return std::move(e);
}

// ---- the probe ---------------------------------------------------------------------------------

/// What the probe's answer makes of the plugin here: state, reason and message.
void apply_probe(PluginInfo& info, gpuplug_status_t st, const gpuplug_probe_result_t& result) {
  const std::string message = support::fixed_string(result.message, sizeof result.message);
  const auto set = [&](PluginState state, PluginReason reason, std::string text) {
    info.state = state;
    info.reason = reason;
    info.message = std::move(text);
  };
  const auto unavailable = [&](PluginReason reason, std::string_view fallback) {
    set(PluginState::unavailable, reason, message.empty() ? std::string(fallback) : message);
  };
  if (st != GPUPLUG_STATUS_SUCCESS) {
    return set(PluginState::unavailable, PluginReason::probe_failed,
               "probe failed (" + to_string(static_cast<Status>(st)) + ")" +
                   (message.empty() ? "" : ": " + message));
  }
  switch (result.reason) {
    case GPUPLUG_PROBE_AVAILABLE:
      if (result.device_count == 0) return unavailable(PluginReason::no_device, "no device");
      if (result.device_count > kMaxDevicesPerPlugin) {
        return set(PluginState::unavailable, PluginReason::probe_failed,
                   "probe reported " + std::to_string(result.device_count) +
                       " devices (more than the " + std::to_string(kMaxDevicesPerPlugin) +
                       " gpuplug accepts from one plugin)");
      }
      return set(PluginState::available, PluginReason::none, message);
    case GPUPLUG_PROBE_DRIVER_MISSING:
      return unavailable(PluginReason::driver_missing, "driver missing");
    case GPUPLUG_PROBE_DRIVER_TOO_OLD:
      return unavailable(PluginReason::driver_too_old, "driver too old");
    case GPUPLUG_PROBE_NO_DEVICE:
      return unavailable(PluginReason::no_device, "no device");
    default:
      return unavailable(PluginReason::probe_failed, "probe failed");
  }
}

/// Device `ordinal` as describe_device reports it; a failure becomes the device's name.
DeviceInfo describe(const gpuplug_plugin_v1& t, std::uint32_t ordinal) {
  gpuplug_device_info_t raw{};
  raw.struct_size = sizeof raw;
  raw.ordinal = ordinal;
  DeviceInfo info;
  if (const gpuplug_status_t st = t.describe_device(ordinal, &raw); st == GPUPLUG_STATUS_SUCCESS) {
    info = to_device_info(raw);
  } else {
    // The SDK writes the plugin's message into `name` on failure; it is kept, not dropped.
    const std::string why = support::fixed_string(raw.name, sizeof raw.name);
    info.name = "(describe_device failed: " + to_string(static_cast<Status>(st)) +
                (why.empty() ? "" : ": " + why) + ")";
  }
  info.ordinal = ordinal;
  return info;
}

/// Asks the plugin whether it can run here and, when it can, describes each device.
void probe(PluginInfo& info, const gpuplug_plugin_v1& table, StageHook hook) {
  gpuplug_probe_result_t result{};
  result.struct_size = sizeof result;
  if (hook != nullptr) hook(LoadStage::probe);
  const gpuplug_status_t st = table.probe(&result);
  apply_probe(info, st, result);
  if (info.state != PluginState::available) return;
  if (hook != nullptr) hook(LoadStage::describe);
  for (std::uint32_t i = 0; i < result.device_count; ++i) {
    info.devices.push_back(describe(table, i));
  }
}

/// Loads `file` into this process and checks its table: what load_plugin and acquire_library
/// share. On success `library` and `table` are set and `info` carries the table's identity.
std::optional<Refusal> load_and_check(const fs::path& file, PluginInfo& info,
                                      std::shared_ptr<const Library>& library,
                                      gpuplug_plugin_v1& table, StageHook hook) {
  // Named before anything of it runs: a crash in its static constructors has a culprit.
  log(LogLevel::debug, channel, "loading '" + file.string() + "'");
  if (hook != nullptr) hook(LoadStage::open);
  auto lib = std::make_shared<Library>();
  if (auto why = open_library(file, *lib)) return why;
  if (hook != nullptr) hook(LoadStage::entry);
  const gpuplug_plugin_v1* published = nullptr;
  if (auto why = call_entry(*lib, file, published)) return why;
  // Only the header (struct_size, abi_version) is read before the major version is known.
  info.abi_version = published->abi_version;
  if (auto why = check_header(*published)) return why;
  if (auto why = check_answer(*published, GPUPLUG_ABI_VERSION)) return why;
  table = copy_table(*published);
  if (auto why = check_name(table)) return why;
  info.name = table.name;
  info.vendor = table.vendor != nullptr ? table.vendor : "";
  info.version = table.version != nullptr ? table.version : "";
  if (auto why = check_required_slots(table)) return why;
  library = std::move(lib);
  return std::nullopt;
}

/// "unavailable, no_device: no device": what became of a plugin, for messages about another.
std::string outcome_text(const PluginInfo& info) {
  return std::string(to_string(info.state)) +
         (info.reason == PluginReason::none ? "" : ", " + std::string(to_string(info.reason))) +
         (info.message.empty() ? "" : ": " + info.message);
}

}  // namespace

std::vector<fs::path> plugin_candidates(const fs::path& where, bool from_environment) {
  std::error_code ec;
  const auto st = fs::status(where, ec);
  const LogLevel level = from_environment ? LogLevel::warning : LogLevel::debug;
  if (ec || !fs::exists(st)) {
    const bool missing =
        !ec || ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory;
    log(level, channel,
        "plugin search path entry '" + where.string() + "' " +
            (missing ? std::string("does not exist") : "cannot be reached: " + ec.message()));
    return {};
  }
  if (!fs::is_directory(st)) return {where};  // a file named directly is taken whatever its name
  std::vector<fs::path> files;
  // Every entry with a plugin's name is a candidate, whatever its type: a directory or FIFO so
  // named is listed as failed (not a regular file) rather than skipped without a word.
  for (fs::directory_iterator it(where, ec), end; !ec && it != end; it.increment(ec)) {
    if (is_plugin_file_name(it->path())) files.push_back(it->path());
  }
  if (ec) log(level, channel, "cannot list '" + where.string() + "': " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

std::string_view describe_stage(LoadStage s) noexcept {
  switch (s) {
    case LoadStage::open:
      return "while loading the library (static constructors)";
    case LoadStage::entry:
      return "in " GPUPLUG_PLUGIN_ENTRY_SYMBOL;
    case LoadStage::probe:
      return "in probe";
    case LoadStage::describe:
      return "in describe_device";
    case LoadStage::done:
      return "after its record";
  }
  return "in an unknown step";
}

std::string name_from_file(const fs::path& file) {
  const std::string base = file.filename().string();
  const std::string_view name = support::plugin_name_of_file(base);
  return name.empty() ? file.stem().string() : std::string(name);
}

std::optional<Refusal> preflight(const fs::path& file) {
  // Not a regular file first: it is refused by its type, without being opened.
  std::string why;
  if (!support::RegularFile::open(file, why)) return Refusal{PluginReason::not_a_regular_file, why};
  if (auto refusal = check_path_trust(file)) return refusal;
  return check_elf(file);
}

std::shared_ptr<Library> load_checked_library(const std::filesystem::path& file,
                                              const std::string& operation) {
  const std::string who = file.string();
  if (auto why = preflight(file)) throw Error(Status::unavailable, who, operation, why->message);
  auto library = std::make_shared<Library>();
  boost::dll::fs::error_code ec;
  library->load(boost::dll::fs::path(who),
                boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, ec);
  if (ec || !library->is_loaded())
    throw Error(Status::unavailable, who, operation, "cannot load the library: " + ec.message());
  return library;
}

PluginEntry load_plugin(const fs::path& file, const fs::path& canonical, StageHook hook) {
  PluginEntry e;
  e.info.path = file;
  e.info.name = name_from_file(file);
  e.canonical = canonical;
  e.loaded = std::make_shared<LoadedPlugin>();
  try {
    std::shared_ptr<const Library> library;
    gpuplug_plugin_v1 table{};
    if (auto why = load_and_check(file, e.info, library, table, hook)) {
      return refused(std::move(e), std::move(*why));
    }
    e.loaded->library = std::move(library);
    e.loaded->table = table;
    probe(e.info, table, hook);
  } catch (const std::exception& ex) {
    return refused(std::move(e),
                   {PluginReason::load_failed, std::string("could not be loaded: ") + ex.what()});
  }
  if (hook != nullptr) hook(LoadStage::done);
  return e;
}

std::pair<std::shared_ptr<const Library>, gpuplug_plugin_v1> acquire_library(const PluginEntry& e) {
  if (!e.loaded) {
    throw Error(Status::unavailable, e.info.name, "'" + e.info.path.string() + "' is not usable");
  }
  LoadedPlugin& slot = *e.loaded;
  std::lock_guard lock(slot.mutex);
  if (slot.library) return {slot.library, slot.table};
  // Probed in a child process: load it here now, and check that it is still the plugin that was
  // probed (the file may have changed since).
  const auto fail = [&e](const std::string& why) -> Error {
    return Error(Status::unavailable, e.info.name,
                 "loading '" + e.info.path.string() + "' into the process: " + why);
  };
  if (auto why = preflight(e.info.path)) throw fail(why->message);
  PluginInfo now;
  now.path = e.info.path;
  std::shared_ptr<const Library> library;
  gpuplug_plugin_v1 table{};
  std::optional<Refusal> refusal;
  try {
    refusal = load_and_check(e.info.path, now, library, table, nullptr);
  } catch (const std::exception& ex) {
    throw fail(std::string("could not be loaded: ") + ex.what());
  }
  if (refusal) throw fail(refusal->message);
  if (now.name != e.info.name) {
    throw fail("the file now names itself '" + now.name + "', not '" + e.info.name + "'");
  }
  // The probe is part of the ABI's contract (create follows a probe); its answer must agree.
  probe(now, table, nullptr);
  if (now.state != PluginState::available) {
    throw fail("its probe now says " + std::string(to_string(now.reason)) + ": " + now.message);
  }
  slot.library = std::move(library);
  slot.table = table;
  return {slot.library, slot.table};
}

void resolve_duplicates(std::span<PluginEntry> entries) {
  std::map<std::string, std::size_t> winner;  // name -> index of the entry that speaks for it
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const PluginEntry& e = entries[i];
    if (e.info.state == PluginState::failed) continue;
    auto [it, first] = winner.emplace(e.info.name, i);
    if (!first && entries[it->second].info.state != PluginState::available &&
        e.info.state == PluginState::available) {
      it->second = i;  // the first *usable* one wins
    }
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    PluginEntry& e = entries[i];
    if (e.info.state == PluginState::failed) continue;
    const std::size_t w = winner.at(e.info.name);
    if (w == i) continue;
    const std::string lost = outcome_text(e.info);
    e.info.state = PluginState::failed;
    e.info.reason = PluginReason::duplicate_name;
    e.info.message = "duplicate name: a plugin named '" + e.info.name + "' was chosen at '" +
                     entries[w].info.path.string() + "' (" +
                     std::string(to_string(entries[w].info.state)) + "); '" + e.info.path.string() +
                     "' is ignored (it was " + lost + ")";
    e.info.devices.clear();
    e.loaded.reset();
  }
}

}  // namespace gpuplug::detail
