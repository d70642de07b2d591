// SPDX-License-Identifier: Apache-2.0
// How Boost.Test prints gpuplug's value types in failed assertions (for the OpCache and loader tests).
#pragma once

#include <gpuplug/registry.hpp>
#include <gpuplug/types.hpp>
#include <ostream>

namespace gpuplug {

// boost_test_print_type is Boost.Test's customisation point, found by argument-dependent
// lookup; it stays out of the way of any operator<< the library may add.
inline std::ostream& boost_test_print_type(std::ostream& os, const KernelHandle& h) {
  return os << "KernelHandle{" << h.value << "}";
}
inline std::ostream& boost_test_print_type(std::ostream& os, const DevicePtr& p) {
  return os << "DevicePtr{0x" << std::hex << p.value << std::dec << "}";
}
inline std::ostream& boost_test_print_type(std::ostream& os, const Status& s) {
  return os << to_string(s);
}
inline std::ostream& boost_test_print_type(std::ostream& os, const PluginState& s) {
  return os << to_string(s);
}
inline std::ostream& boost_test_print_type(std::ostream& os, const PluginReason& r) {
  return os << to_string(r);
}

}  // namespace gpuplug
