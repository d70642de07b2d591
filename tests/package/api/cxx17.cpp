// SPDX-License-Identifier: Apache-2.0
// Compiled with -std=c++17 by the test api.cxx17_error, which expects it to fail with
// gpuplug's own message ("gpuplug requires C++20") rather than errors from deep inside a header.
#include <gpuplug/gpuplug.hpp>
