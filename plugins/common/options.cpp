// SPDX-License-Identifier: Apache-2.0
// Option parsing: the create options every plugin understands, byte sizes and plain numbers.
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <filesystem>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include "gpuplug/support/escape.hpp"
#include "gpuplug/support/text.hpp"
#include "plugin_sdk.hpp"

namespace gpuplug::sdk {
namespace {

/// The binary shift of a byte-size suffix ("", "b", "k", "kb", "kib", ... in any case), or -1.
int suffix_shift(std::string_view suffix) {
  std::string s(suffix);
  std::transform(s.begin(), s.end(), s.begin(), [](char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  });
  if (s.empty() || s == "b") return 0;
  constexpr std::string_view units = "kmgt";
  const std::size_t unit = units.find(s[0]);
  const std::string_view tail = std::string_view(s).substr(1);
  if (unit == std::string_view::npos || !(tail.empty() || tail == "b" || tail == "ib")) return -1;
  return 10 * static_cast<int>(unit + 1);
}

/// The most folders one modules_dir may list: enough for any layout, and a bound on the work
/// (each lazy load looks in every folder).
constexpr std::size_t kMaxModuleFolders = 64;

/// "modules_dir" is a colon-separated list of folders, like PATH, searched in order after the
/// built-in one. Each element must be an existing folder, checked now so that a typo fails create
/// and names the folder, not the first lookup. An empty element is refused: in PATH it means the
/// current directory, and a module folder that silently follows the process's working
/// directory would let whoever controls that directory supply code.
std::vector<std::filesystem::path> parse_modules_dir(const std::string& value) {
  const auto bad = [&](std::string_view folder, std::size_t index, std::size_t count,
                       const std::string& why) {
    std::string msg = "option modules_dir='" + support::escape_text(value) + "': ";
    if (count > 1)
      msg += "folder " + std::to_string(index + 1) + " of " + std::to_string(count) + " '" +
             support::escape_text(folder) + "': ";
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT, msg + why);
  };
  if (value.empty()) fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "option modules_dir is empty");
  std::vector<std::string_view> elements;
  for (std::size_t start = 0;;) {
    const std::size_t colon = value.find(':', start);
    elements.push_back(std::string_view(value).substr(
        start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (elements.size() > kMaxModuleFolders)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "option modules_dir lists " +
                                              std::to_string(elements.size()) +
                                              " folders, more than the limit of " +
                                              std::to_string(kMaxModuleFolders));
  std::vector<std::filesystem::path> out;
  for (std::size_t i = 0; i < elements.size(); ++i) {
    const std::string_view folder = elements[i];
    if (folder.empty())
      bad(folder, i, elements.size(),
          "empty element (it would mean the current folder; name every folder, e.g. '.' is "
          "not accepted implicitly)");
    std::error_code ec;
    const auto status = std::filesystem::status(folder, ec);
    if (ec) bad(folder, i, elements.size(), ec.message());
    if (!std::filesystem::is_directory(status)) bad(folder, i, elements.size(), "not a folder");
    out.emplace_back(folder);
  }
  return out;
}

}  // namespace

std::optional<std::uint64_t> parse_unsigned(std::string_view text) noexcept {
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  // from_chars takes no sign, no space and no base prefix for an unsigned type.
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop != end) return std::nullopt;
  return value;
}

std::uint64_t parse_byte_size(std::string_view key, std::string_view text) {
  const auto bad = [&](std::string_view why) {
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
         "option " + std::string(key) + "='" + std::string(text) + "' " + std::string(why));
  };
  constexpr std::string_view expected =
      "is not a byte size (decimal digits with an optional K, M, G or T suffix, e.g. 64M)";
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [digits_end, error] = std::from_chars(text.data(), end, value);
  if (error == std::errc::result_out_of_range) bad("does not fit in 64 bits");
  if (error != std::errc()) bad(expected);
  const int shift =
      suffix_shift(std::string_view(digits_end, static_cast<std::size_t>(end - digits_end)));
  if (shift < 0) bad(expected);
  if (value > (~std::uint64_t{0} >> shift)) bad("does not fit in 64 bits");
  return value << shift;
}

DeviceConfig parse_config(std::uint32_t ordinal, const gpuplug_option_t* options,
                          std::uint32_t count, const gpuplug_host_services_t* services,
                          std::span<const std::string_view> extra_keys) {
  static constexpr std::string_view common_keys[] = {"device_memory_limit", "memory_history",
                                                      "modules_dir"};
  DeviceConfig config;
  config.ordinal = ordinal;
  config.services = services;
  if (count != 0 && options == nullptr)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
         "options is null but option_count is " + std::to_string(count));
  for (std::uint32_t i = 0; i < count; ++i) {
    if (options[i].key == nullptr || options[i].value == nullptr)
      fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
           "option " + std::to_string(i) + " has a null key or value");
    const std::string key = options[i].key;
    const std::string value = options[i].value;
    const bool known =
        std::find(std::begin(common_keys), std::end(common_keys), key) != std::end(common_keys) ||
        std::find(extra_keys.begin(), extra_keys.end(), key) != extra_keys.end();
    // Options under the reserved "gpuplug." prefix are ignorable: future common options use it,
    // so a host that passes one never breaks an older plugin's create. A plugin that knows one
    // lists it in extra_keys (then it is parsed like any other); otherwise it is recorded in
    // config.options and otherwise ignored. Every other unknown key is still refused.
    if (!known && key.starts_with(ignorable_option_prefix)) {
      if (!config.options.emplace(key, value).second)
        fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "option " + key + " given more than once");
      continue;
    }
    if (!known) {
      std::vector<std::string_view> all(std::begin(common_keys), std::end(common_keys));
      all.insert(all.end(), extra_keys.begin(), extra_keys.end());
      std::sort(all.begin(), all.end());
      fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
           "unknown option '" + key + "' (known options: " + support::join(all) + ")");
    }
    if (!config.options.emplace(key, value).second)
      fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "option " + key + " given more than once");
    if (key == "device_memory_limit") {
      config.device_memory_limit = parse_byte_size(key, value);
    } else if (key == "memory_history") {
      const auto n = parse_unsigned(value);
      if (!n || *n > max_memory_history)
        fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
             "option memory_history: '" + value + "' is not a number of events from 0 to " +
                 std::to_string(max_memory_history));
      config.memory_history = static_cast<std::size_t>(*n);
    } else if (key == "modules_dir") {
      config.modules_dirs = parse_modules_dir(value);
    }
  }
  return config;
}

std::vector<std::filesystem::path> detail::plugin_module_folders(
    const std::vector<std::filesystem::path>& modules_dirs, const std::string& plugin_name,
    std::string& flat_warning) {
  // Once per process (per plugin: each links its own SDK): every backend a program creates
  // passes the same option, and one warning says all there is to say. Trivially destructible.
  static std::atomic<bool> warned{false};
  std::vector<std::filesystem::path> out;
  std::vector<std::string> flat;
  for (const auto& folder : modules_dirs) {
    std::error_code ec;
    if (std::filesystem::is_directory(folder / plugin_name, ec)) {
      out.push_back(folder / plugin_name);
      continue;
    }
    out.push_back(folder);
    for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
      if (entry.is_regular_file(ec)) {
        flat.push_back(support::escape_text(folder.string()));
        break;
      }
    }
  }
  flat_warning.clear();
  if (!flat.empty() && !warned.exchange(true)) {
    flat_warning = "option modules_dir: " + support::join(flat, ", ") +
                   " holds module files directly (the flat layout, still read in this release); "
                   "put them in <folder>/" + plugin_name + "/ instead, so that one folder serves "
                   "every plugin (docs/conformance.md, \"Module folders\")";
  }
  return out;
}

std::filesystem::path detail::default_modules_dir(const char* plugin_name) {
  // The SDK is linked into the plugin, so this function's own address names the plugin's file.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&default_modules_dir), &info) == 0 ||
      info.dli_fname == nullptr || info.dli_fname[0] == '\0')
    return {};
  std::error_code ec;
  std::filesystem::path so = std::filesystem::absolute(info.dli_fname, ec);
  if (ec) so = info.dli_fname;
  return (so.parent_path() / ".." / "kernels" / plugin_name).lexically_normal();
}

}  // namespace gpuplug::sdk
