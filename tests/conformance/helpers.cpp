// SPDX-License-Identifier: Apache-2.0
// Conformance helpers: owned buffers, kernel launches by the kernel contract, CPU references.
#include "helpers.hpp"

#include <dlfcn.h>

#include <e4m3.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <limits>
#include <random>

namespace gpuplug::conformance {

namespace {
constexpr std::uint32_t block_1d = 256;
std::uint32_t blocks_for(std::uint64_t n, std::uint64_t per_block) {
  return static_cast<std::uint32_t>((n + per_block - 1) / per_block);
}
}  // namespace

// ---- DeviceBuffer ----------------------------------------------------------------------------

DeviceBuffer::DeviceBuffer(GpuBackend& gpu, std::size_t bytes, const char* site)
    : gpu_(&gpu), ptr_(gpu.alloc(bytes, site)), bytes_(bytes) {}

DeviceBuffer DeviceBuffer::managed(GpuBackend& gpu, std::size_t bytes, const char* site) {
  return adopt(gpu, gpu.alloc_managed(bytes, site), bytes);
}

DeviceBuffer DeviceBuffer::adopt(GpuBackend& gpu, DevicePtr ptr, std::size_t bytes) {
  DeviceBuffer b;
  b.gpu_ = &gpu;
  b.ptr_ = ptr;
  b.bytes_ = bytes;
  return b;
}

DeviceBuffer::~DeviceBuffer() {
  if (gpu_ != nullptr && ptr_) {
    try {
      gpu_->free(ptr_);
    } catch (...) {  // destructors never throw; a leak shows on the ledger check after the case
    }
  }
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : gpu_(other.gpu_), ptr_(other.ptr_), bytes_(other.bytes_) {
  other.ptr_ = {};
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    DeviceBuffer old(std::move(*this));
    gpu_ = other.gpu_;
    ptr_ = other.ptr_;
    bytes_ = other.bytes_;
    other.ptr_ = {};
  }
  return *this;
}

void DeviceBuffer::free() {
  if (gpu_ != nullptr && ptr_) {
    const DevicePtr p = ptr_;
    ptr_ = {};
    gpu_->free(p);
  }
}

DevicePtr DeviceBuffer::release() noexcept {
  const DevicePtr p = ptr_;
  ptr_ = {};
  return p;
}

// ---- launches --------------------------------------------------------------------------------

void launch_axpy(GpuBackend& gpu, std::uint32_t n, float a, DevicePtr x, DevicePtr y,
                 Stream stream) {
  const KernelHandle f = gpu.op_cache().kernel(gpu, "axpy", "axpy");
  gpu.launch_args(f, Dim3{blocks_for(n, block_1d), 1, 1}, Dim3{block_1d, 1, 1}, 0, stream, n, a,
                  x.value, y.value);
}

void launch_gemm(GpuBackend& gpu, std::string_view func, std::uint32_t m, std::uint32_t n,
                 std::uint32_t k, DevicePtr a, DevicePtr b, DevicePtr c, Stream stream) {
  OpCache& cache = gpu.op_cache();
  const KernelHandle f = cache.kernel(gpu, "gemm", func);
  const auto tile = cache.n_tile(f);
  GPUPLUG_CHECK_MSG(tile.has_value(), "gemm::" << func << " publishes no " << func
                                               << "_n_tile (OpCache recorded none)");
  GPUPLUG_CHECK_MSG(*tile > 0, "gemm::" << func << " publishes n_tile = 0");
  gpu.launch_args(f, Dim3{blocks_for(n, *tile), blocks_for(m, 16), 1}, Dim3{16, 16, 1}, 0, stream,
                  m, n, k, a.value, b.value, c.value);
}

// ---- whole runs --------------------------------------------------------------------------------

std::vector<float> run_axpy(GpuBackend& gpu, float a, const std::vector<float>& x,
                            const std::vector<float>& y) {
  DeviceBuffer dx = to_device(gpu, x);
  DeviceBuffer dy = to_device(gpu, y);
  launch_axpy(gpu, static_cast<std::uint32_t>(x.size()), a, dx.ptr(), dy.ptr());
  gpu.synchronize();
  return dy.download<float>(y.size());
}

std::vector<float> run_gemm(GpuBackend& gpu, std::string_view func, std::uint32_t m,
                            std::uint32_t n, std::uint32_t k, const std::vector<float>& a,
                            const std::vector<float>& b) {
  DeviceBuffer da = to_device(gpu, a);
  DeviceBuffer db = to_device(gpu, b);
  // Poison C with NaN so that an element the kernel never writes cannot pass by accident.
  std::vector<float> c(std::size_t{m} * n, std::numeric_limits<float>::quiet_NaN());
  DeviceBuffer dc = to_device(gpu, c);
  launch_gemm(gpu, func, m, n, k, da.ptr(), db.ptr(), dc.ptr());
  gpu.synchronize();
  return dc.download<float>(c.size());
}

std::vector<std::uint8_t> run_cast_f32_e4m3(GpuBackend& gpu, const std::vector<float>& in) {
  DeviceBuffer din = to_device(gpu, in);
  DeviceBuffer dout(gpu, in.size());
  gpu.memset(dout.ptr(), 0x55, in.size());
  const auto n = static_cast<std::uint32_t>(in.size());
  const KernelHandle f = gpu.op_cache().kernel(gpu, "e4m3", "cast_f32_e4m3");
  gpu.launch_args(f, Dim3{blocks_for(n, block_1d), 1, 1}, Dim3{block_1d, 1, 1}, 0, Stream{}, n,
                  din.ptr().value, dout.ptr().value);
  gpu.synchronize();
  return dout.download<std::uint8_t>(in.size());
}

std::vector<float> run_cast_e4m3_f32(GpuBackend& gpu, const std::vector<std::uint8_t>& in) {
  DeviceBuffer din = to_device(gpu, in);
  DeviceBuffer dout(gpu, in.size() * sizeof(float));
  gpu.memset(dout.ptr(), 0x55, in.size() * sizeof(float));
  const auto n = static_cast<std::uint32_t>(in.size());
  const KernelHandle f = gpu.op_cache().kernel(gpu, "e4m3", "cast_e4m3_f32");
  gpu.launch_args(f, Dim3{blocks_for(n, block_1d), 1, 1}, Dim3{block_1d, 1, 1}, 0, Stream{}, n,
                  din.ptr().value, dout.ptr().value);
  gpu.synchronize();
  return dout.download<float>(in.size());
}

std::vector<float> run_bias_relu(GpuBackend& gpu, std::uint32_t rows, std::uint32_t cols,
                                 const std::vector<float>& bias, const std::vector<float>& x) {
  DeviceBuffer dbias = to_device(gpu, bias);
  DeviceBuffer dx = to_device(gpu, x);
  const KernelHandle f = gpu.op_cache().kernel(gpu, "activation", "bias_relu");
  const std::uint64_t total = std::uint64_t{rows} * cols;
  gpu.launch_args(f, Dim3{blocks_for(total, block_1d), 1, 1}, Dim3{block_1d, 1, 1}, 0, Stream{},
                  rows, cols, dbias.ptr().value, dx.ptr().value);
  gpu.synchronize();
  return dx.download<float>(x.size());
}

// ---- references --------------------------------------------------------------------------------

std::vector<float> reference_axpy(float a, const std::vector<float>& x,
                                  const std::vector<float>& y) {
  std::vector<float> out(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) {
    out[i] = static_cast<float>(static_cast<double>(a) * static_cast<double>(x[i]) +
                                static_cast<double>(y[i]));
  }
  return out;
}

std::vector<double> reference_gemm(std::uint32_t m, std::uint32_t n, std::uint32_t k,
                                   const std::vector<float>& a, const std::vector<float>& b,
                                   bool a_e4m3, std::vector<double>& magnitude) {
  std::vector<double> c(std::size_t{m} * n, 0.0);
  magnitude.assign(c.size(), 0.0);
  for (std::uint32_t i = 0; i < m; ++i) {
    for (std::uint32_t j = 0; j < n; ++j) {
      double sum = 0.0;
      double mag = 0.0;
      for (std::uint32_t p = 0; p < k; ++p) {
        float av = a[std::size_t{i} * k + p];
        if (a_e4m3) av = reference_e4m3_to_f32(reference_f32_to_e4m3(av));
        const double prod =
            static_cast<double>(av) * static_cast<double>(b[std::size_t{p} * n + j]);
        sum += prod;
        mag += std::fabs(prod);
      }
      c[std::size_t{i} * n + j] = sum;
      magnitude[std::size_t{i} * n + j] = mag;
    }
  }
  return c;
}

std::uint8_t reference_f32_to_e4m3(float f) noexcept { return gpuplug_f32_to_e4m3(f); }
float reference_e4m3_to_f32(std::uint8_t b) noexcept { return gpuplug_e4m3_to_f32(b); }

// ---- floats
// --------------------------------------------------------------------------------------

std::uint32_t float_bits(float f) noexcept { return std::bit_cast<std::uint32_t>(f); }
float float_from_bits(std::uint32_t bits) noexcept { return std::bit_cast<float>(bits); }

std::uint64_t ulp_distance(float a, float b) noexcept {
  // Map the sign-magnitude encoding onto a monotonic integer line, then subtract.
  auto ordered = [](float f) -> std::int64_t {
    const auto bits = static_cast<std::int64_t>(float_bits(f));
    return (bits & 0x80000000) ? -(bits & 0x7FFFFFFF) : bits;
  };
  const std::int64_t d = ordered(a) - ordered(b);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}

std::vector<float> random_floats(std::size_t n, float lo, float hi, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(n);
  for (auto& v : out) v = dist(gen);
  return out;
}

namespace {
/// " for <inputs>" when the caller described them, else "".
std::string inputs_of(const InputText& input, std::size_t i) {
  return input ? " for " + input(i) : std::string();
}
}  // namespace

std::string float_text(float f) {
  std::ostringstream os;
  os.precision(9);
  os << f << " (0x" << std::hex << std::setw(8) << std::setfill('0') << float_bits(f) << ")";
  return os.str();
}

void check_within_ulps(const std::vector<float>& got, const std::vector<float>& want,
                       std::uint64_t max_ulps, std::string_view what, const InputText& input,
                       std::source_location where) {
  if (got.size() != want.size()) {
    fail(std::string(what) + ": " + std::to_string(got.size()) + " results, expected " +
             std::to_string(want.size()),
         where);
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool same_nan = std::isnan(got[i]) && std::isnan(want[i]);
    if (!same_nan && (std::isnan(got[i]) || ulp_distance(got[i], want[i]) > max_ulps)) {
      fail(std::string(what) + ": element " + std::to_string(i) + inputs_of(input, i) + " is " +
               float_text(got[i]) + ", expected " + float_text(want[i]) + " (within " +
               std::to_string(max_ulps) + " ulp)",
           where);
    }
  }
}

void check_bits_equal(const std::vector<float>& got, const std::vector<float>& want,
                      std::string_view what, const InputText& input, std::source_location where) {
  if (got.size() != want.size()) fail(std::string(what) + ": result size differs", where);
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (float_bits(got[i]) != float_bits(want[i])) {
      fail(std::string(what) + ": element " + std::to_string(i) + inputs_of(input, i) + " is " +
               float_text(got[i]) + ", expected " + float_text(want[i]),
           where);
    }
  }
}

void check_bytes_equal(const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want,
                       std::string_view what, const InputText& input, std::source_location where) {
  if (got.size() != want.size()) fail(std::string(what) + ": result size differs", where);
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      std::ostringstream os;
      os << what << ": byte " << i << inputs_of(input, i) << " is 0x" << std::hex << std::setw(2)
         << std::setfill('0') << unsigned{got[i]} << ", expected 0x" << std::setw(2)
         << unsigned{want[i]};
      fail(os.str(), where);
    }
  }
}

void check_close(std::span<const float> got, std::span<const float> want, Tolerance tol,
                 std::string_view what, const InputText& input, std::source_location where) {
  if (got.size() != want.size()) {
    fail(std::string(what) + ": " + std::to_string(got.size()) + " results, expected " +
             std::to_string(want.size()),
         where);
  }
  // How far outside its tolerance each element is, as a ratio (> 1 fails), so that the worst
  // element is well defined whichever of abs, rel or ulps would have let it pass.
  std::size_t failed = 0, worst = 0;
  double worst_ratio = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float g = got[i], w = want[i];
    if (std::isnan(g) || std::isnan(w)) {
      if (std::isnan(g) && std::isnan(w)) continue;
      ++failed;
      if (worst_ratio < std::numeric_limits<double>::infinity()) {
        worst_ratio = std::numeric_limits<double>::infinity();
        worst = i;
      }
      continue;
    }
    if (float_bits(g) == float_bits(w) || g == w) continue;
    const double err = std::fabs(static_cast<double>(g) - static_cast<double>(w));
    const bool same_sign = std::signbit(g) == std::signbit(w) && std::isfinite(g) && std::isfinite(w);
    const std::uint64_t ulps = same_sign ? ulp_distance(g, w) : ~std::uint64_t{0};
    const double allowed = std::max(tol.abs, tol.rel * std::fabs(static_cast<double>(w)));
    if (err <= allowed || (tol.ulps > 0 && ulps <= tol.ulps)) continue;
    ++failed;
    double ratio = std::numeric_limits<double>::infinity();
    if (allowed > 0) ratio = std::min(ratio, err / allowed);
    if (tol.ulps > 0 && ulps != ~std::uint64_t{0})
      ratio = std::min(ratio, static_cast<double>(ulps) / static_cast<double>(tol.ulps));
    if (failed == 1 || ratio > worst_ratio) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  if (failed == 0) return;
  std::ostringstream os;
  os.precision(9);
  os << what << ": " << failed << " of " << got.size() << " elements outside the tolerance (";
  if (tol.abs == 0 && tol.rel == 0 && tol.ulps == 0) os << "exact";
  if (tol.abs > 0) os << "abs " << tol.abs;
  if (tol.rel > 0) os << (tol.abs > 0 ? ", " : "") << "rel " << tol.rel;
  if (tol.ulps > 0) os << (tol.abs > 0 || tol.rel > 0 ? ", " : "") << tol.ulps << " ulp";
  os << "); the worst is element " << worst;
  if (input) os << " for " << input(worst);
  os << ": " << float_text(got[worst]) << ", expected " << float_text(want[worst]) << ", error "
     << std::fabs(static_cast<double>(got[worst]) - static_cast<double>(want[worst]));
  fail(os.str(), where);
}

RawPlugin::RawPlugin(const std::filesystem::path& file)
    : handle_(::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) {
  if (handle_ == nullptr) fail("dlopen(" + file.string() + "): " + ::dlerror());
  entry_ = reinterpret_cast<gpuplug_plugin_entry_fn>(::dlsym(handle_, GPUPLUG_PLUGIN_ENTRY_SYMBOL));
  if (entry_ == nullptr) {
    ::dlclose(handle_);
    fail(file.string() + " exports no " GPUPLUG_PLUGIN_ENTRY_SYMBOL);
  }
}

RawPlugin::~RawPlugin() { ::dlclose(handle_); }

void require_non_blocking_streams(Context& ctx) {
  ctx.require_abi_minor(3, "a non-blocking stream (stream_create_with_flags)");
  const RawPlugin plugin(ctx.target().plugin_file);
  const gpuplug_plugin_v1* t = plugin.entry(GPUPLUG_ABI_VERSION);
  if (t == nullptr || t->struct_size < GPUPLUG_PLUGIN_V1_3_SIZE ||
      t->stream_create_with_flags == nullptr)
    skip("the plugin has no stream_create_with_flags (an optional slot): every stream it makes is "
         "blocking");
}

}  // namespace gpuplug::conformance
