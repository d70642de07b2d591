// SPDX-License-Identifier: Apache-2.0
// The host device's identity (ABI 1.1): a stable UUID derived from the machine, the architecture
// with its SIMD level, and the kernel release.
#include <fcntl.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "device.hpp"

namespace gpuplug::host {
namespace {

// ---- SHA-256 (FIPS 180-4) ------------------------------------------------------------------
// Why a cryptographic hash: machine-id is meant to stay private to the machine (machine-id(5):
// "should be considered confidential"; applications are to derive their own id from it with a
// one-way function, as sd_id128_get_machine_app_specific does). The UUID gpuplug prints and
// logs must not give the machine-id away; a plain FNV or CRC would.

constexpr std::array<std::uint32_t, 64> kRound = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr std::uint32_t rotr(std::uint32_t x, int n) noexcept { return (x >> n) | (x << (32 - n)); }

void sha256_block(std::array<std::uint32_t, 8>& h, const unsigned char* p) noexcept {
  std::array<std::uint32_t, 64> w{};
  for (int i = 0; i < 16; ++i)
    w[i] = (std::uint32_t{p[4 * i]} << 24) | (std::uint32_t{p[4 * i + 1]} << 16) |
           (std::uint32_t{p[4 * i + 2]} << 8) | std::uint32_t{p[4 * i + 3]};
  for (int i = 16; i < 64; ++i) {
    const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int i = 0; i < 64; ++i) {
    const std::uint32_t t1 =
        k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i];
    const std::uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

}  // namespace

std::array<unsigned char, 32> sha256(std::string_view data) noexcept {
  std::array<std::uint32_t, 8> h = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  std::size_t n = data.size();
  for (; n >= 64; n -= 64, p += 64) sha256_block(h, p);
  std::array<unsigned char, 128> tail{};
  for (std::size_t i = 0; i < n; ++i) tail[i] = p[i];
  tail[n] = 0x80;
  const std::size_t blocks = n + 9 <= 64 ? 1 : 2;
  const std::uint64_t bits = static_cast<std::uint64_t>(data.size()) * 8;
  for (int i = 0; i < 8; ++i)
    tail[blocks * 64 - 1 - i] = static_cast<unsigned char>(bits >> (8 * i));
  for (std::size_t b = 0; b < blocks; ++b) sha256_block(h, tail.data() + 64 * b);
  std::array<unsigned char, 32> out{};
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<unsigned char>(h[i] >> (24 - 8 * j));
  return out;
}

namespace {

/// The 32 lower-case hex digits of machine-id(5) at `path`, or "" when the file is missing, too
/// long, or not in that form. Read with a bound: at most 64 bytes, whatever the file holds.
std::string read_machine_id(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return {};
  char buffer[64];
  std::size_t size = 0;
  while (size < sizeof buffer) {
    const ssize_t n = ::read(fd, buffer + size, sizeof buffer - size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    size += static_cast<std::size_t>(n);
  }
  ::close(fd);
  std::string_view text(buffer, size);
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  if (text.size() != 32) return {};
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return {};
  // All zero is not an id (an image built without one, or "uninitialized" written over it).
  if (text.find_first_not_of('0') == std::string_view::npos) return {};
  return std::string(text);
}

}  // namespace

std::string host_uuid(std::string_view cpu_model) {
  // /etc/machine-id, else D-Bus's copy (older systems and some containers have only that).
  std::string id = read_machine_id("/etc/machine-id");
  if (id.empty()) id = read_machine_id("/var/lib/dbus/machine-id");
  if (id.empty()) return {};
  // Keyed by gpuplug and the CPU model: another application's id derived from the same
  // machine-id differs, and a machine image moved to another CPU gets another device id.
  std::string input = "gpuplug host device v1";
  input.push_back('\0');
  input += id;
  input.push_back('\0');
  input += cpu_model;
  std::array<unsigned char, 32> d = sha256(input);
  // RFC 9562 UUIDv8 (a vendor-specific layout): version 8, variant 10.
  d[6] = static_cast<unsigned char>((d[6] & 0x0f) | 0x80);
  d[8] = static_cast<unsigned char>((d[8] & 0x3f) | 0x80);
  char out[37];
  std::snprintf(out, sizeof out,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", d[0], d[1],
                d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9], d[10], d[11], d[12], d[13], d[14],
                d[15]);
  return out;
}

std::string host_arch() {
  std::string arch = machine_arch();
#if defined(__x86_64__)
  // The psABI's micro-architecture levels, from what this CPU and OS support (the builtins
  // check OS support for the AVX state too): what a host kernel built with -march=x86-64-vN
  // needs. No __builtin_cpu_init: libgcc's constructor has filled the table by now, and calling
  // it here would only read it again.
  const bool v2 = __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("ssse3") &&
                  __builtin_cpu_supports("popcnt");
  const bool v3 = v2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2") &&
                  __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi");
  const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512vl");
  if (arch == "x86_64") {
    if (v4) return arch + "-v4";
    if (v3) return arch + "-v3";
    if (v2) return arch + "-v2";
  }
#endif
  return arch;
}

std::string kernel_release() {
  utsname u{};
  if (::uname(&u) != 0) return {};
  u.release[sizeof u.release - 1] = '\0';
  return u.release;
}

}  // namespace gpuplug::host
