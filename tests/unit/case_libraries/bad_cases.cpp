// SPDX-License-Identifier: Apache-2.0
// Case libraries with one mistake each, compiled once per BAD_* definition (CMakeLists.txt), for
// tests/scripts/user_cases.sh: `gpuplug check --cases` must refuse each, naming the library and
// the mistake, or (BAD_FAILING) run it and print the failure with its worst element.
#include <gpuplug/conformance.hpp>
#include <vector>

namespace conf = gpuplug::conformance;

namespace {
[[maybe_unused]] void nothing(conf::Context&) {}

// A differential check that fails: element 2 is off by far more than the tolerance, element 1 by
// a little; the message must name element 2, both values and the inputs.
[[maybe_unused]] void off_by_some(conf::Context&) {
  const std::vector<float> want = {1.0f, 2.0f, 3.0f, 4.0f};
  const std::vector<float> got = {1.0f, 2.001f, 3.5f, 4.0f};
  conf::check_close(got, want, conf::Tolerance{.abs = 1e-6, .rel = 1e-6}, "my_kernel vs CPU",
                    [](std::size_t i) { return "x = " + std::to_string(i); });
}
}  // namespace

#if defined(BAD_NAME)
GPUPLUG_CONFORMANCE_CASES({"Bad-Name", "a name that is not snake_case", nothing})
#elif defined(BAD_DUPLICATE)
GPUPLUG_CONFORMANCE_CASES({"launch_axpy", "the name of a built-in case", nothing})
#elif defined(BAD_NO_RUN)
GPUPLUG_CONFORMANCE_CASES({"no_run_function", "a case without a function", nullptr})
#elif defined(BAD_FAILING)
GPUPLUG_CONFORMANCE_CASES({"user_passes", "does nothing, and passes", nothing},
                          {"user_off_by_some", "a differential check that fails", off_by_some})
#elif defined(BAD_NO_ENTRY)
// No GPUPLUG_CONFORMANCE_CASES: a library that lists nothing.
extern "C" __attribute__((visibility("default"))) void not_the_entry() {}
#endif
