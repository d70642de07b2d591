// SPDX-License-Identifier: Apache-2.0
// The selector grammar: parse_selector turns "auto", "cuda", "cuda:1", "hip:0!",
// "hip:pci=0000:c1:00.0" or "cuda,hip,host" into SelectorItems, or says which element is wrong.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <gpuplug/registry.hpp>
#include <gpuplug/support/plugin_name.hpp>
#include <gpuplug/support/text.hpp>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuplug {

namespace {

using support::trim;

[[noreturn]] void bad(std::string_view selector, std::string_view element, std::string_view why) {
  std::string message = "invalid backend selector '";
  message.append(selector).append("': element '").append(element).append("' ").append(why);
  message.append(
      " (expected name[:ordinal|:uuid=UUID|:pci=ADDRESS][!] items separated by commas, e.g. "
      "\"cuda:1,host\" or \"hip:pci=0000:c1:00.0\")");
  throw Error(Status::invalid_argument, "", "select", std::move(message));
}

/// Up to `max_digits` hex digits (either case) from the front of `s`, consumed; nullopt when
/// there are none or more.
std::optional<std::uint32_t> take_hex(std::string_view& s, std::size_t max_digits) {
  std::size_t n = 0;
  std::uint32_t value = 0;
  while (n < s.size() && std::isxdigit(static_cast<unsigned char>(s[n])) != 0) {
    if (++n > max_digits) return std::nullopt;
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(s[n - 1])));
    value = value * 16 + static_cast<std::uint32_t>(c <= '9' ? c - '0' : c - 'a' + 10);
  }
  if (n == 0) return std::nullopt;
  s.remove_prefix(n);
  return value;
}

/// "0000:c1:00.0", "00000000:C1:00.0" (nvidia-smi) or the short "c1:00.0" (domain 0).
std::optional<PciAddress> parse_pci(std::string_view text) {
  // Two colons: a domain comes first.
  const bool has_domain = std::count(text.begin(), text.end(), ':') == 2;
  PciAddress a;
  std::string_view s = text;
  if (has_domain) {
    const auto domain = take_hex(s, 8);
    if (!domain || s.empty() || s.front() != ':') return std::nullopt;
    s.remove_prefix(1);
    a.domain = *domain;
  }
  const auto bus = take_hex(s, 2);
  if (!bus || s.empty() || s.front() != ':') return std::nullopt;
  s.remove_prefix(1);
  const auto device = take_hex(s, 2);
  if (!device || *device > 0x1f || s.empty() || s.front() != '.') return std::nullopt;
  s.remove_prefix(1);
  const auto function = take_hex(s, 1);
  if (!function || *function > 7 || !s.empty()) return std::nullopt;
  a.bus = *bus;
  a.device = *device;
  a.function = *function;
  return a;
}

/// Parses the "uuid=..." or "pci=..." after the colon into `item`; false when `spec` is neither.
bool parse_device_spec(std::string_view selector, std::string_view element, std::string_view spec,
                       SelectorItem& item) {
  constexpr std::string_view uuid_key = "uuid=";
  constexpr std::string_view pci_key = "pci=";
  if (spec.starts_with(uuid_key)) {
    const std::string_view value = spec.substr(uuid_key.size());
    if (value.empty()) bad(selector, element, "has an empty uuid");
    if (value.size() > 63) bad(selector, element, "has a uuid longer than 63 characters");
    const bool plain = std::all_of(value.begin(), value.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-';
    });
    if (!plain) {
      bad(selector, element,
          "has a uuid with a character other than a letter, a digit or '-' (e.g. "
          "uuid=GPU-8932f937-d72c-4106-c12f-20bd9faed9f6)");
    }
    item.uuid = std::string(value);
    return true;
  }
  if (spec.starts_with(pci_key)) {
    const std::string_view value = spec.substr(pci_key.size());
    if (value.empty()) bad(selector, element, "has an empty PCI address");
    item.pci = parse_pci(value);
    if (!item.pci) {
      bad(selector, element,
          "has a PCI address that is not domain:bus:device.function in hex (e.g. "
          "pci=0000:c1:00.0, or c1:00.0 in domain 0; device at most 1f, function at most 7)");
    }
    return true;
  }
  return false;
}

SelectorItem parse_item(std::string_view selector, std::string_view element) {
  SelectorItem item;
  {
    // "name:uuid=..." and "name:pci=..." name a device; any other '=' is an option.
    std::string_view rest = element;
    if (!rest.empty() && rest.back() == '!') rest.remove_suffix(1);
    const auto colon = rest.find(':');
    if (colon != std::string_view::npos && rest.find('=') != std::string_view::npos &&
        rest.find('=') > colon) {
      const std::string_view name = rest.substr(0, colon);
      if (parse_device_spec(selector, element, rest.substr(colon + 1), item)) {
        if (name.empty()) bad(selector, element, "has no backend name");
        if (!support::valid_plugin_name(name)) {
          bad(selector, element,
              "has a bad character in the name (names use lower-case letters, digits and '_')");
        }
        if (name == "auto") bad(selector, element, "names a device for 'auto'");
        item.name = std::string(name);
        item.required = rest.size() != element.size();
        return item;
      }
    }
  }
  if (const auto eq = element.find('='); eq != std::string_view::npos) {
    // "host!opt=bad": a selector names backends only; say where options go instead of
    // complaining about a bad character.
    const auto start = element.find_last_of("!:", eq);
    const std::string_view option =
        element.substr(start == std::string_view::npos ? 0 : start + 1);
    bad(selector, element,
        "holds an option ('" + std::string(option) +
            "'); options are not part of a selector: pass them as gpuplug::Options to "
            "select() or create()");
  }
  std::string_view rest = element;
  if (!rest.empty() && rest.back() == '!') {
    item.required = true;
    rest.remove_suffix(1);
  }
  const auto colon = rest.find(':');
  const std::string_view name = rest.substr(0, colon);
  if (name.empty()) bad(selector, element, "has no backend name");
  if (!support::valid_plugin_name(name)) {
    bad(selector, element,
        "has a bad character in the name (names use lower-case letters, digits and '_')");
  }
  item.name = std::string(name);
  if (colon != std::string_view::npos) {
    const std::string_view digits = rest.substr(colon + 1);
    if (item.name == "auto") bad(selector, element, "gives an ordinal to 'auto'");
    if (digits.empty()) bad(selector, element, "has an empty ordinal");
    std::uint64_t value = 0;
    const auto* end = digits.data() + digits.size();
    const auto [ptr, ec] = std::from_chars(digits.data(), end, value);
    const bool all_digits = digits.find_first_not_of("0123456789") == std::string_view::npos;
    if (!all_digits || ptr != end)
      bad(selector, element, "has an ordinal that is not a decimal number");
    if (ec != std::errc() || value > std::numeric_limits<std::uint32_t>::max()) {
      bad(selector, element, "has an ordinal that is too large");
    }
    item.ordinal = static_cast<std::uint32_t>(value);
  }
  return item;
}

}  // namespace

std::vector<SelectorItem> parse_selector(std::string_view selector) {
  std::vector<SelectorItem> items;
  std::size_t start = 0;
  while (true) {
    const auto comma = selector.find(',', start);
    const std::string_view raw = selector.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    const std::string_view element = trim(raw);
    if (element.empty()) {
      throw Error(Status::invalid_argument, "", "select",
                  "invalid backend selector '" + std::string(selector) + "': element " +
                      std::to_string(items.size() + 1) + " is empty");
    }
    items.push_back(parse_item(selector, element));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return items;
}

}  // namespace gpuplug
