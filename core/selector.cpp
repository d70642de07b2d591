// SPDX-License-Identifier: Apache-2.0
// parse_selector: "auto", "cuda", "cuda:1", "hip:0!", "cuda,hip,host" into SelectorItems.
#include <charconv>
#include <gpuplug/registry.hpp>
#include <limits>

namespace gpuplug {

namespace {

constexpr std::string_view whitespace = " \t\r\n";

std::string_view trim(std::string_view s) noexcept {
  const auto first = s.find_first_not_of(whitespace);
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(whitespace);
  return s.substr(first, last - first + 1);
}

bool is_name_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

[[noreturn]] void bad(std::string_view selector, std::string_view element, std::string_view why) {
  std::string message = "invalid backend selector '";
  message.append(selector).append("': element '").append(element).append("' ").append(why);
  message.append(" (expected name[:ordinal][!] items separated by commas, e.g. \"cuda:1,host\")");
  throw Error(Status::invalid_argument, "", std::move(message));
}

SelectorItem parse_item(std::string_view selector, std::string_view element) {
  SelectorItem item;
  std::string_view rest = element;
  if (!rest.empty() && rest.back() == '!') {
    item.required = true;
    rest.remove_suffix(1);
  }
  const auto colon = rest.find(':');
  const std::string_view name = rest.substr(0, colon);
  if (name.empty()) bad(selector, element, "has no backend name");
  for (char c : name) {
    if (!is_name_char(c)) {
      bad(selector, element,
          "has a bad character in the name (names use lower-case letters, digits and '_')");
    }
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
      throw Error(Status::invalid_argument, "",
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
