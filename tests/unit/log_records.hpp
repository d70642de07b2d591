// SPDX-License-Identifier: Apache-2.0
// LogRecords: collects the records gpuplug logs (through set_log_callback) for a test's scope.
#pragma once

#include <gpuplug/log.hpp>
#include <mutex>
#include <string>
#include <vector>

namespace gpuplug::test {

struct LogRecord {
  LogLevel level;
  std::string channel;
  std::string message;
};

/// Collects what the callback receives; restores the default route and the level on exit.
struct LogRecords {
  LogRecords() : old_level(log_level()) {
    set_log_callback([this](LogLevel l, std::string_view c, std::string_view m) {
      std::lock_guard lock(mutex);
      records.push_back({l, std::string(c), std::string(m)});
    });
  }
  ~LogRecords() {
    set_log_callback({});
    set_log_level(old_level);
  }
  LogRecords(const LogRecords&) = delete;
  LogRecords& operator=(const LogRecords&) = delete;
  std::vector<LogRecord> take() {
    std::lock_guard lock(mutex);
    return std::move(records);
  }
  LogLevel old_level;
  std::mutex mutex;
  std::vector<LogRecord> records;
};

}  // namespace gpuplug::test
