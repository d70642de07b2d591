// SPDX-License-Identifier: Apache-2.0
// ScopedEnv: sets or unsets one environment variable for a scope, for tests that must not see
// the caller's GPUPLUG_BACKEND (scripts/device-check sets it) or that point discovery elsewhere.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace gpuplug::test {

/// Sets (or unsets, with nullopt) an environment variable for one scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    apply(value);
  }
  ~ScopedEnv() { apply(old_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void apply(const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name_, value->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace gpuplug::test
