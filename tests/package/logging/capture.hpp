// SPDX-License-Identifier: Apache-2.0
// Test helpers for the logging applications: what a file descriptor (stdout, stderr) receives
// while a Capture is alive, and the checks each program reports before its exit status.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

namespace logging_test {

/// Redirects file descriptor `fd` (1 or 2) into a temporary file until text() or destruction.
class Capture {
 public:
  explicit Capture(int fd) : fd_(fd), file_(std::tmpfile()) {
    flush();
    saved_ = ::dup(fd_);
    ::dup2(::fileno(file_), fd_);
  }
  ~Capture() {
    restore();
    std::fclose(file_);
  }
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  std::string text() {
    restore();
    std::string out;
    std::rewind(file_);
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, file_)) > 0;) out.append(buf, n);
    return out;
  }

 private:
  static void flush() {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(stdout);
    std::fflush(stderr);
  }
  void restore() {
    if (saved_ < 0) return;
    flush();
    ::dup2(saved_, fd_);
    ::close(saved_);
    saved_ = -1;
  }
  int fd_;
  std::FILE* file_;
  int saved_ = -1;
};

inline std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

/// Counts failed checks; main returns failures() != 0.
class Checks {
 public:
  void expect(bool ok, const std::string& what, const std::string& context) {
    if (ok) return;
    ++failed_;
    std::cerr << "FAILED: " << what << "\n--- in ---\n" << context << "\n---------\n";
  }
  void expect_count(const std::string& text, const std::string& part, std::size_t n,
                    const std::string& where) {
    expect(count(text, part) == n,
           where + " has '" + part + "' " + std::to_string(count(text, part)) +
               " times, expected " + std::to_string(n),
           text);
  }
  int exit_status() const {
    if (failed_ == 0) std::cout << "ok\n";
    return failed_ == 0 ? 0 : 1;
  }

 private:
  int failed_ = 0;
};

}  // namespace logging_test
