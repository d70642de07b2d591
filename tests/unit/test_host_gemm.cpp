// SPDX-License-Identifier: Apache-2.0
// The host gemm module's kernels one by one: each instruction set's kernel (forced with
// GPUPLUG_HOST_GEMM_ISA, skipped where the CPU lacks it) against a double-precision reference at
// shapes that cut every tile edge, the E4M3 route bit for bit, and the choice at load. The module
// is loaded with dlopen and its blocks called directly, as the host executor calls them.

#define BOOST_TEST_MODULE host_gemm
#include <dlfcn.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "e4m3.h"
#include "gemm_block.hpp"
#include <gpuplug/abi.h>

namespace fs = std::filesystem;

namespace {

const fs::path kModule = fs::path(GPUPLUG_TEST_KERNEL_DIR) / "host" / "gemm.so";

using KernelFn = void (*)(const gpuplug_host_block_t*, void* const*);

bool cpu_runs(const std::string& isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (isa == "avx512") return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  if (isa == "avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return isa == "portable";
}

std::uint32_t isa_code(const std::string& isa) {
  return isa == "avx512" ? 2u : isa == "avx2" ? 1u : 0u;
}

/// The module loaded afresh with GPUPLUG_HOST_GEMM_ISA set to `isa` (unset when empty): a copy
/// under a name of its own, so that its load-time choice runs again.
class Module {
 public:
  explicit Module(const std::string& isa) {
    const auto dir = fs::temp_directory_path() / ("gpuplug-test-host-gemm-" + std::to_string(getpid()));
    fs::create_directories(dir);
    path_ = dir / ("gemm-" + (isa.empty() ? std::string("auto") : isa) + "-" +
                   std::to_string(counter_++) + ".so");
    fs::copy_file(kModule, path_, fs::copy_options::overwrite_existing);
    if (isa.empty())
      unsetenv("GPUPLUG_HOST_GEMM_ISA");
    else
      setenv("GPUPLUG_HOST_GEMM_ISA", isa.c_str(), 1);
    handle_ = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
    unsetenv("GPUPLUG_HOST_GEMM_ISA");
    BOOST_REQUIRE_MESSAGE(handle_ != nullptr, "dlopen " << path_ << ": " << dlerror());
  }
  ~Module() {
    if (handle_ != nullptr) dlclose(handle_);
    std::error_code ec;
    fs::remove(path_, ec);
  }
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  template <class T>
  T* symbol(const char* name) const {
    void* p = dlsym(handle_, name);
    BOOST_REQUIRE_MESSAGE(p != nullptr, "gemm.so has no " << name);
    return reinterpret_cast<T*>(p);
  }
  std::uint32_t u32(const char* name) const { return *symbol<const std::uint32_t>(name); }

  /// Runs every block of `func` over C = A x B with the published launch rule.
  void gemm(const char* func, std::uint32_t m, std::uint32_t n, std::uint32_t k,
            const std::vector<float>& a, const std::vector<float>& b, std::vector<float>& c) const {
    const auto fn = reinterpret_cast<KernelFn>(symbol<void>(func));
    const std::uint32_t n_tile = u32((std::string(func) + "_n_tile").c_str());
    std::uint64_t pa = reinterpret_cast<std::uintptr_t>(a.data());
    std::uint64_t pb = reinterpret_cast<std::uintptr_t>(b.data());
    std::uint64_t pc = reinterpret_cast<std::uintptr_t>(c.data());
    void* params[] = {&m, &n, &k, &pa, &pb, &pc};
    gpuplug_host_block_t block{};
    block.grid_dim = {(n + n_tile - 1) / n_tile, (m + 15) / 16, 1};
    block.block_dim = {16, 16, 1};
    for (std::uint32_t y = 0; y < block.grid_dim.y; ++y) {
      for (std::uint32_t x = 0; x < block.grid_dim.x; ++x) {
        block.block_idx = {x, y, 0};
        fn(&block, params);
      }
    }
  }

 private:
  static inline int counter_ = 0;
  fs::path path_;
  void* handle_ = nullptr;
};

std::vector<float> random_floats(std::size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

float round_e4m3_reference(float x) { return gpuplug_e4m3_to_f32(gpuplug_f32_to_e4m3(x)); }

/// Checks C against the exact product within the bound of f32 recursive summation in any order,
/// k * 2u * sum |a b| (the bound docs/kernels.md states), every element written.
void check_product(const std::string& what, std::uint32_t m, std::uint32_t n, std::uint32_t k,
                   const std::vector<float>& a, const std::vector<float>& b,
                   const std::vector<float>& c, bool a_e4m3) {
  const double u2 = std::ldexp(1.0, -23);
  std::size_t bad = 0;
  for (std::uint32_t i = 0; i < m; ++i) {
    for (std::uint32_t j = 0; j < n; ++j) {
      double sum = 0.0;
      double mag = 0.0;
      for (std::uint32_t p = 0; p < k; ++p) {
        float av = a[std::size_t{i} * k + p];
        if (a_e4m3) av = round_e4m3_reference(av);
        const double prod = static_cast<double>(av) * b[std::size_t{p} * n + j];
        sum += prod;
        mag += std::fabs(prod);
      }
      const double got = c[std::size_t{i} * n + j];
      const double err = std::fabs(got - sum);
      if (!(err <= k * u2 * mag) && bad++ < 5) {  // NaN (an unwritten element) fails too
        BOOST_ERROR(what << ": C[" << i << "][" << j << "] = " << got << ", exact " << sum
                         << ", error " << err << " > " << k * u2 * mag);
      }
    }
  }
  BOOST_TEST(bad == 0u, what << ": " << bad << " elements outside the bound");
}

const char* const kIsas[] = {"portable", "avx2", "avx512"};

struct Shape {
  std::uint32_t m, n, k;
};
// Edges of the 16 x n_tile block, of the micro-kernels' strips and of the K panels (256), a
// single element, K = 0 and shapes from the differential cases.
const Shape kShapes[] = {{1, 1, 1},     {17, 33, 100}, {33, 17, 255},  {100, 255, 33},
                         {16, 64, 256}, {15, 65, 257}, {64, 64, 513},  {37, 70, 129},
                         {3, 130, 517}, {5, 7, 0},     {1, 200, 1},    {200, 1, 3}};

}  // namespace

BOOST_AUTO_TEST_CASE(every_kernel_matches_the_reference_at_odd_shapes) {
  for (const std::string isa : kIsas) {
    if (!cpu_runs(isa)) {
      BOOST_TEST_MESSAGE("skipped " << isa << ": this CPU cannot run it");
      continue;
    }
    const Module module(isa);
    BOOST_TEST(module.u32("gemm_host_isa") == isa_code(isa), isa << " kernel in use");
    for (const Shape s : kShapes) {
      const auto a = random_floats(std::size_t{s.m} * s.k, -3.0f, 3.0f, s.m * 7 + s.k);
      const auto b = random_floats(std::size_t{s.k} * s.n, -1.0f, 1.0f, s.n * 13 + s.k);
      for (const bool e4m3 : {false, true}) {
        std::vector<float> c(std::size_t{s.m} * s.n, std::numeric_limits<float>::quiet_NaN());
        module.gemm(e4m3 ? "gemm_a_e4m3" : "gemm_f32", s.m, s.n, s.k, a, b, c);
        check_product(isa + (e4m3 ? " gemm_a_e4m3 " : " gemm_f32 ") + std::to_string(s.m) + "x" +
                          std::to_string(s.n) + "x" + std::to_string(s.k),
                      s.m, s.n, s.k, a, b, c, e4m3);
      }
    }
  }
}

// With K = 1 and B = 1, C is A as the kernel rounded it: every kernel must round exactly as
// kernels/common/e4m3.h does (specials, saturation, subnormals, ties), a zero's sign aside (the
// sum starts at +0).
BOOST_AUTO_TEST_CASE(e4m3_route_rounds_like_the_shared_conversion) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> a = {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                          448.0f, 464.0f, 464.1f, 500.0f, -1e6f, 1e-30f, std::ldexp(1.0f, -6),
                          std::ldexp(1.0f, -9), std::ldexp(1.0f, -10), std::ldexp(1.5f, -10),
                          std::ldexp(1.0f, -127)};
  for (unsigned code = 0; code < 256; ++code) {  // every code and the midpoints around it
    const float v = gpuplug_e4m3_to_f32(static_cast<std::uint8_t>(code));
    const float next = gpuplug_e4m3_to_f32(static_cast<std::uint8_t>(code + 1));
    a.push_back(v);
    if (std::isfinite(v) && std::isfinite(next) && (code & 0x7Fu) < 0x7Eu) {
      const float mid = (v + next) / 2;
      a.insert(a.end(), {mid, std::nextafter(mid, v), std::nextafter(mid, next)});
    }
  }
  const auto noise = random_floats(4096, -600.0f, 600.0f, 5);
  a.insert(a.end(), noise.begin(), noise.end());
  const auto m = static_cast<std::uint32_t>(a.size());
  const std::vector<float> b = {1.0f};
  for (const std::string isa : kIsas) {
    if (!cpu_runs(isa)) continue;
    const Module module(isa);
    std::vector<float> c(m, -1.0f);
    module.gemm("gemm_a_e4m3", m, 1, 1, a, b, c);
    std::size_t bad = 0;
    for (std::uint32_t i = 0; i < m; ++i) {
      const float want = round_e4m3_reference(a[i]);
      const bool same = std::isnan(want) ? std::isnan(c[i]) : c[i] == want;
      if (!same && bad++ < 5) BOOST_ERROR(isa << ": " << a[i] << " -> " << c[i] << ", want " << want);
    }
    BOOST_TEST(bad == 0u, isa);
  }
}

// The branch-free rounding the vector kernels pack A with, against e4m3.h on every 61st f32 bit
// pattern (all exponents, signs and NaN payloads) bit for bit.
BOOST_AUTO_TEST_CASE(packing_rounding_equals_the_shared_conversion_bit_for_bit) {
  std::size_t bad = 0;
  for (std::uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 61) {
    const auto b32 = static_cast<std::uint32_t>(bits);
    float x;
    std::memcpy(&x, &b32, sizeof x);
    const float got = gpuplug::host_gemm::round_e4m3(x);
    const float want = round_e4m3_reference(x);
    std::uint32_t g, w;
    std::memcpy(&g, &got, sizeof g);
    std::memcpy(&w, &want, sizeof w);
    if (g != w && bad++ < 5) BOOST_ERROR(std::hex << "0x" << b32 << " -> 0x" << g << ", want 0x" << w);
  }
  BOOST_TEST(bad == 0u);
}

BOOST_AUTO_TEST_CASE(the_best_kernel_unless_one_is_forced) {
  const std::uint32_t best = cpu_runs("avx512") ? 2u : cpu_runs("avx2") ? 1u : 0u;
  BOOST_TEST(Module("").u32("gemm_host_isa") == best);
  // A name that is no kernel, or a kernel the CPU lacks, is reported on stderr; the best runs.
  BOOST_TEST(Module("sse9").u32("gemm_host_isa") == best);
  for (const std::string isa : kIsas) {
    if (!cpu_runs(isa)) BOOST_TEST(Module(isa).u32("gemm_host_isa") == best, isa);
  }
  BOOST_TEST(Module("portable").u32("gemm_host_isa") == 0u);
}
