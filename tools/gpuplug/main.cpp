// SPDX-License-Identifier: Apache-2.0
// The gpuplug tool: lists the plugins the registry finds, with their status and devices.
#include <array>
#include <cstdio>
#include <gpuplug/gpuplug.hpp>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <gpuplug/support/escape.hpp>
#include <gpuplug/support/json.hpp>

#include "check.hpp"
#include "cli.hpp"
#include "explain.hpp"
#include "matrix.hpp"
#include "mem.hpp"
#include "modules.hpp"

namespace {

constexpr int exit_usage = gpuplug::tool::exit_usage;
/// "schema" of `gpuplug list --json`; share/gpuplug/list.schema.json describes this version.
constexpr int list_schema_version = 1;

using Args = std::span<const std::string_view>;

// ---- output helpers --------------------------------------------------------------------------

std::string abi_text(std::uint32_t v) {
  if (v == 0) return "-";
  return std::to_string(GPUPLUG_ABI_MAJOR(v)) + "." + std::to_string(GPUPLUG_ABI_MINOR(v));
}

std::string bytes_text(std::uint64_t bytes) {
  constexpr std::array<const char*, 5> units{"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < units.size()) {
    value /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return buf;
}

using gpuplug::support::escape_text;

void print_usage(std::ostream& os) {
  os << "usage: gpuplug <command> [options]\n"
        "\n"
        "commands:\n"
        "  list [--json]   every candidate plugin: path, version, ABI, status, reason, devices\n"
        "  list --explain SELECTOR   a dry run: what SELECTOR (\"auto\") would choose, and why\n"
        "  check [--backend SEL | --plugin FILE] [--isolate] [--timeout SECONDS]\n"
        "                  the conformance suite against one backend, optionally one process\n"
        "                  per case (see 'gpuplug check --help')\n"
        "  modules [--backend SEL] [--modules DIR] [--json]\n"
        "                  kernel preflight: which target of each module loads on each device\n"
        "  matrix [--markdown] [--html OUT] [--baseline OLD.json]... RESULT.json...\n"
        "                  one table of `check --json` runs from several backends and machines\n"
        "  mem SNAPSHOT.json [--html OUT.html] | mem diff A.json B.json\n"
        "                  a memory snapshot's sites, peaks and scratch; what grew between two;\n"
        "                  a page with the timeline per site (see 'gpuplug mem --help')\n"
        "\n"
        "options:\n"
        "  --version       print the gpuplug and plugin ABI versions\n"
        "  --help, -h      print this help\n"
        "\n"
        "environment:\n"
        "  GPUPLUG_PLUGIN_PATH  extra plugin folders or files, colon-separated, searched first\n"
        "  GPUPLUG_BACKEND      replaces the selector \"auto\" (e.g. \"cuda,host\", \"hip:1!\")\n"
        "  GPUPLUG_LOG          trace, debug, info, warning (default), error or off\n";
}

int usage_error(const std::string& message) { return gpuplug::tool::usage_error("", message); }

// ---- gpuplug list ----------------------------------------------------------------------------

std::string hex4(std::uint32_t id) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04x", id & 0xFFFFu);
  return buf;
}

/// The ABI 1.1 identity and capabilities of a device, on its own line under the device line; "-"
/// for what the plugin does not report (a plugin built against ABI 1.0 reports none of it).
void list_device_details(const gpuplug::DeviceInfo& d) {
  std::cout << "    class " << gpuplug::to_string(d.device_class) << ", pci "
            << (d.pci ? gpuplug::to_string(*d.pci) : std::string("-"));
  if (d.pci_vendor_id != 0) std::cout << " [" << hex4(d.pci_vendor_id) << ":" << hex4(d.pci_device_id) << "]";
  std::cout << ", " << d.compute_units << " compute units, warp "
            << (d.warp_size == 0 ? std::string("-") : std::to_string(d.warp_size))
            << ", shared/block "
            << (d.max_shared_memory_per_block == 0 ? std::string("-")
                                                   : bytes_text(d.max_shared_memory_per_block))
            << "\n";
  std::cout << "    driver " << (d.driver_version.empty() ? "-" : escape_text(d.driver_version))
            << ", runtime " << (d.runtime_version.empty() ? "-" : escape_text(d.runtime_version))
            << ", managed memory " << (d.managed_memory ? "yes" : "no") << " (concurrent "
            << (d.concurrent_managed_access ? "yes" : "no") << "), peak "
            << (d.peak_gflops == 0 ? std::string("-") : std::to_string(d.peak_gflops) + " GFLOP/s")
            << "\n";
}

void list_text(const std::vector<gpuplug::PluginInfo>& plugins) {
  std::cout << "gpuplug " << gpuplug::version_string << " (plugin ABI "
            << abi_text(GPUPLUG_ABI_VERSION) << ")\n";
  std::cout << "search path:\n";
  for (const auto& p : gpuplug::PluginRegistry::search_path())
    std::cout << "  " << escape_text(p.string()) << "\n";
  if (plugins.empty()) {
    std::cout << "no plugins found\n";
    return;
  }
  std::cout << "\n";
  for (const auto& p : plugins) {
    // Everything a plugin or a file name supplied is escaped: it cannot forge lines or reach
    // the terminal as control sequences.
    std::cout << "[" << escape_text(p.name) << "] " << gpuplug::to_string(p.state);
    if (p.reason != gpuplug::PluginReason::none)
      std::cout << " (" << gpuplug::to_string(p.reason) << ")";
    std::cout << "\n";
    std::cout << "  path:    " << escape_text(p.path.string()) << "\n";
    if (!p.vendor.empty() || !p.version.empty()) {
      std::cout << "  version: " << (p.version.empty() ? "-" : escape_text(p.version))
                << " (vendor " << (p.vendor.empty() ? "-" : escape_text(p.vendor)) << ")\n";
    }
    std::cout << "  abi:     " << abi_text(p.abi_version) << "\n";
    if (!p.message.empty())
      std::cout << "  " << (p.state == gpuplug::PluginState::available ? "note:    " : "reason:  ")
                << escape_text(p.message) << "\n";
    for (const auto& d : p.devices) {
      std::cout << "  device " << d.ordinal << ": " << escape_text(d.name) << ", "
                << bytes_text(d.total_memory) << ", " << (d.arch.empty() ? "-" : escape_text(d.arch))
                << ", uuid " << (d.uuid.empty() ? "-" : escape_text(d.uuid)) << "\n";
      list_device_details(d);
    }
    std::cout << "\n";
  }
}

void list_json(const std::vector<gpuplug::PluginInfo>& plugins) {
  namespace json = gpuplug::support::json;
  // "schema" is the document's layout version (share/gpuplug/list.schema.json): bumped when a
  // field changes meaning or goes away; new fields may appear within a version.
  json::value doc = {{"schema", list_schema_version},
                     {"gpuplug_version", gpuplug::version_string},
                     {"abi_version", abi_text(GPUPLUG_ABI_VERSION)}};
  json::value search = json::value::array();
  json::value search_bytes = json::value::array();  // the exact bytes of every entry, in order
  bool all_utf8 = true;
  for (const auto& p : gpuplug::PluginRegistry::search_path()) {
    search.push_back(p.string());
    search_bytes.push_back(gpuplug::support::hex_bytes(p.string()));
    all_utf8 = all_utf8 && gpuplug::support::is_valid_utf8(p.string());
  }
  doc["search_path"] = std::move(search);
  if (!all_utf8) doc["search_path_bytes"] = std::move(search_bytes);
  json::value& listed = doc["plugins"] = json::value::array();
  for (const auto& p : plugins) {
    json::value plugin = json::value::object();
    json::set_text(plugin, "name", p.name);
    json::set_text(plugin, "path", p.path.string());
    json::set_text(plugin, "vendor", p.vendor);
    json::set_text(plugin, "version", p.version);
    plugin["abi_version"] = p.abi_version == 0 ? json::value() : json::value(abi_text(p.abi_version));
    plugin["state"] = gpuplug::to_string(p.state);
    plugin["reason"] = gpuplug::to_string(p.reason);
    json::set_text(plugin, "message", p.message);
    json::value& devices = plugin["devices"] = json::value::array();
    for (const auto& d : p.devices) {
      json::value device = {{"ordinal", d.ordinal}};
      json::set_text(device, "name", d.name);
      json::set_text(device, "uuid", d.uuid);
      json::set_text(device, "arch", d.arch);
      device["total_memory"] = d.total_memory;
      device["free_memory"] = d.free_memory;
      device["compute_units"] = d.compute_units;
      device["managed_memory"] = d.managed_memory;
      device["concurrent_managed_access"] = d.concurrent_managed_access;
      device["device_class"] = gpuplug::to_string(d.device_class);
      device["pci"] = d.pci ? json::value(gpuplug::to_string(*d.pci)) : json::value();
      device["pci_vendor_id"] = d.pci_vendor_id;
      device["pci_device_id"] = d.pci_device_id;
      device["warp_size"] = d.warp_size;
      device["max_shared_memory_per_block"] = d.max_shared_memory_per_block;
      json::set_text(device, "driver_version", d.driver_version);
      json::set_text(device, "runtime_version", d.runtime_version);
      device["peak_gflops"] = d.peak_gflops;
      devices.push_back(std::move(device));
    }
    listed.push_back(std::move(plugin));
  }
  std::cout << json::dump(doc, json::layout::document) << "\n";
}

void print_list_usage(std::ostream& os) {
  os << "usage: gpuplug list [--json | --explain SELECTOR]\n"
         "\n"
         "--explain SELECTOR: a dry run of selecting SELECTOR (\"auto\", \"cuda:1,host\"):\n"
         "what it would choose and why, creating no backend. For auto, every device of the\n"
         "usable plugins, ranked by class (discrete_gpu, integrated_gpu, accelerator, cpu,\n"
         "emulator; a plugin older than ABI 1.1 ranks as accelerator), then score (peak\n"
         "GFLOP/s, then memory, then compute units), then discovery order, then ordinal;\n"
         "then every plugin passed over and why. Exit 1 when nothing would be chosen.\n"
         "\n"
         "Text: whatever a plugin or a file name supplied is printed escaped: backslash as\n"
         "\\\\, tab/newline/return as \\t \\n \\r, other control bytes, DEL and bytes that\n"
         "are not UTF-8 as \\xNN (ESC is \\x1b), C1 controls as \\u0080..\\u009f.\n"
         "\n"
         "JSON: always valid UTF-8. A string that is not UTF-8 (a plugin's message, a Latin-1\n"
         "file name) has each bad byte replaced with U+FFFD, and its object gains\n"
         "\"<field>_bytes\": the exact bytes in lowercase hex (\"version_bytes\": \"312eff\").\n"
         "When a search_path entry is not UTF-8, \"search_path_bytes\" lists every entry so.\n"
         "DEL and C1 controls are written as \\u007f..\\u009f.\n"
         "The document's \"schema\" (now 1) is the version of its layout, described by the\n"
         "JSON Schema share/gpuplug/list.schema.json; fields may be added within a version.\n";
}

int cmd_list(Args args) {
  bool json = false;
  std::optional<std::string> explain;  // --explain SELECTOR
  gpuplug::tool::CommandLine cli("list", print_list_usage);
  cli.flag("--json", json);
  cli.value("--explain", explain, "a SELECTOR (e.g. auto)");
  if (const auto status = cli.parse(args)) return *status;
  if (json && explain) return gpuplug::tool::usage_error("list", "--json and --explain do not combine");
  gpuplug::PluginRegistry registry;
  registry.discover();  // never throws for a broken plugin: each entry says why
  if (explain) return explain_selection(registry, *explain);
  const auto plugins = registry.plugins();
  if (json) {
    list_json(plugins);
  } else {
    list_text(plugins);
  }
  return 0;  // broken plugins are reported, not failures of the tool
}

// ---- dispatch --------------------------------------------------------------------------------

struct Command {
  std::string_view name;
  int (*run)(Args args);
};

// New commands (e.g. `check`) are one line here.
constexpr std::array<Command, 5> commands{{
    {"list", &cmd_list},
    {"check", &run_check},                       // tools/gpuplug/check.cpp
    {"modules", &run_modules},                   // tools/gpuplug/modules.cpp
    {"matrix", &gpuplug::tool::run_matrix},      // tools/gpuplug/matrix.cpp
    {"mem", &gpuplug::tool::run_mem},            // tools/gpuplug/mem.cpp
}};

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty()) {
    print_usage(std::cerr);
    return exit_usage;
  }
  const std::string_view first = args.front();
  if (first == "--help" || first == "-h" || first == "help") {
    print_usage(std::cout);
    return 0;
  }
  if (first == "--version") {
    std::cout << "gpuplug " << gpuplug::version_string << " (plugin ABI "
              << abi_text(GPUPLUG_ABI_VERSION) << ")\n";
    return 0;
  }
  for (const Command& c : commands) {
    if (c.name != first) continue;
    try {
      return c.run(Args(args).subspan(1));
    } catch (const std::exception& e) {
      std::cerr << "gpuplug " << first << ": " << e.what() << "\n";
      return 1;
    }
  }
  if (first.starts_with("-")) return usage_error("unknown option '" + std::string(first) + "'");
  return usage_error("unknown command '" + std::string(first) + "'");
}
