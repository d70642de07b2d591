// SPDX-License-Identifier: Apache-2.0
// EventSet: the live events of one device around the vendor's create and destroy hooks.
#include "events.hpp"

#include <mutex>
#include <string>

#include "gpuplug/support/failures.hpp"
#include "plugin_sdk.hpp"

namespace gpuplug::sdk {

void EventSet::fail_unknown(const char* op, std::uint64_t event) {
  fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
       std::string(op) + ": unknown event " + std::to_string(event) +
           (event == 0 ? " (the null event)" : " (not created by this backend, or destroyed)"));
}

std::uint64_t EventSet::create(Device& device) {
  const std::uint64_t event = device.vendor_event_create();
  try {
    if (event == 0)
      fail(GPUPLUG_STATUS_INTERNAL, "event_create: the vendor created an event with the value 0");
    std::unique_lock lock(mutex_);
    if (!live_.emplace(event, false).second)
      fail(GPUPLUG_STATUS_INTERNAL, "event_create: the vendor returned event " +
                                        std::to_string(event) + ", which is still live");
  } catch (...) {
    if (event != 0) {
      try {
        device.vendor_event_destroy(event);
      } catch (...) {  // the first failure is the one to report
      }
    }
    throw;
  }
  return event;
}

void EventSet::check(const char* op, std::uint64_t event) const {
  std::shared_lock lock(mutex_);
  if (!live_.contains(event)) {
    lock.unlock();
    fail_unknown(op, event);
  }
}

void EventSet::check_recorded(const char* op, std::uint64_t event) const {
  std::shared_lock lock(mutex_);
  const auto it = live_.find(event);
  if (it == live_.end()) {
    lock.unlock();
    fail_unknown(op, event);
  }
  if (!it->second) {
    lock.unlock();
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT, std::string(op) + ": event " + std::to_string(event) +
                                              " was never recorded (record it on a stream first)");
  }
}

void EventSet::mark_recorded(std::uint64_t event) {
  std::unique_lock lock(mutex_);
  if (const auto it = live_.find(event); it != live_.end()) it->second = true;
}

void EventSet::destroy(Device& device, std::uint64_t event) {
  {
    std::unique_lock lock(mutex_);
    if (live_.erase(event) == 0) {
      lock.unlock();
      fail_unknown("event_destroy", event);
    }
  }
  device.vendor_event_destroy(event);
}

void EventSet::destroy_all(Device& device) noexcept {
  std::unordered_map<std::uint64_t, bool> events;
  {
    std::unique_lock lock(mutex_);
    events.swap(live_);
  }
  for (const auto& [event, recorded] : events) {
    try {
      device.vendor_event_destroy(event);
    } catch (...) {
      try {
        device.log(GPUPLUG_LOG_WARNING,
                   "destroy: event " + std::to_string(event) +
                       " failed to close: " + support::describe_current_exception());
      } catch (...) {  // no memory for the message: the event is gone either way
      }
    }
  }
}

}  // namespace gpuplug::sdk
