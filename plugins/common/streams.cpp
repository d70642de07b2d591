// SPDX-License-Identifier: Apache-2.0
// StreamSet: the live streams of one device around the vendor's create and destroy hooks.
#include "streams.hpp"

#include <mutex>
#include <string>

#include "gpuplug/support/failures.hpp"
#include "gpuplug/support/text.hpp"
#include "plugin_sdk.hpp"

namespace gpuplug::sdk {

std::uint64_t StreamSet::create(Device& device, std::optional<std::uint32_t> flags) {
  // Spelled out: the SDK also compiles against headers older than GPUPLUG_STREAM_NON_BLOCKING.
  constexpr std::uint32_t non_blocking = 1;
  if (flags && *flags > non_blocking)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
         "stream_create_with_flags: unknown flags " + std::to_string(*flags) +
             " (GPUPLUG_STREAM_BLOCKING 0 or GPUPLUG_STREAM_NON_BLOCKING 1)");
  const std::uint64_t stream =
      flags ? device.vendor_stream_create_flags(*flags) : device.vendor_stream_create();
  try {
    if (stream == 0)
      fail(GPUPLUG_STATUS_INTERNAL,
           "the vendor created a stream with the default stream's value 0");
    std::unique_lock lock(mutex_);
    if (!live_.insert(stream).second)
      fail(GPUPLUG_STATUS_INTERNAL,
           "the vendor returned stream " + std::to_string(stream) + ", which is still live");
  } catch (...) {
    if (stream != 0) {
      try {
        device.vendor_stream_destroy(stream);
      } catch (...) {  // the first failure is the one to report
      }
    }
    throw;
  }
  return stream;
}

std::uint64_t StreamSet::adopt(Device& device, void* native) {
  GPUPLUG_EXPECTS(native != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT,
                  "import_stream: the native stream is null (the runtime's default stream is "
                  "stream 0 already)");
  const std::uint64_t stream = device.vendor_import_stream(native);
  try {
    if (stream == 0)
      fail(GPUPLUG_STATUS_INTERNAL, "the vendor imported a stream as the default stream's value 0");
    std::unique_lock lock(mutex_);
    if (live_.contains(stream)) {
      lock.unlock();
      // Not forgotten below: the live stream of that value is the backend's and stays.
      fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
           "import_stream: native stream " + support::hex(reinterpret_cast<std::uintptr_t>(native)) +
               " already is stream " + std::to_string(stream) + " of this backend");
    }
    imported_.reserve(imported_.size() + 1);  // both inserts below or neither
    live_.insert(stream);
    imported_.insert(stream);
  } catch (const Failure& f) {
    if (f.status() == GPUPLUG_STATUS_INTERNAL && stream != 0) {
      try {
        device.vendor_forget_stream(stream);
      } catch (...) {  // the first failure is the one to report
      }
    }
    throw;
  }
  return stream;
}

void StreamSet::check(const char* op, std::uint64_t stream) const {
  if (stream == 0) return;
  std::shared_lock lock(mutex_);
  if (!live_.contains(stream)) {
    lock.unlock();
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT, std::string(op) + ": unknown stream " +
                                              std::to_string(stream) +
                                              " (not created by this backend, or destroyed)");
  }
}

void StreamSet::destroy(Device& device, std::uint64_t stream) {
  GPUPLUG_EXPECTS(stream != 0, GPUPLUG_STATUS_INVALID_ARGUMENT,
                  "stream_destroy: the default stream (0) cannot be destroyed");
  const std::unique_lock gate(destroy_gate_);
  bool imported = false;
  {
    std::unique_lock lock(mutex_);
    if (live_.erase(stream) == 0) {
      lock.unlock();
      fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "stream_destroy: unknown stream " +
                                                std::to_string(stream) +
                                                " (not created by this backend, or destroyed)");
    }
    imported = imported_.erase(stream) != 0;
  }
  if (imported)
    device.vendor_forget_stream(stream);
  else
    device.vendor_stream_destroy(stream);
}

void StreamSet::destroy_all(Device& device) noexcept {
  const std::unique_lock gate(destroy_gate_);
  std::unordered_set<std::uint64_t> streams;
  std::unordered_set<std::uint64_t> imported;
  {
    std::unique_lock lock(mutex_);
    streams.swap(live_);
    imported.swap(imported_);
  }
  for (const std::uint64_t stream : streams) {
    try {
      if (imported.contains(stream))
        device.vendor_forget_stream(stream);
      else
        device.vendor_stream_destroy(stream);
    } catch (...) {
      try {
        device.log(GPUPLUG_LOG_WARNING,
                   "destroy: stream " + std::to_string(stream) +
                       " failed to close: " + support::describe_current_exception());
      } catch (...) {  // no memory for the message: the stream is gone either way
      }
    }
  }
}

std::vector<std::uint64_t> StreamSet::list() const {
  std::shared_lock lock(mutex_);
  return {live_.begin(), live_.end()};
}

}  // namespace gpuplug::sdk
