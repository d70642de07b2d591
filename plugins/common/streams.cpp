// SPDX-License-Identifier: Apache-2.0
// StreamSet: the live streams of one device around the vendor's create and destroy hooks.
#include "streams.hpp"

#include <mutex>
#include <string>

#include "gpuplug/support/failures.hpp"
#include "plugin_sdk.hpp"

namespace gpuplug::sdk {

std::uint64_t StreamSet::create(Device& device) {
  const std::uint64_t stream = device.vendor_stream_create();
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
  {
    std::unique_lock lock(mutex_);
    if (live_.erase(stream) == 0) {
      lock.unlock();
      fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "stream_destroy: unknown stream " +
                                                std::to_string(stream) +
                                                " (not created by this backend, or destroyed)");
    }
  }
  device.vendor_stream_destroy(stream);
}

void StreamSet::destroy_all(Device& device) noexcept {
  std::unordered_set<std::uint64_t> streams;
  {
    std::unique_lock lock(mutex_);
    streams.swap(live_);
  }
  for (const std::uint64_t stream : streams) {
    try {
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
