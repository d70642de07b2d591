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

#include "check.hpp"
#include "explain.hpp"
#include "matrix.hpp"
#include "mem.hpp"
#include "modules.hpp"

namespace {

constexpr int exit_usage = 2;
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
using gpuplug::support::json_string;

using gpuplug::support::json_member;

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

int usage_error(const std::string& message) {
  std::cerr << "gpuplug: " << message << "\n(run 'gpuplug --help' for usage)\n";
  return exit_usage;
}

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
  std::string out = "{\n";
  // The document's layout version (share/gpuplug/list.schema.json): bumped when a field changes
  // meaning or goes away; new fields may appear within a version.
  out += "  \"schema\": " + std::to_string(list_schema_version) + ",\n";
  out += "  \"gpuplug_version\": " + json_string(gpuplug::version_string) + ",\n";
  out += "  \"abi_version\": " + json_string(abi_text(GPUPLUG_ABI_VERSION)) + ",\n";
  out += "  \"search_path\": [";
  bool first = true;
  bool all_utf8 = true;
  const auto search_path = gpuplug::PluginRegistry::search_path();
  for (const auto& p : search_path) {
    out += (first ? "" : ", ") + json_string(p.string());
    all_utf8 = all_utf8 && gpuplug::support::is_valid_utf8(p.string());
    first = false;
  }
  out += "],\n";
  if (!all_utf8) {  // the exact bytes of every entry, in order
    out += "  \"search_path_bytes\": [";
    first = true;
    for (const auto& p : search_path) {
      out += (first ? "" : ", ") + json_string(gpuplug::support::hex_bytes(p.string()));
      first = false;
    }
    out += "],\n";
  }
  out += "  \"plugins\": [";
  first = true;
  for (const auto& p : plugins) {
    out += first ? "\n" : ",\n";
    first = false;
    out += "    {\n";
    constexpr std::string_view sep = ",\n      ";
    out += "      " + json_member("name", p.name, sep) + ",\n";
    out += "      " + json_member("path", p.path.string(), sep) + ",\n";
    out += "      " + json_member("vendor", p.vendor, sep) + ",\n";
    out += "      " + json_member("version", p.version, sep) + ",\n";
    out += "      \"abi_version\": " +
           (p.abi_version == 0 ? std::string("null") : json_string(abi_text(p.abi_version))) +
           ",\n";
    out += "      \"state\": " + json_string(gpuplug::to_string(p.state)) + ",\n";
    out += "      \"reason\": " + json_string(gpuplug::to_string(p.reason)) + ",\n";
    out += "      " + json_member("message", p.message, sep) + ",\n";
    out += "      \"devices\": [";
    bool first_device = true;
    for (const auto& d : p.devices) {
      out += first_device ? "\n" : ",\n";
      first_device = false;
      out += "        {\"ordinal\": " + std::to_string(d.ordinal) +
             ", " + json_member("name", d.name, ", ") + ", " + json_member("uuid", d.uuid, ", ") +
             ", " + json_member("arch", d.arch, ", ") +
             ", \"total_memory\": " + std::to_string(d.total_memory) +
             ", \"free_memory\": " + std::to_string(d.free_memory) +
             ", \"compute_units\": " + std::to_string(d.compute_units) +
             ", \"managed_memory\": " + (d.managed_memory ? "true" : "false") +
             ", \"concurrent_managed_access\": " + (d.concurrent_managed_access ? "true" : "false") +
             ", \"device_class\": " + json_string(gpuplug::to_string(d.device_class)) +
             ", \"pci\": " + (d.pci ? json_string(gpuplug::to_string(*d.pci)) : std::string("null")) +
             ", \"pci_vendor_id\": " + std::to_string(d.pci_vendor_id) +
             ", \"pci_device_id\": " + std::to_string(d.pci_device_id) +
             ", \"warp_size\": " + std::to_string(d.warp_size) +
             ", \"max_shared_memory_per_block\": " + std::to_string(d.max_shared_memory_per_block) +
             ", " + json_member("driver_version", d.driver_version, ", ") +
             ", " + json_member("runtime_version", d.runtime_version, ", ") +
             ", \"peak_gflops\": " + std::to_string(d.peak_gflops) + "}";
    }
    out += first_device ? "]\n" : "\n      ]\n";
    out += "    }";
  }
  out += first ? "]\n}\n" : "\n  ]\n}\n";
  std::cout << out;
}

int cmd_list(Args args) {
  bool json = false;
  std::optional<std::string_view> explain;  // --explain SELECTOR
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a == "--json") {
      json = true;
    } else if (a == "--explain" || a.starts_with("--explain=")) {
      if (a == "--explain") {
        if (i + 1 >= args.size()) return usage_error("list: --explain needs a SELECTOR (e.g. auto)");
        explain = args[++i];
      } else {
        explain = a.substr(std::string_view("--explain=").size());
      }
    } else if (a == "--help" || a == "-h") {
      std::cout
          << "usage: gpuplug list [--json | --explain SELECTOR]\n"
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
      return 0;
    } else {
      return usage_error("list: unknown option '" + std::string(a) + "'");
    }
  }
  if (json && explain) return usage_error("list: --json and --explain do not combine");
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
