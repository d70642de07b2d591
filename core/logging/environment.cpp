// SPDX-License-Identifier: Apache-2.0
// Reading GPUPLUG_* variables: secure_getenv semantics, and one warning per ignored variable.
#include "logging/environment.hpp"

#include <sys/auxv.h>

#include <cstdlib>
#include <cstring>
#include <gpuplug/log.hpp>
#include <mutex>
#include <set>

namespace gpuplug::detail {

bool process_is_elevated() noexcept { return ::getauxval(AT_SECURE) != 0; }

EnvironmentValue lookup_environment(const char* name) noexcept {
  EnvironmentValue out;
  try {
    // secure_getenv is glibc's getenv that returns null when AT_SECURE is set.
    if (const char* value = ::secure_getenv(name); value != nullptr && *value != '\0') {
      out.value = value;
    } else if (process_is_elevated()) {
      // Asked only to say that a value was ignored; the value itself is never used.
      const char* raw = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read-only use
      out.ignored_elevated = raw != nullptr && *raw != '\0';
    }
  } catch (...) {
    out.value.reset();  // no memory for the copy: treated as unset
  }
  return out;
}

std::optional<std::string> read_environment(const char* name) {
  EnvironmentValue v = lookup_environment(name);
  if (v.ignored_elevated) {
    // Process-wide by nature (one environment): which variables were reported already.
    static std::mutex* const mutex = new std::mutex;            // never destroyed: may be used
    static std::set<std::string>* const said = new std::set<std::string>;  // in late destructors
    bool first = false;
    {
      std::lock_guard lock(*mutex);
      first = said->insert(name).second;
    }
    if (first) {
      log(LogLevel::warning, "environment",
          std::string("ignoring ") + name +
              ": the process runs with elevated privileges (setuid, setgid or capabilities)");
    }
  }
  return std::move(v.value);
}

}  // namespace gpuplug::detail
