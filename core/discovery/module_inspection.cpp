// SPDX-License-Identifier: Apache-2.0
// Kernel preflight in the core: one plugin's inspect_module slot, called without a backend.
#include "discovery/module_inspection.hpp"

#include <charconv>
#include <cstring>
#include <memory>
#include <string>

namespace gpuplug {

std::optional<std::uint32_t> ModuleInspection::value_of(std::string_view name) const {
  for (const Symbol& s : symbols)
    if (s.name == name) return s.value;
  return std::nullopt;
}

namespace detail {
namespace {

template <std::size_t N>
std::string field(const char (&text)[N]) {
  return std::string(text, strnlen(text, N));
}

/// `text` split at `sep`, empty items skipped; a last item "..." (the plugin's mark for a list
/// cut short) sets `truncated` instead of being listed.
std::vector<std::string> split(const std::string& text, char sep, bool& truncated) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t end = std::min(text.find(sep, at), text.size());
    if (end > at) out.emplace_back(text, at, end - at);
    at = end + 1;
  }
  if (!out.empty() && out.back() == "...") {
    out.pop_back();
    truncated = true;
  }
  return out;
}

ModuleInspection::Symbol parse_symbol(const std::string& item) {
  const std::size_t eq = item.rfind('=');
  if (eq != std::string::npos && eq > 0 && eq + 1 < item.size()) {
    std::uint32_t value = 0;
    const char* begin = item.data() + eq + 1;
    const char* end = item.data() + item.size();
    const auto [ptr, ec] = std::from_chars(begin, end, value);
    if (ec == std::errc() && ptr == end) return {item.substr(0, eq), value};
  }
  return {item, std::nullopt};
}

}  // namespace

ModuleInspection to_module_inspection(const gpuplug_module_inspection_t& raw) {
  ModuleInspection out;
  out.loadable = raw.loadable == 1;
  out.format = field(raw.format);
  out.target = field(raw.target);
  out.reason = field(raw.reason);
  out.targets = split(field(raw.targets), ' ', out.truncated);
  out.functions = split(field(raw.functions), '\n', out.truncated);
  for (const std::string& item : split(field(raw.symbols), '\n', out.truncated))
    out.symbols.push_back(parse_symbol(item));
  return out;
}

ModuleInspection inspect_module(const std::vector<PluginEntry>& entries, std::string_view plugin,
                                std::uint32_t ordinal, std::span<const std::byte> image) {
  const std::string backend = std::string(plugin) + ":" + std::to_string(ordinal);
  const std::string op = "inspect_module";
  const PluginEntry* found = nullptr;
  std::string known;
  for (const PluginEntry& e : entries) {
    if (e.info.reason == PluginReason::duplicate_name) continue;
    if (e.info.name == plugin && found == nullptr) found = &e;
    known += (known.empty() ? "" : ", ") + e.info.name;
  }
  if (found == nullptr) {
    throw Error(Status::not_found, backend, op,
                "no plugin named '" + std::string(plugin) + "' was discovered (found: " +
                    (known.empty() ? std::string("none; call discover() first") : known) + ")");
  }
  const PluginInfo& info = found->info;
  if (info.state != PluginState::available) {
    throw Error(Status::unavailable, backend, op,
                "the " + info.name + " plugin is " + std::string(to_string(info.state)) + " (" +
                    std::string(to_string(info.reason)) + "): " + info.message);
  }
  if (ordinal >= info.devices.size()) {
    throw Error(Status::not_found, backend, op,
                "the " + info.name + " plugin has no device " + std::to_string(ordinal) + " (it has " +
                    std::to_string(info.devices.size()) + ")");
  }
  // The library stays loaded while the slot runs: `library` holds it.
  const auto [library, table] = acquire_library(*found);
  if (table.inspect_module == nullptr) {
    // copy_table zeroed every byte past the plugin's struct_size: a 1.0 table reads as null here.
    throw Error(Status::unsupported, backend, op,
                "module inspection is not supported by the " + info.name + " plugin (" +
                    (table.struct_size < GPUPLUG_PLUGIN_V1_1_SIZE
                         ? "its table predates the inspect_module slot of ABI 1.1"
                         : "its inspect_module slot is null") +
                    ")");
  }
  // 8 KiB: on the heap, so that deep call stacks (the tool's threads) need not hold it.
  auto raw = std::make_unique<gpuplug_module_inspection_t>();
  raw->struct_size = sizeof(gpuplug_module_inspection_t);
  const gpuplug_status_t status =
      table.inspect_module(ordinal, image.empty() ? nullptr : image.data(), image.size(), raw.get());
  if (status != GPUPLUG_STATUS_SUCCESS) {
    std::string why = field(raw->reason);
    if (why.empty()) why = "failed (" + to_string(static_cast<Status>(status)) + ")";
    throw Error(static_cast<Status>(status), backend, op, std::move(why));
  }
  return to_module_inspection(*raw);
}

}  // namespace detail
}  // namespace gpuplug
