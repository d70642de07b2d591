// SPDX-License-Identifier: Apache-2.0
// error_of(): runs a callable that must throw gpuplug::Error and returns that Error, so a test can
// check what it names. The check most error tests make, after contains().
#pragma once

#include <boost/test/unit_test.hpp>
#include <gpuplug/gpuplug.hpp>
#include <optional>
#include <utility>

namespace gpuplug::test {

/// The Error `f` throws; with `status`, also checks its status. Nothing thrown fails the test
/// case (and returns an Error of Status::success, which no check expects).
template <class F>
Error error_of(F&& f, std::optional<Status> status = std::nullopt) {
  try {
    std::forward<F>(f)();
  } catch (const Error& e) {
    if (status) BOOST_TEST(e.status() == *status, e.what());
    return e;
  }
  if (status) {
    BOOST_FAIL("expected gpuplug::Error(" << to_string(*status) << ")");
  } else {
    BOOST_FAIL("expected gpuplug::Error");
  }
  return Error(Status::success, "", "");
}

}  // namespace gpuplug::test
