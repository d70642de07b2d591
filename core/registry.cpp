// SPDX-License-Identifier: Apache-2.0
// PluginRegistry: finds, loads (Boost.DLL) and probes plugins, says why each is (un)usable.
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <boost/dll/shared_library.hpp>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <gpuplug/log.hpp>
#include <gpuplug/registry.hpp>
#include <set>
#include <utility>

#include "plugin_backend.hpp"

#ifndef GPUPLUG_BUILD_PLUGIN_DIR
#define GPUPLUG_BUILD_PLUGIN_DIR ""
#endif

namespace gpuplug {

namespace fs = std::filesystem;

constexpr std::uint32_t kMaxDevicesPerPlugin = 1024;

std::string_view to_string(PluginState s) noexcept {
  switch (s) {
    case PluginState::available:
      return "available";
    case PluginState::unavailable:
      return "unavailable";
    case PluginState::failed:
      return "failed";
  }
  return "unknown";
}

std::string_view to_string(PluginReason r) noexcept {
  switch (r) {
    case PluginReason::none:
      return "none";
    case PluginReason::not_a_shared_object:
      return "not_a_shared_object";
    case PluginReason::missing_dependency:
      return "missing_dependency";
    case PluginReason::missing_entry_symbol:
      return "missing_entry_symbol";
    case PluginReason::entry_returned_null:
      return "entry_returned_null";
    case PluginReason::abi_mismatch:
      return "abi_mismatch";
    case PluginReason::table_too_small:
      return "table_too_small";
    case PluginReason::duplicate_name:
      return "duplicate_name";
    case PluginReason::driver_missing:
      return "driver_missing";
    case PluginReason::driver_too_old:
      return "driver_too_old";
    case PluginReason::no_device:
      return "no_device";
    case PluginReason::probe_failed:
      return "probe_failed";
  }
  return "unknown";
}

std::string Selection::explain() const {
  std::string text = "chose " + chosen;
  if (!passed_over.empty()) {
    text += " (";
    for (std::size_t i = 0; i < passed_over.size(); ++i) {
      if (i != 0) text += "; ";
      text += passed_over[i];
    }
    text += ")";
  }
  return text;
}

namespace {

constexpr std::string_view channel = "registry";
constexpr std::string_view file_prefix = "libgpuplug-";
constexpr std::string_view file_suffix = ".so";

using Library = boost::dll::shared_library;

/// One candidate file. Invariant: `library` is set (and `table` valid) iff info.state != failed.
struct Entry {
  PluginInfo info;
  fs::path canonical;
  std::shared_ptr<const Library> library;
  gpuplug_plugin_v1 table{};
};

std::string version_text(std::uint32_t v) {
  return std::to_string(GPUPLUG_VERSION_MAJOR(v)) + "." + std::to_string(GPUPLUG_VERSION_MINOR(v));
}

std::string fixed_string(const char* text, std::size_t capacity) {
  return std::string(text, ::strnlen(text, capacity));
}

bool valid_plugin_name(std::string_view name) noexcept {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

/// "libgpuplug-cuda.so" -> "cuda"; other names -> their stem. Used until the table names the
/// plugin.
std::string name_from_file(const fs::path& file) {
  std::string name = file.filename().string();
  if (name.starts_with(file_prefix) && name.ends_with(file_suffix) &&
      name.size() > file_prefix.size() + file_suffix.size()) {
    return name.substr(file_prefix.size(), name.size() - file_prefix.size() - file_suffix.size());
  }
  return file.stem().string();
}

bool is_plugin_file_name(const fs::path& file) {
  const std::string name = file.filename().string();
  return name.size() > file_prefix.size() + file_suffix.size() && name.starts_with(file_prefix) &&
         name.ends_with(file_suffix);
}

/// The folder libgpuplug.so was loaded from: the same code finds `<libdir>/gpuplug/plugins`
/// in the build tree and in an install tree.
std::optional<fs::path> core_library_dir() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&name_from_file), &info) == 0 ||
      info.dli_fname == nullptr) {
    return std::nullopt;
  }
  std::error_code ec;
  fs::path lib = fs::weakly_canonical(fs::path(info.dli_fname), ec);
  if (ec) lib = fs::path(info.dli_fname);
  return lib.parent_path();
}

/// Why `file` cannot be an ELF shared object without asking the dynamic loader, or "" if it may be.
std::string elf_check(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return "cannot read '" + file.string() + "'";
  std::array<char, 4> magic{};
  in.read(magic.data(), magic.size());
  if (in.gcount() < 4) return "'" + file.string() + "' is too short to be an ELF file";
  if (magic != std::array<char, 4>{'\x7f', 'E', 'L', 'F'}) {
    return "'" + file.string() + "' does not start with the ELF magic";
  }
  return {};
}

void fail(Entry& e, PluginReason reason, std::string message) {
  e.info.state = PluginState::failed;
  e.info.reason = reason;
  e.info.message = std::move(message);
  e.library.reset();
}

/// The required slots of the v1 table; a null one makes the plugin unusable.
std::string first_missing_slot(const gpuplug_plugin_v1& t) {
  const std::array<std::pair<const char*, bool>, 24> slots{{
      {"probe", t.probe != nullptr},
      {"describe_device", t.describe_device != nullptr},
      {"create", t.create != nullptr},
      {"destroy", t.destroy != nullptr},
      {"last_error", t.last_error != nullptr},
      {"alloc", t.alloc != nullptr},
      {"free", t.free != nullptr},
      {"memory_info", t.memory_info != nullptr},
      {"device_info", t.device_info != nullptr},
      {"copy_h2d", t.copy_h2d != nullptr},
      {"copy_d2h", t.copy_d2h != nullptr},
      {"copy_d2d", t.copy_d2d != nullptr},
      {"memset_d8", t.memset_d8 != nullptr},
      {"stream_create", t.stream_create != nullptr},
      {"stream_destroy", t.stream_destroy != nullptr},
      {"stream_synchronize", t.stream_synchronize != nullptr},
      {"synchronize", t.synchronize != nullptr},
      {"load_module", t.load_module != nullptr},
      {"has_module", t.has_module != nullptr},
      {"get_function", t.get_function != nullptr},
      {"get_global", t.get_global != nullptr},
      {"launch", t.launch != nullptr},
      {"ledger_stats", t.ledger_stats != nullptr},
      {"sweep_unreleased", t.sweep_unreleased != nullptr},
  }};
  for (const auto& [name, present] : slots) {
    if (!present) return name;
  }
  return {};
}

void probe(Entry& e) {
  const gpuplug_plugin_v1& t = e.table;
  gpuplug_probe_result_t result{};
  result.struct_size = sizeof result;
  const gpuplug_status_t st = t.probe(&result);
  std::string message = fixed_string(result.message, sizeof result.message);
  if (st != GPUPLUG_STATUS_SUCCESS) {
    e.info.state = PluginState::unavailable;
    e.info.reason = PluginReason::probe_failed;
    e.info.message = "probe failed (" + to_string(static_cast<Status>(st)) + ")" +
                     (message.empty() ? "" : ": " + message);
    return;
  }
  auto unavailable = [&](PluginReason reason, std::string_view fallback) {
    e.info.state = PluginState::unavailable;
    e.info.reason = reason;
    e.info.message = message.empty() ? std::string(fallback) : message;
  };
  switch (result.reason) {
    case GPUPLUG_PROBE_AVAILABLE:
      if (result.device_count == 0) return unavailable(PluginReason::no_device, "no device");
      // A plausibility bound, so that a broken probe cannot make discovery describe billions
      // of devices; no machine has more than a few dozen GPUs.
      if (result.device_count > kMaxDevicesPerPlugin) {
        e.info.state = PluginState::unavailable;
        e.info.reason = PluginReason::probe_failed;
        e.info.message = "probe reported " + std::to_string(result.device_count) +
                         " devices (more than the " + std::to_string(kMaxDevicesPerPlugin) +
                         " gpuplug accepts from one plugin)";
        return;
      }
      e.info.state = PluginState::available;
      e.info.reason = PluginReason::none;
      e.info.message = message;
      break;
    case GPUPLUG_PROBE_DRIVER_MISSING:
      return unavailable(PluginReason::driver_missing, "driver missing");
    case GPUPLUG_PROBE_DRIVER_TOO_OLD:
      return unavailable(PluginReason::driver_too_old, "driver too old");
    case GPUPLUG_PROBE_NO_DEVICE:
      return unavailable(PluginReason::no_device, "no device");
    default:
      return unavailable(PluginReason::probe_failed, "probe failed");
  }
  for (std::uint32_t i = 0; i < result.device_count; ++i) {
    gpuplug_device_info_t raw{};
    raw.struct_size = sizeof raw;
    raw.ordinal = i;
    const gpuplug_status_t ds = t.describe_device(i, &raw);
    if (ds == GPUPLUG_STATUS_SUCCESS) {
      DeviceInfo info = detail::to_device_info(raw);
      info.ordinal = i;
      e.info.devices.push_back(std::move(info));
    } else {
      DeviceInfo info;
      info.ordinal = i;
      info.name = "(describe_device failed: " + to_string(static_cast<Status>(ds)) + ")";
      e.info.devices.push_back(std::move(info));
    }
  }
}

/// Loads, checks and probes one file. Never throws for a broken plugin: the entry says why.
/// `earlier` are the entries found before this one (for duplicate names).
Entry load_candidate(const fs::path& file, const fs::path& canonical,
                     const std::vector<Entry>& earlier) {
  Entry e;
  e.info.path = file;
  e.info.name = name_from_file(file);
  e.canonical = canonical;
  try {
    if (std::string why = elf_check(file); !why.empty()) {
      fail(e, PluginReason::not_a_shared_object, "not a shared object: " + why);
      return e;
    }
    auto library = std::make_shared<Library>();
    boost::dll::fs::error_code ec;
    ::dlerror();  // clear a stale message: dlerror is per thread and read right after the load
    library->load(boost::dll::fs::path(file.string()),
                  boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, ec);
    if (ec || !library->is_loaded()) {
      const char* dl = ::dlerror();
      const std::string why = dl != nullptr ? dl : ec.message();
      if (why.find("cannot open shared object file") != std::string::npos) {
        fail(e, PluginReason::missing_dependency, "missing dependency: " + why);
      } else if (why.find("undefined symbol") != std::string::npos) {
        fail(e, PluginReason::missing_dependency, "missing dependency (unresolved symbol): " + why);
      } else {
        fail(e, PluginReason::not_a_shared_object, "not a loadable shared object: " + why);
      }
      return e;
    }
    if (!library->has(GPUPLUG_PLUGIN_ENTRY_SYMBOL)) {
      fail(e, PluginReason::missing_entry_symbol,
           "missing entry symbol: '" + file.string() +
               "' exports no " GPUPLUG_PLUGIN_ENTRY_SYMBOL " (not a gpuplug plugin?)");
      return e;
    }
    auto& entry =
        library->get<const gpuplug_plugin_v1*(std::uint32_t)>(GPUPLUG_PLUGIN_ENTRY_SYMBOL);
    const gpuplug_plugin_v1* published = entry(GPUPLUG_ABI_VERSION);
    if (published == nullptr) {
      fail(e, PluginReason::entry_returned_null,
           GPUPLUG_PLUGIN_ENTRY_SYMBOL "(" + version_text(GPUPLUG_ABI_VERSION) +
               ") returned null: the plugin shares no ABI version with this host");
      return e;
    }
    // Only the header (struct_size, abi_version) is read before the major version is known.
    e.info.abi_version = published->abi_version;
    if (GPUPLUG_VERSION_MAJOR(published->abi_version) != GPUPLUG_ABI_VERSION_MAJOR) {
      fail(e, PluginReason::abi_mismatch,
           "ABI mismatch: plugin speaks ABI " + version_text(published->abi_version) +
               ", host speaks " + version_text(GPUPLUG_ABI_VERSION));
      return e;
    }
    if (published->struct_size < GPUPLUG_PLUGIN_V1_MIN_SIZE) {
      fail(e, PluginReason::table_too_small,
           "plugin table too small: " + std::to_string(published->struct_size) + " bytes, ABI " +
               version_text(GPUPLUG_ABI_VERSION) + " needs at least " +
               std::to_string(GPUPLUG_PLUGIN_V1_MIN_SIZE));
      return e;
    }
    e.table = detail::copy_table(*published);
    // A table that breaks the v1 contract is an ABI violation, whatever its version says.
    if (e.table.name == nullptr || !valid_plugin_name(e.table.name)) {
      fail(e, PluginReason::abi_mismatch,
           std::string("plugin table breaks ABI ") + version_text(GPUPLUG_ABI_VERSION) +
               ": name is " +
               (e.table.name == nullptr ? "null" : "'" + std::string(e.table.name) + "'") +
               " (expected [a-z0-9_]+)");
      return e;
    }
    e.info.name = e.table.name;
    e.info.vendor = e.table.vendor != nullptr ? e.table.vendor : "";
    e.info.version = e.table.version != nullptr ? e.table.version : "";
    if (std::string slot = first_missing_slot(e.table); !slot.empty()) {
      fail(e, PluginReason::abi_mismatch,
           "plugin table breaks ABI " + version_text(GPUPLUG_ABI_VERSION) + ": required slot '" +
               slot + "' is null");
      return e;
    }
    for (const Entry& other : earlier) {
      if (other.info.state != PluginState::failed && other.info.name == e.info.name) {
        fail(e, PluginReason::duplicate_name,
             "duplicate name: a plugin named '" + e.info.name + "' was already found at '" +
                 other.info.path.string() + "'; '" + file.string() + "' is ignored");
        return e;
      }
    }
    e.library = std::move(library);
    probe(e);
  } catch (const std::exception& ex) {
    fail(e, PluginReason::not_a_shared_object, std::string("could not be loaded: ") + ex.what());
  }
  return e;
}

/// Files to consider under one search-path element, in a stable order.
std::vector<fs::path> candidates_in(const fs::path& where, bool from_environment) {
  std::error_code ec;
  const auto st = fs::status(where, ec);
  if (ec || !fs::exists(st)) {
    log(from_environment ? LogLevel::warning : LogLevel::debug, channel,
        "plugin search path entry '" + where.string() + "' does not exist");
    return {};
  }
  if (!fs::is_directory(st)) return {where};  // a file named directly is taken whatever its name
  std::vector<fs::path> files;
  for (fs::directory_iterator it(where, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (is_plugin_file_name(it->path()) && !it->is_directory(type_ec)) files.push_back(it->path());
  }
  if (ec) log(LogLevel::warning, channel, "cannot list '" + where.string() + "': " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

fs::path canonical_or_self(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p : c;
}

/// GPUPLUG_PLUGIN_PATH split at ':' (empty elements skipped).
std::vector<fs::path> env_plugin_path() {
  std::vector<fs::path> path;
  const char* env = std::getenv("GPUPLUG_PLUGIN_PATH");
  if (env == nullptr) return path;
  std::string_view rest(env);
  while (!rest.empty()) {
    const auto colon = rest.find(':');
    const std::string_view part = rest.substr(0, colon);
    if (!part.empty()) path.emplace_back(std::string(part));
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return path;
}

bool is_host(std::string_view name) { return name == "host"; }

/// Outcome of trying one selector element.
struct Attempt {
  std::shared_ptr<GpuBackend> backend;
  std::vector<std::string> refused;  // "cuda: driver missing: ..."
  Status status = Status::unavailable;
  bool gpu_refused = false;  // a non-host plugin that loaded fine was passed over
};

/// The selection algorithm over a snapshot of the entries (run without the registry's lock).
class Selector {
 public:
  Selector(std::string_view selector, const std::vector<Entry>& entries, const Options& options)
      : selector_(selector), entries_(entries), options_(options) {}

  Selection run() {
    const std::vector<SelectorItem> items = parse_selector(selector_);
    Selection out;
    for (const SelectorItem& item : items) {
      Attempt a = item.name == "auto" ? try_auto(/*allow_env=*/true) : try_named(item);
      if (a.backend) {
        // An expansion ("auto", GPUPLUG_BACKEND) that succeeded still passed over candidates.
        for (auto& r : a.refused) passed_over_.push_back(std::move(r));
        gpu_refused_ = gpu_refused_ || a.gpu_refused;
        out.backend = std::move(a.backend);
        out.chosen = std::string(out.backend->name());
        out.passed_over = std::move(passed_over_);
        report(out);
        return out;
      }
      absorb(std::move(a));
      if (item.required) throw_required(item);
    }
    throw_nothing();
  }

 private:
  void absorb(Attempt&& a) {
    for (auto& r : a.refused) passed_over_.push_back(std::move(r));
    if (!a.refused.empty()) statuses_.push_back(a.status);
    gpu_refused_ = gpu_refused_ || a.gpu_refused;
  }

  std::string item_text(const SelectorItem& item) const {
    std::string s = item.name;
    if (item.ordinal) s += ":" + std::to_string(*item.ordinal);
    return s;
  }

  std::string known_names() const {
    std::string names;
    for (const Entry& e : entries_) {
      if (e.info.state == PluginState::failed) continue;
      if (!names.empty()) names += ", ";
      names += e.info.name;
    }
    return names.empty() ? "none" : names;
  }

  /// The usable entry named `name`, else the first failed one so named, else null.
  const Entry* find(std::string_view name) const {
    const Entry* failed = nullptr;
    for (const Entry& e : entries_) {
      if (e.info.name != name) continue;
      if (e.info.state != PluginState::failed) return &e;
      if (failed == nullptr) failed = &e;
    }
    return failed;
  }

  Attempt try_named(const SelectorItem& item) {
    Attempt a;
    const Entry* e = find(item.name);
    if (e == nullptr) {
      a.status = Status::not_found;
      a.refused.push_back(item.name + ": unknown backend (known: " + known_names() + ")");
      return a;
    }
    return try_entry(*e, item.ordinal);
  }

  Attempt try_entry(const Entry& e, std::optional<std::uint32_t> ordinal) {
    Attempt a;
    const std::string& name = e.info.name;
    if (e.info.state != PluginState::available) {
      a.status = Status::unavailable;
      a.gpu_refused = e.info.state == PluginState::unavailable && !is_host(name);
      a.refused.push_back(name + ": " + e.info.message);
      return a;
    }
    const auto count = static_cast<std::uint32_t>(e.info.devices.size());
    if (ordinal && *ordinal >= count) {
      a.status = Status::invalid_argument;
      a.refused.push_back(name + ":" + std::to_string(*ordinal) + ": no such device (" + name +
                          " has " + std::to_string(count) + (count == 1 ? " device" : " devices") +
                          ", ordinals 0.." + std::to_string(count - 1) + ")");
      return a;
    }
    const std::uint32_t first = ordinal.value_or(0);
    const std::uint32_t last = ordinal ? *ordinal + 1 : count;
    for (std::uint32_t i = first; i < last; ++i) {
      try {
        a.backend = std::make_shared<detail::PluginBackend>(e.library, e.table, i, options_);
        return a;
      } catch (const Error& err) {
        a.status = err.status();
        a.refused.push_back(err.what());
      }
    }
    a.gpu_refused = !is_host(name);
    return a;
  }

  Attempt try_auto(bool allow_env) {
    if (allow_env) {
      const char* env = std::getenv("GPUPLUG_BACKEND");
      if (env != nullptr &&
          std::string_view(env).find_first_not_of(" \t") != std::string_view::npos &&
          std::string_view(env) != "auto") {
        return try_env(env);
      }
    }
    // Every plugin but host in discovery order (GPUs first), then host.
    Attempt all;
    all.status = Status::unavailable;
    for (int pass = 0; pass < 2; ++pass) {
      for (const Entry& e : entries_) {
        if (is_host(e.info.name) != (pass == 1)) continue;
        if (e.info.reason == PluginReason::duplicate_name) continue;  // its namesake speaks for it
        Attempt a = try_entry(e, std::nullopt);
        if (a.backend) {
          a.refused.insert(a.refused.begin(), all.refused.begin(), all.refused.end());
          a.gpu_refused = a.gpu_refused || all.gpu_refused;
          return a;
        }
        for (auto& r : a.refused) all.refused.push_back(std::move(r));
        all.gpu_refused = all.gpu_refused || a.gpu_refused;
      }
    }
    if (entries_.empty()) {
      std::string searched;
      for (const fs::path& p : PluginRegistry::search_path()) {
        searched += (searched.empty() ? "" : ", ") + p.string();
      }
      all.refused.push_back("auto: no plugins found (searched: " + searched + ")");
    }
    return all;
  }

  Attempt try_env(const char* env) {
    std::vector<SelectorItem> items;
    try {
      items = parse_selector(env);
    } catch (const Error& err) {
      throw Error(Status::invalid_argument, "", "GPUPLUG_BACKEND: " + err.message());
    }
    log(LogLevel::debug, channel, std::string("GPUPLUG_BACKEND='") + env + "' replaces 'auto'");
    Attempt all;
    for (const SelectorItem& item : items) {
      Attempt a = item.name == "auto" ? try_auto(/*allow_env=*/false) : try_named(item);
      if (a.backend) {
        a.refused.insert(a.refused.begin(), all.refused.begin(), all.refused.end());
        a.gpu_refused = a.gpu_refused || all.gpu_refused;
        return a;
      }
      if (item.required) {
        absorb(std::move(a));
        throw_required(item, std::string(" (from GPUPLUG_BACKEND='") + env + "')");
      }
      for (auto& r : a.refused) all.refused.push_back(std::move(r));
      all.status = a.status;
      all.gpu_refused = all.gpu_refused || a.gpu_refused;
    }
    return all;
  }

  [[noreturn]] void throw_required(const SelectorItem& item, const std::string& origin = {}) {
    std::string message = "backend selector '" + selector_ + "'" + origin + ": required backend '" +
                          item_text(item) + "' is not usable: ";
    message += passed_over_.empty() ? "no candidate" : passed_over_.back();
    throw Error(statuses_.empty() ? Status::unavailable : statuses_.back(), "", std::move(message));
  }

  [[noreturn]] void throw_nothing() {
    std::string message = "no backend for selector '" + selector_ + "': ";
    for (std::size_t i = 0; i < passed_over_.size(); ++i) {
      if (i != 0) message += "; ";
      message += passed_over_[i];
    }
    if (passed_over_.empty()) message += "nothing to try";
    const Status status = statuses_.size() == 1 ? statuses_.front() : Status::unavailable;
    throw Error(status, "", std::move(message));
  }

  void report(const Selection& s) {
    if (s.passed_over.empty()) {
      log(LogLevel::debug, channel, "selector '" + selector_ + "': " + s.explain());
      return;
    }
    // Falling back from a GPU to the CPU changes performance by orders of magnitude: warn.
    const bool to_host = is_host(s.backend->plugin_name());
    fallback_level_ = gpu_refused_ && to_host ? LogLevel::warning : LogLevel::info;
    fallback_text_ = "selector '" + selector_ + "': " + s.explain();
  }

 public:
  std::optional<std::pair<LogLevel, std::string>> fallback() const {
    if (fallback_text_.empty()) return std::nullopt;
    return std::make_pair(fallback_level_, fallback_text_);
  }

 private:
  std::string selector_;
  const std::vector<Entry>& entries_;
  const Options& options_;
  std::vector<std::string> passed_over_;
  std::vector<Status> statuses_;
  bool gpu_refused_ = false;
  LogLevel fallback_level_ = LogLevel::info;
  std::string fallback_text_;
};

}  // namespace

struct PluginRegistry::Impl {
  mutable std::mutex mutex;
  std::vector<Entry> entries;    // discovery order; guarded by mutex
  std::set<std::string> logged;  // fallbacks already logged (each is logged once)
};

PluginRegistry::PluginRegistry() : impl_(std::make_unique<Impl>()) {}
PluginRegistry::~PluginRegistry() = default;

std::vector<fs::path> PluginRegistry::search_path() {
  std::vector<fs::path> path = env_plugin_path();
  // The installed folder is found next to libgpuplug.so, which in the build tree *is* the build
  // tree's plugin folder. The compiled-in build folder is therefore only a fallback for when the
  // core cannot locate itself: searching it from an install would list a second "host" whenever
  // the build tree still exists.
  auto add_default = [&path](const fs::path& dir) {
    const fs::path canonical = canonical_or_self(dir);
    for (const fs::path& p : path) {
      if (canonical_or_self(p) == canonical) return;
    }
    path.push_back(dir);
  };
  if (auto dir = core_library_dir()) {
    add_default(*dir / "gpuplug" / "plugins");
  } else if (std::string_view(GPUPLUG_BUILD_PLUGIN_DIR).size() != 0) {
    add_default(GPUPLUG_BUILD_PLUGIN_DIR);
  }
  return path;
}

void PluginRegistry::discover() {
  const std::size_t from_env = env_plugin_path().size();
  const std::vector<fs::path> path = search_path();
  std::lock_guard lock(impl_->mutex);
  std::vector<Entry> found;
  std::set<fs::path> seen;
  for (std::size_t i = 0; i < path.size(); ++i) {
    for (const fs::path& file : candidates_in(path[i], i < from_env)) {
      fs::path canonical = canonical_or_self(file);
      if (!seen.insert(canonical).second) continue;  // the same file reached twice
      Entry e = load_candidate(file, canonical, found);
      log(LogLevel::debug, channel,
          "'" + file.string() + "': " + std::string(to_string(e.info.state)) +
              (e.info.message.empty() ? "" : " (" + e.info.message + ")"));
      found.push_back(std::move(e));
    }
  }
  impl_->entries = std::move(found);
}

PluginInfo PluginRegistry::add_plugin_file(const fs::path& file) {
  std::lock_guard lock(impl_->mutex);
  const fs::path canonical = canonical_or_self(file);
  for (const Entry& e : impl_->entries) {
    if (e.canonical == canonical) return e.info;
  }
  impl_->entries.push_back(load_candidate(file, canonical, impl_->entries));
  return impl_->entries.back().info;
}

std::vector<PluginInfo> PluginRegistry::plugins() const {
  std::lock_guard lock(impl_->mutex);
  std::vector<PluginInfo> out;
  out.reserve(impl_->entries.size());
  for (const Entry& e : impl_->entries) out.push_back(e.info);
  return out;
}

std::shared_ptr<GpuBackend> PluginRegistry::create(std::string_view selector,
                                                   const Options& options) {
  return select(selector, options).backend;
}

Selection PluginRegistry::select(std::string_view selector, const Options& options) {
  // Select on a snapshot: creating a device can take long (driver init) and must not hold the
  // lock; the snapshot's library handles keep every candidate loaded meanwhile.
  std::vector<Entry> snapshot;
  {
    std::lock_guard lock(impl_->mutex);
    snapshot = impl_->entries;
  }
  Selector run(selector, snapshot, options);
  Selection selection = run.run();
  if (auto fallback = run.fallback()) {
    bool first;
    {
      std::lock_guard lock(impl_->mutex);
      first = impl_->logged.insert(fallback->second).second;
    }
    if (first) log(fallback->first, channel, fallback->second);
  }
  return selection;
}

}  // namespace gpuplug
