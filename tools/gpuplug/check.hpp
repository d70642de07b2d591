// SPDX-License-Identifier: Apache-2.0
// `gpuplug check`: the conformance suite against one backend, from the installed tool.
#pragma once

#include <span>
#include <string_view>

/// Runs `gpuplug check <args>` (args exclude "check"); see check.cpp for the options and the
/// exit statuses (0 all passed, 1 a case failed, 2 usage error, 3 the backend is unavailable).
int run_check(std::span<const std::string_view> args);
/// The same with C arguments; argv[0] is "check".
int run_check(int argc, char** argv);
