// SPDX-License-Identifier: Apache-2.0
// Fuzz target: sdk::parse_config, the parser of a plugin's create options (key=value pairs).
//
// Input: an option count, then for each option a key and a value (either may be absent, i.e.
// null). Properties: only sdk::Failure(INVALID_ARGUMENT) escapes; on success every key is known
// (common or the extra one), given once, and the parsed fields agree with the strings
// (device_memory_limit with parse_byte_size, modules_dir with its path).
#include <array>
#include <plugin_sdk.hpp>
#include <string>
#include <vector>

#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gpuplug::fuzz::Input in(data, size);
  static constexpr std::array<std::string_view, 1> extra{"fuzz_extra"};
  const std::uint32_t ordinal = in.integral<std::uint32_t>();
  const std::size_t count = in.integral<std::uint8_t>() % 9;
  const bool null_array = count != 0 && in.integral<std::uint8_t>() == 0xFF;
  // Keys come from a small dictionary most of the time, so the fuzzer reaches the value parsers.
  static constexpr std::array<const char*, 4> common{"device_memory_limit", "modules_dir",
                                                     "fuzz_extra", "Device_memory_limit"};
  std::vector<std::string> keys(count), values(count);
  std::vector<gpuplug_option_t> options(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint8_t pick = in.integral<std::uint8_t>();
    keys[i] = pick < 200 ? common[pick % common.size()] : in.string(32);
    values[i] = in.string(64);
    const std::uint8_t nulls = in.integral<std::uint8_t>();
    options[i].key = nulls == 0xFE ? nullptr : keys[i].c_str();
    options[i].value = nulls == 0xFD ? nullptr : values[i].c_str();
  }
  try {
    const gpuplug::sdk::DeviceConfig config =
        gpuplug::sdk::parse_config(ordinal, null_array ? nullptr : options.data(),
                                   static_cast<std::uint32_t>(count), nullptr, extra);
    if (config.ordinal != ordinal) gpuplug::fuzz::broken("ordinal changed");
    if (config.options.size() != count) gpuplug::fuzz::broken("options lost or invented");
    for (const auto& [key, value] : config.options) {
      if (key != "device_memory_limit" && key != "modules_dir" && key != "fuzz_extra") {
        gpuplug::fuzz::broken("unknown key '" + key + "' accepted");
      }
    }
    const auto limit = config.options.find("device_memory_limit");
    if ((limit != config.options.end()) != config.device_memory_limit.has_value()) {
      gpuplug::fuzz::broken("device_memory_limit given and parsed disagree");
    }
    if (limit != config.options.end() &&
        *config.device_memory_limit !=
            gpuplug::sdk::parse_byte_size("device_memory_limit", limit->second)) {
      gpuplug::fuzz::broken("device_memory_limit parsed differently from parse_byte_size");
    }
    const auto dir = config.options.find("modules_dir");
    if ((dir != config.options.end()) != !config.modules_dirs.empty()) {
      gpuplug::fuzz::broken("modules_dir given and parsed disagree");
    }
    // Values are C strings: everything after an embedded NUL is not part of the option.
    for (std::size_t i = 0; i < count; ++i) {
      const auto it = config.options.find(std::string(keys[i].c_str()));
      if (it == config.options.end() || it->second != std::string(values[i].c_str())) {
        gpuplug::fuzz::broken("option '" + std::string(keys[i].c_str()) + "' not kept as given");
      }
    }
  } catch (const gpuplug::sdk::Failure& f) {
    if (f.status() != GPUPLUG_STATUS_INVALID_ARGUMENT)
      gpuplug::fuzz::broken("status " + std::to_string(f.status()));
    if (std::string(f.what()).empty()) gpuplug::fuzz::broken("empty message");
  }
  return 0;
}
