// SPDX-License-Identifier: Apache-2.0
// The shared E4M3 conversion (kernels/common/e4m3.h) against a hand-checked reference table, the
// exact bits of every decoded code, and NVIDIA's cuda_fp8.h host conversion over every f32.
#define BOOST_TEST_MODULE e4m3
#include <algorithm>
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "e4m3.h"

#ifdef GPUPLUG_TEST_CUDA_FP8
#include <cuda_fp8.h>
#endif

namespace {

float from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

struct Case {
  float in;
  std::uint8_t out;
  const char* what;
};

// Unit of the subnormal range: 2^-9; smallest normal 2^-6 = 0x08; 1.0 = 0x38; max 448 = 0x7E.
const float u = std::ldexp(1.0f, -9);
const Case kTable[] = {
    {from_bits(0x7FC00000u), 0x7F, "quiet NaN"},
    {from_bits(0xFFC00000u), 0x7F, "negative NaN: the canonical 0x7F, as cuda_fp8.h"},
    {from_bits(0x7F800001u), 0x7F, "signalling NaN"},
    {from_bits(0xFF800001u), 0x7F, "negative signalling NaN"},
    {std::numeric_limits<float>::infinity(), 0x7E, "+inf saturates"},
    {-std::numeric_limits<float>::infinity(), 0xFE, "-inf saturates"},
    {1.0e9f, 0x7E, "+overflow saturates"},
    {-1.0e9f, 0xFE, "-overflow saturates"},
    {464.0f, 0x7E, "between 448 and the NaN code: saturates"},
    {500.0f, 0x7E, "past 448"},
    {448.0f, 0x7E, "+448 exact"},
    {-448.0f, 0xFE, "-448 exact"},
    {440.0f, 0x7E, "above the 416/448 midpoint rounds up"},
    {432.0f, 0x7E, "416/448 tie goes to even mantissa (448)"},
    {420.0f, 0x7D, "below the midpoint rounds down to 416"},
    {240.0f, 0x77, "240 = 1.875 * 2^7"},
    {0.0f, 0x00, "+0"},
    {-0.0f, 0x80, "-0 keeps its sign"},
    {1.0f, 0x38, "1"},
    {-1.0f, 0xB8, "-1"},
    {0.5f, 0x30, "0.5"},
    {1.0625f, 0x38, "1/1.125 tie goes to even (1)"},
    {1.1875f, 0x3A, "1.125/1.25 tie goes to even (1.25)"},
    {1.0626f, 0x39, "just above the tie rounds up"},
    {1.9375f, 0x40, "tie carrying into the exponent (2.0)"},
    {-1.0625f, 0xB8, "negative tie to even"},
    {std::ldexp(1.0f, -6), 0x08, "smallest normal 2^-6"},
    {u, 0x01, "smallest subnormal 2^-9"},
    {-u, 0x81, "negative smallest subnormal"},
    {0.5f * u, 0x00, "half the smallest subnormal: tie to even (0)"},
    {-0.5f * u, 0x80, "negative half subnormal: -0"},
    {0.75f * u, 0x01, "0.75 units rounds to 1"},
    {0.25f * u, 0x00, "0.25 units rounds to 0"},
    {1.5f * u, 0x02, "1.5 units: tie to even (2)"},
    {2.5f * u, 0x02, "2.5 units: tie to even (2)"},
    {7.0f * u, 0x07, "largest subnormal"},
    {7.5f * u, 0x08, "7.5 units: tie to even carries into the smallest normal"},
    {from_bits(0x00000001u), 0x00, "f32 subnormal flushes to +0"},
    {from_bits(0x80000001u), 0x80, "negative f32 subnormal flushes to -0"},
    {1.0e-10f, 0x00, "far below the subnormal range"},
};

}  // namespace

BOOST_AUTO_TEST_CASE(f32_to_e4m3_matches_the_reference_table) {
  for (const Case& c : kTable) {
    BOOST_TEST_CONTEXT(c.what << " (" << c.in << ")") {
      BOOST_TEST(static_cast<unsigned>(gpuplug_f32_to_e4m3(c.in)) == static_cast<unsigned>(c.out));
    }
  }
}

BOOST_AUTO_TEST_CASE(e4m3_to_f32_decodes_reference_codes) {
  BOOST_TEST(gpuplug_e4m3_to_f32(0x7E) == 448.0f);
  BOOST_TEST(gpuplug_e4m3_to_f32(0xFE) == -448.0f);
  BOOST_TEST(gpuplug_e4m3_to_f32(0x38) == 1.0f);
  BOOST_TEST(gpuplug_e4m3_to_f32(0x08) == std::ldexp(1.0f, -6));
  BOOST_TEST(gpuplug_e4m3_to_f32(0x07) == 7.0f * u);
  BOOST_TEST(gpuplug_e4m3_to_f32(0x01) == u);
  BOOST_TEST(gpuplug_e4m3_to_f32(0x00) == 0.0f);
  BOOST_TEST(!std::signbit(gpuplug_e4m3_to_f32(0x00)));
  BOOST_TEST(std::signbit(gpuplug_e4m3_to_f32(0x80)));
  BOOST_TEST(gpuplug_e4m3_to_f32(0x80) == 0.0f);
  BOOST_TEST(std::isnan(gpuplug_e4m3_to_f32(0x7F)));
  BOOST_TEST(std::isnan(gpuplug_e4m3_to_f32(0xFF)));
}

std::uint32_t bits_of(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

BOOST_AUTO_TEST_CASE(signed_zero_and_nan_codes_decode_to_exact_bits) {
  // The sign is an integer OR, so -0 and -NaN come out with exactly these bits on every backend.
  BOOST_TEST(bits_of(gpuplug_e4m3_to_f32(0x00)) == 0x00000000u);
  BOOST_TEST(bits_of(gpuplug_e4m3_to_f32(0x80)) == 0x80000000u);
  BOOST_TEST(bits_of(gpuplug_e4m3_to_f32(0x7F)) == 0x7FC00000u);
  BOOST_TEST(bits_of(gpuplug_e4m3_to_f32(0xFF)) == 0xFFC00000u);
}

BOOST_AUTO_TEST_CASE(every_code_decodes_to_the_bits_of_its_value) {
  // An independent decode: (-1)^s * m * 2^-9 (e = 0) or (8 + m) * 2^(e - 10), in double (exact),
  // the sign set on the bits; NaN codes as above.
  for (unsigned code = 0; code < 256; ++code) {
    const unsigned e = (code >> 3) & 0xFu;
    const unsigned m = code & 0x7u;
    std::uint32_t want;
    if (e == 0xFu && m == 0x7u) {
      want = 0x7FC00000u;
    } else {
      const double magnitude =
          e == 0 ? std::ldexp(double(m), -9) : std::ldexp(8.0 + m, int(e) - 10);
      want = bits_of(static_cast<float>(magnitude));
    }
    want |= (code & 0x80u) ? 0x80000000u : 0u;
    BOOST_TEST(bits_of(gpuplug_e4m3_to_f32(static_cast<std::uint8_t>(code))) == want,
               "code 0x" << std::hex << code);
  }
}

BOOST_AUTO_TEST_CASE(every_non_nan_code_round_trips) {
  int checked = 0;
  for (unsigned code = 0; code < 256; ++code) {
    if ((code & 0x7Fu) == 0x7Fu) continue;  // the two NaN codes
    const float f = gpuplug_e4m3_to_f32(static_cast<std::uint8_t>(code));
    BOOST_TEST_CONTEXT("code 0x" << std::hex << code) {
      BOOST_TEST(std::isfinite(f));
      BOOST_TEST(static_cast<unsigned>(gpuplug_f32_to_e4m3(f)) == code);
    }
    ++checked;
  }
  BOOST_TEST(checked == 254);  // 256 codes less +NaN and -NaN
}

BOOST_AUTO_TEST_CASE(decoded_values_are_monotonic) {
  // Positive codes 0x00..0x7E increase strictly: the encoding is sign-magnitude, ordered.
  for (unsigned code = 1; code <= 0x7E; ++code)
    BOOST_TEST(gpuplug_e4m3_to_f32(static_cast<std::uint8_t>(code)) >
               gpuplug_e4m3_to_f32(static_cast<std::uint8_t>(code - 1)));
}

BOOST_AUTO_TEST_CASE(midpoints_between_neighbours_round_to_even) {
  // Exhaustive tie check: the midpoint of every pair of adjacent positive codes goes to the
  // code with the even mantissa, and a hair above or below goes to the nearer one.
  for (unsigned code = 0; code < 0x7E; ++code) {
    const float lo = gpuplug_e4m3_to_f32(static_cast<std::uint8_t>(code));
    const float hi = gpuplug_e4m3_to_f32(static_cast<std::uint8_t>(code + 1));
    const float mid = lo + (hi - lo) / 2;  // exact: few significant bits
    const unsigned even = (code & 1u) == 0 ? code : code + 1;
    BOOST_TEST_CONTEXT("between 0x" << std::hex << code << " and 0x" << code + 1) {
      BOOST_TEST(static_cast<unsigned>(gpuplug_f32_to_e4m3(mid)) == even);
      BOOST_TEST(static_cast<unsigned>(gpuplug_f32_to_e4m3(std::nextafter(mid, 0.0f))) == code);
      BOOST_TEST(static_cast<unsigned>(gpuplug_f32_to_e4m3(std::nextafter(mid, 1000.0f))) ==
                 code + 1);
      BOOST_TEST(static_cast<unsigned>(gpuplug_f32_to_e4m3(-mid)) == (even | 0x80u));
    }
  }
}

// The encoder against NVIDIA's own host conversion (cuda_fp8.h, __NV_SATFINITE, __NV_E4M3) on all
// 2^32 f32 bit patterns, split over the machine's threads. Skipped without a CUDA toolkit.
BOOST_AUTO_TEST_CASE(encoder_equals_cuda_fp8_on_every_f32) {
#ifndef GPUPLUG_TEST_CUDA_FP8
  BOOST_TEST_MESSAGE("skipped: no CUDA toolkit (cuda_fp8.h) at configure time");
#else
  const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 64u);
  std::atomic<std::uint64_t> mismatches{0};
  std::atomic<std::uint32_t> first{0xFFFFFFFFu};
  // Under a sanitizer every pattern would take minutes on two cores: there the sweep takes
  // every 61st pattern (an odd stride visits every exponent and low mantissa bit), and the
  // plain build takes them all.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  constexpr std::uint64_t stride = 61;
#else
  constexpr std::uint64_t stride = 1;
#endif
  auto sweep = [&](std::uint64_t begin, std::uint64_t end) {
    std::uint64_t local = 0;
    for (std::uint64_t i = begin; i < end; i += stride) {
      const float f = from_bits(static_cast<std::uint32_t>(i));
      if (gpuplug_f32_to_e4m3(f) != __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3)) {
        if (local++ == 0) {
          std::uint32_t seen = first.load();
          while (i < seen && !first.compare_exchange_weak(seen, static_cast<std::uint32_t>(i))) {
          }
        }
      }
    }
    mismatches += local;
  };
  const std::uint64_t total = std::uint64_t{1} << 32;
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back(sweep, total * t / threads, total * (t + 1) / threads);
  for (std::thread& t : pool) t.join();
  BOOST_TEST(mismatches.load() == 0u, "first mismatch at f32 bits 0x" << std::hex << first.load());
  BOOST_TEST_MESSAGE("2^32 f32 values (stride " << stride << ") on " << threads << " threads: " << mismatches.load()
                                           << " mismatches");
#endif
}
