// SPDX-License-Identifier: Apache-2.0
// Internal: the one way the core reads its GPUPLUG_* environment variables.
#pragma once

#include <optional>
#include <string>

namespace gpuplug::detail {

/// What one variable holds, and whether a value was ignored because the process is elevated.
struct EnvironmentValue {
  std::optional<std::string> value;  // unset or empty reads as nullopt
  bool ignored_elevated = false;     // set, but ignored: the process runs setuid/setgid
};

/// Reads `name` with secure_getenv semantics and logs nothing (for the logger's own variable).
/// In a process the kernel marks AT_SECURE (setuid, setgid, file capabilities), every variable
/// reads as unset, so that the user who starts a privileged program cannot choose its plugins.
EnvironmentValue lookup_environment(const char* name) noexcept;

/// As lookup_environment, and the first ignored read of each variable in the process is
/// logged at warning level ("registry: ignoring GPUPLUG_PLUGIN_PATH in a setuid or setgid
/// process"). Thread-safe. Use this for every GPUPLUG_* variable but GPUPLUG_LOG.
std::optional<std::string> read_environment(const char* name);

/// True when the process runs with elevated privileges (AT_SECURE).
bool process_is_elevated() noexcept;

}  // namespace gpuplug::detail
