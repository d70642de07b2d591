// SPDX-License-Identifier: Apache-2.0
// What a case's checks throw (<gpuplug/conformance.hpp>): CheckFailure with the file and line
// of the check, Skip, and the expected-error checks behind GPUPLUG_CHECK_THROWS.
#include <exception>
#include <filesystem>
#include <functional>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>

#include "cases.hpp"

namespace gpuplug::conformance {

namespace {
std::string where_text(std::source_location where) {
  const std::filesystem::path file(where.file_name());
  return file.filename().string() + ":" + std::to_string(where.line());
}
}  // namespace

CheckFailure::CheckFailure(const std::string& message, std::source_location where)
    : std::runtime_error(message + " (" + where_text(where) + ")"),
      message_(message),
      file_(where.file_name()),
      line_(where.line()) {}

void fail(const std::string& message, std::source_location where) {
  throw CheckFailure(message, where);
}

void skip(const std::string& reason) { throw Skip(reason); }

bool contains(std::string_view haystack, std::string_view needle) noexcept {
  return haystack.find(needle) != std::string_view::npos;
}

namespace detail {

std::string describe(const gpuplug::Error& e) {
  return "Error(" + to_string(e.status()) + ", \"" + std::string(e.what()) + "\")";
}

gpuplug::Error expect_error(const std::function<void()>& run, std::optional<Status> expected,
                            const char* expr, std::source_location where) {
  const std::string wanted = expected ? "Error(" + to_string(*expected) + ")" : "an Error";
  try {
    run();
  } catch (const gpuplug::Error& e) {
    if (expected && e.status() != *expected) {
      fail(std::string(expr) + " threw " + describe(e) + ", expected " + wanted, where);
    }
    if (e.message().empty())
      fail(std::string(expr) + " threw " + describe(e) + " with an empty message", where);
    return e;
  } catch (const CheckFailure&) {
    throw;
  } catch (const std::exception& e) {
    fail(
        std::string(expr) + " threw a non-gpuplug exception (" + e.what() + "), expected " + wanted,
        where);
  }
  fail(std::string(expr) + " succeeded, expected " + wanted, where);
}

}  // namespace detail

}  // namespace gpuplug::conformance
