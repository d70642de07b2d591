// SPDX-License-Identifier: Apache-2.0
// The core's private string and integer hash (wyhash-style); OpCache's tables and bench/ use it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace gpuplug::detail {

// A wyhash-style hash (after Wang Yi's public-domain wyhash, final version 4, with the 48-byte
// three-lane loop dropped because our keys are short): 8-byte reads and a 64x64->128 multiply
// fold, so a 10-20 byte key costs a few nanoseconds, with good avalanche. It is not keyed and
// not meant to resist hash flooding; the tables it serves hold the application's own op names.

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

/// Hash of `len` bytes at `data`, chained from `seed` (hash a pair as hash(b, hash(a))).
inline std::uint64_t hash_bytes(const void* data, std::size_t len,
                                std::uint64_t seed = kHashSecret3) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  seed ^= hash_mum(seed ^ kHashSecret0, kHashSecret1);
  std::uint64_t a = 0;
  std::uint64_t b = 0;
  if (len <= 16) {
    if (len >= 4) {
      const std::size_t step = (len >> 3) << 2;  // 0 for 4..7 bytes, 4 for 8..16 bytes
      a = (hash_read32(p) << 32) | hash_read32(p + step);
      b = (hash_read32(p + len - 4) << 32) | hash_read32(p + len - 4 - step);
    } else if (len > 0) {
      a = (std::uint64_t{p[0]} << 16) | (std::uint64_t{p[len >> 1]} << 8) | p[len - 1];
    }
  } else {
    std::size_t left = len;
    while (left > 16) {
      seed = hash_mum(hash_read64(p) ^ kHashSecret1, hash_read64(p + 8) ^ seed);
      p += 16;
      left -= 16;
    }
    a = hash_read64(p + left - 16);
    b = hash_read64(p + left - 8);
  }
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

}  // namespace gpuplug::detail
