// SPDX-License-Identifier: Apache-2.0
// Status names and the one error type of the C++ API.
#include <gpuplug/types.hpp>
#include <utility>

namespace gpuplug {

std::string to_string(Status s) {
  switch (s) {
    case Status::success:
      return "success";
    case Status::invalid_argument:
      return "invalid_argument";
    case Status::out_of_memory:
      return "out_of_memory";
    case Status::not_found:
      return "not_found";
    case Status::unsupported:
      return "unsupported";
    case Status::unavailable:
      return "unavailable";
    case Status::invalid_image:
      return "invalid_image";
    case Status::launch_failed:
      return "launch_failed";
    case Status::device_error:
      return "device_error";
    case Status::internal:
      return "internal";
  }
  return "unknown status " + std::to_string(static_cast<std::int32_t>(s));
}

namespace {
std::string compose_what(const std::string& backend, const std::string& message) {
  return backend.empty() ? message : backend + ": " + message;
}
}  // namespace

Error::Error(Status status, std::string backend, std::string message)
    : std::runtime_error(compose_what(backend, message)),
      status_(status),
      backend_(std::move(backend)),
      message_(std::move(message)) {}

}  // namespace gpuplug
