// SPDX-License-Identifier: Apache-2.0
// The core's private string hash (wyhash-style) and key comparison; OpCache's tables and bench/.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace gpuplug::detail {

// A wyhash-style hash (after Wang Yi's public-domain wyhash, final version 4, with the 48-byte
// three-lane loop dropped because our keys are short, and one multiply instead of two for keys
// of up to 16 bytes; docs/PERFORMANCE.md says why). A weaker mix only costs probes: every table
// compares the stored full hash and key. It is not keyed and not meant to resist hash flooding;
// the tables it serves hold the application's own op names.

// The 128-bit product is a GCC/Clang extension on every 64-bit target we build for.
__extension__ typedef unsigned __int128 hash_u128;

inline constexpr std::uint64_t kHashSecret0 = 0xa0761d6478bd642full;
inline constexpr std::uint64_t kHashSecret1 = 0xe7037ed1a0b428dbull;
inline constexpr std::uint64_t kHashSecret2 = 0x8ebc6af09c88c6e3ull;
inline constexpr std::uint64_t kHashSecret3 = 0x589965cc75374cc3ull;

/// The 128-bit product of a and b folded to 64 bits (low ^ high).
inline std::uint64_t hash_mum(std::uint64_t a, std::uint64_t b) noexcept {
  const hash_u128 r = static_cast<hash_u128>(a) * b;
  return static_cast<std::uint64_t>(r) ^ static_cast<std::uint64_t>(r >> 64);
}

inline std::uint64_t hash_read64(const unsigned char* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline std::uint64_t hash_read32(const unsigned char* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// Hash of `len` bytes at `data`, chained from `seed`. Always inlined: a call would cost as much
/// as the hash, and a constant seed folds away.
[[gnu::always_inline]] inline std::uint64_t hash_bytes(const void* data, std::size_t len,
                                                      std::uint64_t seed = kHashSecret3) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  seed ^= hash_mum(seed ^ kHashSecret0, kHashSecret1);
  std::uint64_t a = 0;
  std::uint64_t b = 0;
  if (len <= 16) {
    // Short keys (most op names) take one multiply: two overlapping reads cover every byte, the
    // length is mixed in, and the 128-bit product folds both words into every output bit.
    if (len >= 8) {
      a = hash_read64(p);
      b = hash_read64(p + len - 8);
    } else if (len >= 4) {
      a = hash_read32(p);
      b = hash_read32(p + len - 4);
    } else if (len > 0) {
      a = (std::uint64_t{p[0]} << 16) | (std::uint64_t{p[len >> 1]} << 8) | p[len - 1];
    }
    return hash_mum(a ^ kHashSecret1 ^ (std::uint64_t{len} << 56), b ^ seed);
  }
  // Longer keys: 16 bytes per multiply, then the last 16 bytes and a final fold.
  std::size_t left = len;
  while (left > 16) {
    seed = hash_mum(hash_read64(p) ^ kHashSecret1, hash_read64(p + 8) ^ seed);
    p += 16;
    left -= 16;
  }
  a = hash_read64(p + left - 16);
  b = hash_read64(p + left - 8);
  const hash_u128 r = static_cast<hash_u128>(a ^ kHashSecret1) * static_cast<hash_u128>(b ^ seed);
  a = static_cast<std::uint64_t>(r);
  b = static_cast<std::uint64_t>(r >> 64);
  return hash_mum(a ^ kHashSecret0 ^ len, b ^ kHashSecret1);
}

inline std::uint64_t hash_string(std::string_view s, std::uint64_t seed = kHashSecret3) noexcept {
  return hash_bytes(s.data(), s.size(), seed);
}

/// Hash of one 64-bit integer (a KernelHandle's value).
inline std::uint64_t hash_u64(std::uint64_t x) noexcept {
  return hash_mum(x ^ kHashSecret0, kHashSecret1);
}

/// Hash of the pair (a, b). The two strings are hashed independently and then combined; the
/// combination is not symmetric, and each string's hash mixes in its length, so ("ab", "c") and
/// ("a", "bc") hash apart.
inline std::uint64_t hash_pair(std::string_view a, std::string_view b) noexcept {
  return hash_mum(hash_string(a) ^ kHashSecret0, hash_string(b, kHashSecret2) ^ kHashSecret1);
}

/// a[0, n) == b[0, n), inline for the short keys a cache hit compares: two overlapping word
/// loads cover 4 to 16 bytes, longer keys go word by word. No memcmp call: on a hit the call
/// would cost more than the comparison (docs/PERFORMANCE.md).
[[gnu::always_inline]] inline bool bytes_equal(const char* a, const char* b,
                                               std::size_t n) noexcept {
  const auto* x = reinterpret_cast<const unsigned char*>(a);
  const auto* y = reinterpret_cast<const unsigned char*>(b);
  if (n >= 8) {
    if (n > 16) {
      for (std::size_t i = 0; i + 8 < n; i += 8) {
        if (hash_read64(x + i) != hash_read64(y + i)) return false;
      }
      return hash_read64(x + n - 8) == hash_read64(y + n - 8);
    }
    return ((hash_read64(x) ^ hash_read64(y)) |
            (hash_read64(x + n - 8) ^ hash_read64(y + n - 8))) == 0;
  }
  if (n >= 4) {
    return ((hash_read32(x) ^ hash_read32(y)) |
            (hash_read32(x + n - 4) ^ hash_read32(y + n - 4))) == 0;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (x[i] != y[i]) return false;
  }
  return true;
}

/// The optional a packed word stands for: bit 32 set = present, the low 32 bits = the value
/// (OpCache's n_tile records). libstdc++ lays std::optional<std::uint32_t> out as the value then
/// the `engaged` flag in 8 bytes, which is exactly that word, so a bit_cast builds it for free
/// (why that matters: docs/PERFORMANCE.md). Other libraries take the portable path.
inline std::optional<std::uint32_t> unpack_optional_u32(std::uint64_t packed) noexcept {
  constexpr std::uint64_t kPresent = std::uint64_t{1} << 32;
#if defined(__GLIBCXX__)
  static_assert(sizeof(std::optional<std::uint32_t>) == sizeof(std::uint64_t));
  return std::bit_cast<std::optional<std::uint32_t>>(packed & (kPresent | 0xFFFFFFFFu));
#else
  if ((packed & kPresent) == 0) return std::nullopt;
  return static_cast<std::uint32_t>(packed);
#endif
}

/// The stored key equals the view.
inline bool key_equal(std::string_view stored, std::string_view key) noexcept {
  return stored.size() == key.size() && bytes_equal(stored.data(), key.data(), key.size());
}

}  // namespace gpuplug::detail
