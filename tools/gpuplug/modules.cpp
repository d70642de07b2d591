// SPDX-License-Identifier: Apache-2.0
// `gpuplug modules [--backend SEL] [--modules DIR]... [--json]`: for each kernel module file in a
// plugin's modules folders and each of its devices, which target loads (or why none does) and
// the kernels with their published n_tile / a_e4m3. The check a host application runs before
// shipping a kernel to a machine it has not seen.
#include "modules.hpp"

#include <algorithm>
#include <filesystem>
#include <gpuplug/gpuplug.hpp>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gpuplug/support/escape.hpp>
#include <gpuplug/support/json.hpp>
#include <gpuplug/support/regular_file.hpp>

#include "cli.hpp"

namespace {

namespace fs = std::filesystem;
using gpuplug::support::escape_text;
namespace json = gpuplug::support::json;

// A module larger than this is not read (the limit load_module_file applies to files too).
constexpr std::uint64_t max_module_bytes = std::uint64_t{1} << 30;


json::value optional_number(std::optional<std::uint32_t> v) {
  return v ? json::value(*v) : json::value();
}

/// One module file for one device: the inspection, or the error that stopped it.
struct DeviceResult {
  std::uint32_t ordinal = 0;
  std::optional<gpuplug::ModuleInspection> inspection;
  std::string error_status;  // "invalid_image"; "" when inspected
  std::string error;
};

struct ModuleFile {
  fs::path path;
  std::string read_error;  // "" when read
  std::vector<DeviceResult> devices;
};

struct PluginModules {
  const gpuplug::PluginInfo* plugin = nullptr;
  std::vector<std::uint32_t> ordinals;  // the devices asked for
  std::vector<fs::path> folders;
  std::vector<std::string> folder_notes;  // "no such folder" for the plugin's default folder
  std::vector<ModuleFile> files;
};

/// Whether `dir` is a folder holding at least one regular file.
bool holds_files(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_regular_file(ec)) return true;
  return false;
}

/// The regular files of `dir`, sorted by name; nullopt with `why` when it cannot be listed.
std::optional<std::vector<fs::path>> module_files(const fs::path& dir, std::string& why) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    why = ec.message();
    return std::nullopt;
  }
  std::vector<fs::path> out;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    std::error_code type_ec;
    if (it->is_regular_file(type_ec)) out.push_back(it->path());
  }
  if (ec) {
    why = ec.message();
    return std::nullopt;
  }
  std::sort(out.begin(), out.end());
  return out;
}

void inspect_file(const gpuplug::PluginRegistry& registry, PluginModules& pm, ModuleFile& mf) {
  std::string why;
  auto file = gpuplug::support::RegularFile::open(mf.path, why);
  std::optional<std::vector<std::byte>> bytes;
  if (file) bytes = file->read_all(max_module_bytes, why);
  if (!bytes) {
    mf.read_error = why;
    return;
  }
  for (const std::uint32_t ordinal : pm.ordinals) {
    DeviceResult r;
    r.ordinal = ordinal;
    try {
      r.inspection = registry.inspect_module(pm.plugin->name, ordinal, *bytes);
    } catch (const gpuplug::Error& e) {
      r.error_status = gpuplug::to_string(e.status());
      r.error = e.message();
    }
    mf.devices.push_back(std::move(r));
  }
}

/// "n_tile=64 a_e4m3=1": what `function` publishes through `<function>_n_tile` / `_a_e4m3`.
std::string published_text(const gpuplug::ModuleInspection& m, const std::string& function) {
  std::string out;
  if (auto v = m.value_of(function + "_n_tile")) out += " n_tile=" + std::to_string(*v);
  if (auto v = m.value_of(function + "_a_e4m3")) out += " a_e4m3=" + std::to_string(*v);
  return out;
}

void print_text(const std::vector<PluginModules>& all) {
  for (const PluginModules& pm : all) {
    const gpuplug::PluginInfo& p = *pm.plugin;
    std::cout << "[" << escape_text(p.name) << "] " << gpuplug::to_string(p.state);
    if (p.reason != gpuplug::PluginReason::none) std::cout << " (" << gpuplug::to_string(p.reason) << ")";
    std::cout << "\n";
    if (p.state != gpuplug::PluginState::available && !p.message.empty())
      std::cout << "  reason:  " << escape_text(p.message) << "\n";
    for (const fs::path& f : pm.folders) std::cout << "  modules: " << escape_text(f.string()) << "\n";
    for (const std::string& note : pm.folder_notes) std::cout << "  note:    " << escape_text(note) << "\n";
    if (pm.files.empty()) std::cout << "  no module files\n";
    if (pm.ordinals.empty() && !pm.files.empty())
      std::cout << "  not inspected: the " << escape_text(p.name)
                << " plugin has no usable device here (see its reason)\n";
    for (const ModuleFile& mf : pm.files) {
      std::cout << "  " << escape_text(mf.path.filename().string()) << "\n";
      if (!mf.read_error.empty()) {
        std::cout << "    cannot read: " << escape_text(mf.read_error) << "\n";
        continue;
      }
      for (const DeviceResult& r : mf.devices) {
        std::cout << "    device " << r.ordinal << ": ";
        if (!r.inspection) {
          std::cout << "error (" << r.error_status << "): " << escape_text(r.error) << "\n";
          continue;
        }
        const gpuplug::ModuleInspection& m = *r.inspection;
        std::vector<std::string> targets;
        for (const auto& t : m.targets) targets.push_back(escape_text(t));
        std::string all_targets;
        for (const auto& t : targets) all_targets += (all_targets.empty() ? "" : " ") + t;
        if (m.loadable)
          std::cout << "loads " << escape_text(m.target);
        else
          std::cout << "does not load: " << escape_text(m.reason);
        std::cout << " [" << escape_text(m.format) << "; targets: "
                  << (all_targets.empty() ? "-" : all_targets) << "]\n";
        for (const std::string& f : m.functions)
          std::cout << "      " << escape_text(f) << published_text(m, f) << "\n";
        if (m.truncated) std::cout << "      ... (the plugin cut the list short)\n";
      }
    }
    std::cout << "\n";
  }
}

/// "schema" of `gpuplug modules --json`: the version of its layout, bumped when a field changes
/// meaning or goes away (fields may be added within a version), as for `gpuplug list --json`.
constexpr int modules_schema_version = 1;

json::value module_json(const gpuplug::ModuleInspection& m) {
  json::value out = {{"loadable", m.loadable}};
  json::set_text(out, "format", m.format);
  json::set_text(out, "target", m.target);
  json::set_text(out, "reason", m.reason);
  out["targets"] = m.targets;
  out["truncated"] = m.truncated;
  json::value& functions = out["functions"] = json::value::array();
  for (const std::string& f : m.functions) {
    json::value function = json::value::object();
    json::set_text(function, "name", f);
    function["n_tile"] = optional_number(m.value_of(f + "_n_tile"));
    function["a_e4m3"] = optional_number(m.value_of(f + "_a_e4m3"));
    functions.push_back(std::move(function));
  }
  json::value& symbols = out["symbols"] = json::value::array();
  for (const auto& symbol : m.symbols) {
    json::value entry = json::value::object();
    json::set_text(entry, "name", symbol.name);
    entry["value"] = optional_number(symbol.value);
    symbols.push_back(std::move(entry));
  }
  return out;
}

void print_json(const std::vector<PluginModules>& all) {
  json::value doc = {{"schema", modules_schema_version}};
  json::value& plugins = doc["plugins"] = json::value::array();
  for (const PluginModules& pm : all) {
    const gpuplug::PluginInfo& p = *pm.plugin;
    json::value plugin = json::value::object();
    json::set_text(plugin, "name", p.name);
    plugin["state"] = gpuplug::to_string(p.state);
    plugin["reason"] = gpuplug::to_string(p.reason);
    json::set_text(plugin, "message", p.message);
    json::value& folders = plugin["folders"] = json::value::array();
    for (const fs::path& folder : pm.folders) folders.push_back(folder.string());
    plugin["notes"] = pm.folder_notes;
    json::value& modules = plugin["modules"] = json::value::array();
    for (const ModuleFile& mf : pm.files) {
      json::value file = json::value::object();
      json::set_text(file, "file", mf.path.filename().string());
      json::set_text(file, "path", mf.path.string());
      if (!mf.read_error.empty()) json::set_text(file, "read_error", mf.read_error);
      json::value& devices = file["devices"] = json::value::array();
      for (const DeviceResult& r : mf.devices) {
        json::value device = {{"ordinal", r.ordinal}};
        if (r.inspection) {
          device.update(module_json(*r.inspection));
        } else {
          json::value error = {{"status", r.error_status}};
          json::set_text(error, "message", r.error);
          device["error"] = std::move(error);
        }
        devices.push_back(std::move(device));
      }
      modules.push_back(std::move(file));
    }
    plugins.push_back(std::move(plugin));
  }
  std::cout << json::dump(doc, json::layout::document) << "\n";
}

void print_help(std::ostream& os) {
  os << "usage: gpuplug modules [--backend SEL] [--modules DIR]... [--json]\n"
         "\n"
         "Kernel-binary preflight: for each module file in a plugin's modules folders\n"
         "(<plugin folder>/../kernels/<plugin>, then each --modules DIR) and each device,\n"
         "which of the module's targets would load there (sm_90 SASS, compute_90 PTX to JIT,\n"
         "gfx942, x86_64) or why none would, and its kernels with their published n_tile /\n"
         "a_e4m3 (the <kernel>_n_tile / <kernel>_a_e4m3 globals). Nothing is loaded.\n"
         "\n"
         "  --backend SEL  plugins and devices to ask: \"host\", \"cuda:1\", \"cuda,hip\"\n"
         "                 (default: every plugin discovery found usable or unavailable)\n"
         "  --modules DIR  another folder of modules, DIR/<plugin>/<module>.* (repeatable;\n"
         "                 a DIR holding the files directly is still read, with a warning)\n"
         "  --json         one JSON document (strings escaped as in 'gpuplug list --json')\n"
         "\n"
         "A plugin that cannot be used here (e.g. the cuda plugin without a driver) is listed\n"
         "with its reason. Exit status: 0 listed (whether or not the modules load), 1 a named\n"
         "plugin or folder could not be used, 2 usage error (a --modules folder with no module).\n";
}

}  // namespace

int run_modules(std::span<const std::string_view> args) {
  std::optional<std::string> selector;
  std::vector<std::string> extra;  // --modules DIR, in order
  bool json = false;
  gpuplug::tool::CommandLine cli("modules", print_help);
  cli.value("--backend", selector, "a selector (e.g. host, cuda:1)");
  cli.values("--modules", extra, "a folder");
  cli.flag("--json", json);
  if (const auto status = cli.parse(args)) return *status;
  for (const std::string& dir : extra) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      std::cerr << "gpuplug modules: --modules '" << escape_text(dir)
                << "': " << (ec ? ec.message() : std::string("not a folder")) << "\n";
      return 1;
    }
  }
  std::vector<gpuplug::SelectorItem> items;
  if (selector) {
    try {
      items = gpuplug::parse_selector(*selector);
    } catch (const gpuplug::Error& e) {
      return gpuplug::tool::usage_error("modules", e.message());
    }
  }

  gpuplug::PluginRegistry registry;
  registry.discover();
  const std::vector<gpuplug::PluginInfo> plugins = registry.plugins();
  const auto usable = [](const gpuplug::PluginInfo& p) {
    return p.state != gpuplug::PluginState::failed;
  };
  std::vector<PluginModules> chosen;
  const auto add = [&](const gpuplug::PluginInfo& p, std::optional<std::uint32_t> ordinal) {
    PluginModules pm;
    pm.plugin = &p;
    for (const gpuplug::DeviceInfo& d : p.devices)
      if (!ordinal || *ordinal == d.ordinal) pm.ordinals.push_back(d.ordinal);
    chosen.push_back(std::move(pm));
  };
  if (items.empty() || (items.size() == 1 && items[0].name == "auto")) {
    for (const auto& p : plugins)
      if (usable(p)) add(p, std::nullopt);
  } else {
    for (const gpuplug::SelectorItem& item : items) {
      const auto it = std::find_if(plugins.begin(), plugins.end(), [&](const auto& p) {
        return p.name == item.name && p.reason != gpuplug::PluginReason::duplicate_name;
      });
      if (it == plugins.end()) {
        std::cerr << "gpuplug modules: --backend '" << escape_text(*selector) << "': no plugin named '"
                  << escape_text(item.name) << "' was found (run 'gpuplug list')\n";
        return 1;
      }
      if (item.ordinal && it->state == gpuplug::PluginState::available &&
          *item.ordinal >= it->devices.size()) {
        std::cerr << "gpuplug modules: --backend '" << escape_text(*selector) << "': the "
                  << escape_text(it->name) << " plugin has no device " << *item.ordinal
                  << " (it has " << it->devices.size() << ")\n";
        return 1;
      }
      add(*it, item.ordinal);
    }
  }
  // A --modules folder with no module for any plugin asked about is a mistake in the command
  // (a wrong folder, or a layout this tool does not read), never an empty listing.
  for (const std::string& dir : extra) {
    const bool any = holds_files(dir) || std::any_of(chosen.begin(), chosen.end(), [&](auto& pm) {
                       return holds_files(fs::path(dir) / pm.plugin->name);
                     });
    if (!any) {
      std::cerr << "gpuplug modules: --modules '" << escape_text(dir)
                << "': no module file in it, neither in " << escape_text(dir)
                << "/<plugin>/ (the layout) nor directly\n";
      return gpuplug::tool::exit_usage;
    }
  }
  std::set<std::string> warned_flat;
  for (PluginModules& pm : chosen) {
    const fs::path own =
        (pm.plugin->path.parent_path() / ".." / "kernels" / pm.plugin->name).lexically_normal();
    std::error_code ec;
    if (fs::is_directory(own, ec))
      pm.folders.push_back(own);
    else
      pm.folder_notes.push_back("no modules folder at " + own.string());
    for (const fs::path dir : extra) {
      // DIR/<plugin>/ is the layout, as for the modules_dir option and `gpuplug check`; a DIR
      // without that subfolder is read flat for one release, with a warning (once per folder).
      if (fs::is_directory(dir / pm.plugin->name, ec)) {
        pm.folders.push_back(dir / pm.plugin->name);
      } else if (holds_files(dir)) {
        pm.folders.push_back(dir);
        if (warned_flat.insert(dir.string()).second) {
          std::cerr << "gpuplug modules: warning: --modules '" << escape_text(dir.string())
                    << "' holds module files directly (the flat layout, still read in this "
                       "release): put them in "
                    << escape_text((dir / "<plugin>").string()) << "/, one subfolder per plugin\n";
        }
      }
    }
    for (const fs::path& dir : pm.folders) {
      std::string why;
      auto files = module_files(dir, why);
      if (!files) {
        pm.folder_notes.push_back("cannot list " + dir.string() + ": " + why);
        continue;
      }
      for (fs::path& f : *files) {
        ModuleFile mf;
        mf.path = std::move(f);
        inspect_file(registry, pm, mf);
        pm.files.push_back(std::move(mf));
      }
    }
  }
  if (json)
    print_json(chosen);
  else
    print_text(chosen);
  return 0;
}
