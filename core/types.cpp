// SPDX-License-Identifier: Apache-2.0
// Status names and the one error type of the C++ API.
#include <gpuplug/types.hpp>
#include <cstdio>
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
    case Status::capture_invalidated:
      return "capture_invalidated";
  }
  return "unknown status " + std::to_string(static_cast<std::int32_t>(s));
}

std::string to_string(DeviceClass c) {
  switch (c) {
    case DeviceClass::unknown:
      return "unknown";
    case DeviceClass::discrete_gpu:
      return "discrete_gpu";
    case DeviceClass::integrated_gpu:
      return "integrated_gpu";
    case DeviceClass::accelerator:
      return "accelerator";
    case DeviceClass::cpu:
      return "cpu";
    case DeviceClass::emulator:
      return "emulator";
  }
  return "unknown";
}

std::string to_string(const PciAddress& a) {
  char text[32];
  std::snprintf(text, sizeof text, "%04x:%02x:%02x.%x", a.domain & 0xFFFFFFFFu, a.bus & 0xFFu,
                a.device & 0xFFu, a.function & 0xFu);
  return text;
}

namespace {

std::string compose_what(const std::string& backend, const std::string& operation,
                         const std::string& message) {
  std::string text;
  for (const std::string* part : {&backend, &operation}) {
    if (!part->empty()) text.append(*part).append(": ");
  }
  return text + message;
}

/// `message` without a leading "<operation>: ": plugins often start their messages with the
/// operation, which the Error carries as a field and shows once in what().
std::string strip_operation(std::string message, const std::string& operation) {
  while (!operation.empty() && message.size() > operation.size() + 1 &&
         message.compare(0, operation.size(), operation) == 0 &&
         message.compare(operation.size(), 2, ": ") == 0) {
    message.erase(0, operation.size() + 2);
  }
  return message;
}

}  // namespace

Error::Error(Status status, std::string backend, std::string message)
    : Error(status, std::move(backend), std::string(), std::move(message)) {}

Error::Error(Status status, std::string backend, std::string operation, std::string message)
    : std::runtime_error(compose_what(backend, operation, strip_operation(message, operation))),
      status_(status),
      backend_(std::move(backend)),
      operation_(std::move(operation)),
      message_(strip_operation(std::move(message), operation_)) {}

}  // namespace gpuplug
