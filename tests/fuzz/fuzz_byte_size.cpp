// SPDX-License-Identifier: Apache-2.0
// Fuzz target: sdk::parse_byte_size, the parser of byte-size options ("64M", "1GiB").
//
// Properties: only sdk::Failure(INVALID_ARGUMENT) naming the option escapes; the parser accepts
// exactly the grammar plugin_sdk.hpp documents (decimal digits, then optionally K/M/G/T in any
// case followed by nothing, "B" or "iB", or a bare "B") and returns the value that grammar
// means; a value past 2^64 - 1 is refused, never wrapped.
#include <optional>
#include <plugin_sdk.hpp>
#include <string>

#include "fuzz_input.hpp"

namespace {

__extension__ typedef unsigned __int128 wide;  // room to see an overflow instead of wrapping

/// The documented grammar, written independently of the parser under test.
std::optional<std::uint64_t> reference(const std::string& text) {
  std::size_t i = 0;
  wide value = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    value = value * 10 + static_cast<unsigned>(text[i] - '0');
    if (value > ~std::uint64_t{0}) return std::nullopt;
    ++i;
  }
  if (i == 0) return std::nullopt;
  std::string suffix;
  for (char c : text.substr(i))
    suffix += static_cast<char>(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
  unsigned shift = 0;
  if (suffix.empty() || suffix == "b") {
    shift = 0;
  } else {
    const std::string units = "kmgt";
    const auto pos = units.find(suffix[0]);
    if (pos == std::string::npos) return std::nullopt;
    const std::string tail = suffix.substr(1);
    if (!(tail.empty() || tail == "b" || tail == "ib")) return std::nullopt;
    shift = 10 * static_cast<unsigned>(pos + 1);
  }
  value <<= shift;
  if (value > ~std::uint64_t{0}) return std::nullopt;
  return static_cast<std::uint64_t>(value);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto want = reference(text);
  try {
    const std::uint64_t got = gpuplug::sdk::parse_byte_size("device_memory_limit", text);
    if (!want) gpuplug::fuzz::broken("accepted '" + text + "' as " + std::to_string(got));
    if (got != *want) {
      gpuplug::fuzz::broken("'" + text + "' parsed as " + std::to_string(got) + ", expected " +
                            std::to_string(*want));
    }
  } catch (const gpuplug::sdk::Failure& f) {
    if (f.status() != GPUPLUG_STATUS_INVALID_ARGUMENT)
      gpuplug::fuzz::broken("status " + std::to_string(f.status()));
    if (std::string(f.what()).find("device_memory_limit") == std::string::npos) {
      gpuplug::fuzz::broken(std::string("message does not name the option: ") + f.what());
    }
    if (want)
      gpuplug::fuzz::broken("refused '" + text + "' (" + f.what() + "), expected " +
                            std::to_string(*want));
  }
  return 0;
}
