// SPDX-License-Identifier: Apache-2.0
// Differential cases: every sample kernel on the backend under test against the host backend and
// the CPU.
#include <cmath>
#include <limits>
#include <utility>

#include "helpers.hpp"

// Tolerances (docs/conformance.md explains them):
//   cast_f32_e4m3, cast_e4m3_f32: bit-exact (every backend compiles kernels/common/e4m3.h).
//   axpy: within 1 ulp of the correctly rounded a*x+y (inputs of one sign: a fused multiply-add
//         and a separate multiply and add differ by at most 1 ulp there).
//   gemm_f32, gemm_a_e4m3: |c - exact| <= K * 2^-23 * sum_k |a_ik * b_kj| per element, twice the
//         classical worst-case bound gamma_K = K*u for any order of summation, fused or not, so
//         tiling and split-K are free; an f16/bf16/TF32 shortcut breaks it. Against the host
//         backend the two bounds add.

namespace gpuplug::conformance::detail {

namespace {

constexpr double unit_roundoff_x2 = 1.0 / (1u << 23);  // 2 * 2^-24

void check_gemm(const std::vector<float>& got, const std::vector<double>& exact,
                const std::vector<double>& magnitude, std::uint32_t n, std::uint32_t k,
                double bound_scale, std::string_view what) {
  GPUPLUG_CHECK_EQ(got.size(), exact.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double bound = bound_scale * k * unit_roundoff_x2 * magnitude[i];
    const double err = std::fabs(static_cast<double>(got[i]) - exact[i]);
    if (!(err <= bound)) {  // also catches NaN: an element never written stays NaN
      std::ostringstream os;
      os.precision(9);
      os << what << " (C = A x B, all row-major): C[" << i / n << "][" << i % n << "] (index "
         << i << ") = " << got[i] << ", exact " << exact[i] << ", error " << err << " > bound "
         << bound;
      fail(os.str());
    }
  }
}

/// Inputs that cover every rounding decision of f32 -> E4M3: specials, saturation, subnormals,
/// ties in both ranges, every code point, the midpoints between neighbours, and random values.
std::vector<float> e4m3_probe_inputs() {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> in = {0.0f,
                           -0.0f,
                           nan,
                           -nan,
                           inf,
                           -inf,
                           448.0f,
                           -448.0f,
                           449.0f,
                           464.0f,
                           465.0f,
                           480.0f,
                           1e9f,
                           -1e9f,
                           3.4e38f,
                           1.0f,
                           1.0625f,
                           1.1875f,
                           -1.0625f,
                           0.5f,
                           0.015625f,
                           0.013671875f,
                           0.001953125f,
                           0.0009765625f,
                           0.0029296875f,
                           -0.0029296875f,
                           1e-30f,
                           -1e-30f,
                           std::numeric_limits<float>::denorm_min(),
                           std::numeric_limits<float>::min()};
  // Every code's value, and the midpoint to the next code of the same sign (a tie).
  for (unsigned code = 0; code < 0x7F; ++code) {
    const float v = reference_e4m3_to_f32(static_cast<std::uint8_t>(code));
    const float next = reference_e4m3_to_f32(static_cast<std::uint8_t>(code + 1));
    in.push_back(v);
    in.push_back(-v);
    if (std::isfinite(next)) {
      const float mid = (v + next) * 0.5f;  // exact: neighbours differ in few bits
      in.push_back(mid);
      in.push_back(-mid);
      in.push_back(std::nextafter(mid, 0.0f));
      in.push_back(std::nextafter(mid, inf));
    }
  }
  const auto random = random_floats(2000, -600.0f, 600.0f, 99);
  in.insert(in.end(), random.begin(), random.end());
  const auto small = random_floats(1000, -0.05f, 0.05f, 100);
  in.insert(in.end(), small.begin(), small.end());
  return in;
}

void diff_axpy(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  GpuBackend& ref = ctx.reference();
  const std::size_t n = 4099;
  const auto x = random_floats(n, 0.001f, 1000.0f, 11);
  const auto y = random_floats(n, 0.001f, 1000.0f, 12);
  const float a = 1.37f;
  const auto got = run_axpy(gpu, a, x, y);
  const InputText inputs = [&](std::size_t i) {
    return "a = " + float_text(a) + ", x = " + float_text(x[i]) + ", y = " + float_text(y[i]);
  };
  check_within_ulps(got, reference_axpy(a, x, y), 1, "axpy vs CPU", inputs);
  check_within_ulps(got, run_axpy(ref, a, x, y), 1, "axpy vs host backend", inputs);
}

void diff_gemm(Context& ctx, std::string_view func, bool a_e4m3) {
  GpuBackend& gpu = ctx.backend();
  GpuBackend& ref = ctx.reference();
  struct Shape {
    std::uint32_t m, n, k;
  };
  // Edges on every side of a 16 x n_tile block, a single row and column, and a deep K.
  for (const Shape s :
       {Shape{37, 70, 129}, Shape{1, 1, 1}, Shape{16, 64, 16}, Shape{3, 130, 517}}) {
    auto a = random_floats(std::size_t{s.m} * s.k, -3.0f, 3.0f, s.m * 7 + s.k);
    const auto b = random_floats(std::size_t{s.k} * s.n, -1.0f, 1.0f, s.n * 13 + s.k);
    if (a_e4m3 && a.size() > 2) {  // saturation and NaN-free extremes of the cast
      a[0] = 500.0f;
      a[1] = -1e6f;
    }
    std::vector<double> magnitude;
    const auto exact = reference_gemm(s.m, s.n, s.k, a, b, a_e4m3, magnitude);
    const std::string shape = std::string(func) + " " + std::to_string(s.m) + "x" +
                              std::to_string(s.n) + "x" + std::to_string(s.k);
    const auto got = run_gemm(gpu, func, s.m, s.n, s.k, a, b);
    check_gemm(got, exact, magnitude, s.n, s.k, 1.0, shape + " vs exact");
    const auto host = run_gemm(ref, func, s.m, s.n, s.k, a, b);
    check_gemm(host, exact, magnitude, s.n, s.k, 1.0, shape + " (host reference) vs exact");
    std::vector<double> host_d(host.begin(), host.end());
    check_gemm(got, host_d, magnitude, s.n, s.k, 2.0, shape + " vs host backend");
  }
}

void diff_gemm_f32(Context& ctx) { diff_gemm(ctx, "gemm_f32", false); }
void diff_gemm_a_e4m3(Context& ctx) { diff_gemm(ctx, "gemm_a_e4m3", true); }

void diff_cast_f32_e4m3(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  GpuBackend& ref = ctx.reference();
  const auto in = e4m3_probe_inputs();
  std::vector<std::uint8_t> want(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) want[i] = reference_f32_to_e4m3(in[i]);
  const auto got = run_cast_f32_e4m3(gpu, in);
  const InputText input = [&](std::size_t i) { return "f32 input " + float_text(in[i]); };
  check_bytes_equal(got, want, "cast_f32_e4m3 vs the reference (e4m3.h)", input);
  check_bytes_equal(got, run_cast_f32_e4m3(ref, in), "cast_f32_e4m3 vs host backend", input);
}

void diff_cast_e4m3_f32(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  GpuBackend& ref = ctx.reference();
  std::vector<std::uint8_t> in(256 * 3);
  for (std::size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<std::uint8_t>(i);  // every code, thrice
  std::vector<float> want(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) want[i] = reference_e4m3_to_f32(in[i]);
  const auto got = run_cast_e4m3_f32(gpu, in);
  const InputText input = [&](std::size_t i) {
    std::ostringstream os;
    os << "E4M3 code 0x" << std::hex << unsigned{in[i]};
    return os.str();
  };
  check_bits_equal(got, want, "cast_e4m3_f32 vs the reference (e4m3.h)", input);
  check_bits_equal(got, run_cast_e4m3_f32(ref, in), "cast_e4m3_f32 vs host backend", input);
  // The signed codes by their literal bits, independently of the reference: the sign is set on
  // the bits, so -0 and -NaN are exact on every backend (a float negate of NaN is not, in PTX).
  const std::pair<std::uint8_t, std::uint32_t> pinned[] = {
      {0x00, 0x00000000u}, {0x80, 0x80000000u}, {0x7F, 0x7FC00000u}, {0xFF, 0xFFC00000u}};
  for (const auto& [code, bits] : pinned) {
    if (float_bits(got[code]) != bits) {
      std::ostringstream os;
      os << "cast_e4m3_f32: code 0x" << std::hex << unsigned{code} << " decodes to 0x"
         << float_bits(got[code]) << ", expected 0x" << bits;
      fail(os.str());
    }
  }
}

const Case cases[] = {
    {"diff_axpy", "axpy within 1 ulp of the CPU and of the host backend", diff_axpy},
    {"diff_gemm_f32",
     "gemm_f32 within K*2^-23*sum|a*b| of exact, on four shapes, and of the host backend",
     diff_gemm_f32},
    {"diff_gemm_a_e4m3",
     "gemm_a_e4m3 (A through E4M3) within the gemm bound of exact and of the host backend",
     diff_gemm_a_e4m3},
    {"diff_cast_f32_e4m3",
     "f32 -> E4M3 bit-exact on specials, ties, subnormals, every code and random values",
     diff_cast_f32_e4m3},
    {"diff_cast_e4m3_f32", "E4M3 -> f32 bit-exact on all 256 codes", diff_cast_e4m3_f32},
};

}  // namespace

std::span<const Case> differential_cases() { return cases; }

}  // namespace gpuplug::conformance::detail
