// SPDX-License-Identifier: Apache-2.0
// Fuzz target: gpuplug::parse_selector, the parser of "cuda:1,hip!,host" (GPUPLUG_BACKEND).
//
// Properties: only gpuplug::Error(invalid_argument) with a message escapes; a parsed selector has
// at least one item, every name is [a-z0-9_]+, "auto" carries no ordinal, uuid or PCI address, at
// most one of those is set, and printing the items back ("name[:ordinal|:uuid=U|:pci=P][!]"
// joined by ',') parses to the same items.
#include <gpuplug/registry.hpp>
#include <string>

#include "fuzz_input.hpp"

namespace {

std::string print(const std::vector<gpuplug::SelectorItem>& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ',';
    out += item.name;
    if (item.ordinal) out += ':' + std::to_string(*item.ordinal);
    if (item.uuid) out += ":uuid=" + *item.uuid;
    if (item.pci) out += ":pci=" + gpuplug::to_string(*item.pci);
    if (item.required) out += '!';
  }
  return out;
}

bool same(const std::vector<gpuplug::SelectorItem>& a,
          const std::vector<gpuplug::SelectorItem>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].ordinal != b[i].ordinal || a[i].required != b[i].required ||
        a[i].uuid != b[i].uuid || a[i].pci != b[i].pci)
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<gpuplug::SelectorItem> items;
  try {
    items = gpuplug::parse_selector(text);
  } catch (const gpuplug::Error& e) {
    if (e.status() != gpuplug::Status::invalid_argument)
      gpuplug::fuzz::broken("status " + to_string(e.status()));
    if (e.message().empty()) gpuplug::fuzz::broken("empty error message");
    return 0;
  }
  if (items.empty()) gpuplug::fuzz::broken("no items parsed from '" + text + "'");
  for (const auto& item : items) {
    if (item.name.empty()) gpuplug::fuzz::broken("empty name from '" + text + "'");
    for (char c : item.name) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
        gpuplug::fuzz::broken("name '" + item.name + "' has a character outside [a-z0-9_]");
      }
    }
    if (item.name == "auto" && (item.ordinal || item.uuid || item.pci))
      gpuplug::fuzz::broken("auto with a device from '" + text + "'");
    if (int{item.ordinal.has_value()} + int{item.uuid.has_value()} + int{item.pci.has_value()} > 1)
      gpuplug::fuzz::broken("more than one way to name the device from '" + text + "'");
  }
  const std::string printed = print(items);
  std::vector<gpuplug::SelectorItem> again;
  try {
    again = gpuplug::parse_selector(printed);
  } catch (const gpuplug::Error& e) {
    gpuplug::fuzz::broken("'" + printed + "' (printed from '" + text +
                          "') does not parse: " + e.what());
  }
  if (!same(items, again))
    gpuplug::fuzz::broken("'" + printed + "' parses differently from '" + text + "'");
  return 0;
}
