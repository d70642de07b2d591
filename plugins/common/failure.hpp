// SPDX-License-Identifier: Apache-2.0
// sdk::Failure, sdk::fail and GPUPLUG_EXPECTS: how plugin code reports a status and a message.
#pragma once

#include <gpuplug/abi.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace gpuplug::sdk {

/// The exception plugin code throws to return `status` with `message` across the ABI. The SDK's
/// edge turns it into the slot's status and the calling thread's `last_error`; any other
/// exception becomes GPUPLUG_STATUS_INTERNAL. Messages name the thing and the reason.
class Failure : public std::runtime_error {
 public:
  Failure(gpuplug_status_t status, std::string message)
      : std::runtime_error(std::move(message)), status_(status) {}
  gpuplug_status_t status() const noexcept { return status_; }

 private:
  gpuplug_status_t status_;
};

/// Throws Failure(status, message). Out of line and cold: callers on hot paths stay small.
[[noreturn, gnu::cold, gnu::noinline]] inline void fail(gpuplug_status_t status,
                                                        std::string message) {
  throw Failure(status, std::move(message));
}

}  // namespace gpuplug::sdk

/// Checks a precondition; on failure throws Failure(status, message), which the table adapter
/// turns into the returned status and the calling thread's last_error. Use for argument checks
/// at the top of hooks; the message should name the argument and why it is refused. The message
/// is only built when the check fails.
#define GPUPLUG_EXPECTS(cond, status, message)              \
  do {                                                      \
    if (!(cond)) ::gpuplug::sdk::fail((status), (message)); \
  } while (false)
