// SPDX-License-Identifier: Apache-2.0
// `gpuplug modules`: kernel-binary preflight of the modules a plugin would load.
#pragma once

#include <span>
#include <string_view>

/// Runs `gpuplug modules <args>` (args exclude "modules"); see modules.cpp for the options and
/// the exit statuses (0 listed, 1 a named folder or plugin could not be used, 2 usage error).
int run_modules(std::span<const std::string_view> args);
