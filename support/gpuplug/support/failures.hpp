// SPDX-License-Identifier: Apache-2.0
// Internal: turning the exception in flight into text, and collecting "N of M failed: a; b"
// messages for operations that keep going past failures (Teardown, OpCache::release).
#pragma once

#include <exception>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuplug::support {

/// What the exception being handled says: what() for a std::exception, "unknown exception"
/// otherwise. Call only inside a catch block. Never throws.
inline std::string describe_current_exception() noexcept {
  try {
    try {
      throw;
    } catch (const std::exception& e) {
      return e.what();
    } catch (...) {
      return "unknown exception";
    }
  } catch (...) {
    return {};  // no memory for the text: the caller's status still says what happened
  }
}

/// Failures of an operation that goes on past each one. `add` one per failed step; `message`
/// gives "N of M <what> (<after>): a; b".
class FailureList {
 public:
  void add(std::string failure) { failures_.push_back(std::move(failure)); }
  bool empty() const noexcept { return failures_.empty(); }
  std::size_t size() const noexcept { return failures_.size(); }

  /// e.g. message(3, "resources failed to release") -> "1 of 3 resources failed to release: x".
  std::string message(std::size_t attempted, std::string_view what) const {
    std::string out = std::to_string(failures_.size()) + " of " + std::to_string(attempted) + " " +
                      std::string(what) + ": ";
    for (std::size_t i = 0; i < failures_.size(); ++i) {
      if (i != 0) out += "; ";
      out += failures_[i];
    }
    return out;
  }

 private:
  std::vector<std::string> failures_;
};

}  // namespace gpuplug::support
