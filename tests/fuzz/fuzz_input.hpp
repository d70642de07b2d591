// SPDX-License-Identifier: Apache-2.0
// A small reader of fuzzer input bytes (a dependency-free subset of libFuzzer's
// FuzzedDataProvider).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace gpuplug::fuzz {

/// Hands out the input front to back; once it runs dry every read returns zeros / empty, so a
/// harness never needs to check the length.
class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  std::size_t remaining() const noexcept { return size_; }

  template <class T>
  T integral() noexcept {
    T v{};
    const std::size_t n = size_ < sizeof v ? size_ : sizeof v;
    std::memcpy(&v, data_, n);
    data_ += n;
    size_ -= n;
    return v;
  }
  bool boolean() noexcept { return (integral<std::uint8_t>() & 1u) != 0; }
  /// Up to `max` bytes, length taken from the input.
  std::string string(std::size_t max) {
    const std::size_t want = integral<std::uint16_t>() % (max + 1);
    const std::size_t n = want < size_ ? want : size_;
    std::string s(reinterpret_cast<const char*>(data_), n);
    data_ += n;
    size_ -= n;
    return s;
  }
  /// Everything that is left.
  std::string rest() {
    std::string s(reinterpret_cast<const char*>(data_), size_);
    data_ += size_;
    size_ = 0;
    return s;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
};

/// A property the code under test broke: print it and abort, which libFuzzer reports as a crash
/// and saves the input for (tests/fuzz/regressions/<target>/ replays it).
[[noreturn]] void broken(const std::string& what);

}  // namespace gpuplug::fuzz
