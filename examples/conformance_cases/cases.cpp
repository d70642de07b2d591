// SPDX-License-Identifier: Apache-2.0
// libexample_cases.so: conformance cases of an application's own kernel module ("scale"), run on
// every backend by
//   gpuplug check --backend <sel> --cases libexample_cases.so --modules <modules folder>
// The modules folder holds one subfolder per plugin (host/scale.so, cuda/scale.fatbin, ...).
// Each case compares the backend under test with the host backend and with the CPU.
#include <cmath>
#include <cstdint>
#include <gpuplug/conformance.hpp>
#include <random>
#include <vector>

namespace conf = gpuplug::conformance;

namespace {

std::vector<float> random_floats(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  std::vector<float> v(n);
  for (auto& f : v) f = dist(rng);
  return v;
}

/// scale on `gpu`: y = a * x, with one sentinel past n that must stay untouched.
std::vector<float> run_scale(conf::Context& ctx, gpuplug::GpuBackend& gpu, float a,
                             const std::vector<float>& x) {
  ctx.load_module(gpu, "scale");
  const auto n = static_cast<std::uint32_t>(x.size());
  std::vector<float> y(x.size() + 1, -7.0f);
  conf::DeviceBuffer dx = conf::to_device(gpu, x), dy = conf::to_device(gpu, y);
  const gpuplug::KernelHandle f = gpu.op_cache().kernel(gpu, "scale", "scale");
  gpu.launch_args(f, gpuplug::Dim3{(n + 255) / 256, 1, 1}, gpuplug::Dim3{256, 1, 1}, 0,
                  gpuplug::Stream{}, n, a, dx.ptr().value, dy.ptr().value);
  gpu.synchronize();
  auto out = dy.download<float>(y.size());
  GPUPLUG_CHECK_MSG(out.back() == -7.0f, "scale(n=" << n << ") wrote past n");
  out.pop_back();
  return out;
}

void scale_matches_host_and_cpu(conf::Context& ctx) {
  for (const std::size_t n : {1u, 255u, 257u, 100003u}) {
    const float a = 1.5f;
    const auto x = random_floats(n, static_cast<std::uint32_t>(n));
    std::vector<float> cpu(n);
    for (std::size_t i = 0; i < n; ++i) cpu[i] = a * x[i];
    const auto got = run_scale(ctx, ctx.backend(), a, x);
    const conf::InputText input = [&](std::size_t i) {
      return "n = " + std::to_string(n) + ", x = " + conf::float_text(x[i]);
    };
    // One multiplication: correctly rounded everywhere, so exact.
    conf::check_close(got, cpu, conf::Tolerance{}, "scale vs CPU", input);
    conf::check_close(got, run_scale(ctx, ctx.reference(), a, x), conf::Tolerance{},
                      "scale vs host backend", input);
  }
}

void scale_on_managed_memory(conf::Context& ctx) {
  gpuplug::GpuBackend& gpu = ctx.backend();
  if (!gpu.device_info().managed_memory) conf::skip("the device has no managed memory");
  ctx.load_module(gpu, "scale");
  const std::uint32_t n = 1000;
  conf::DeviceBuffer x = conf::DeviceBuffer::managed(gpu, n * sizeof(float));
  conf::DeviceBuffer y = conf::DeviceBuffer::managed(gpu, n * sizeof(float));
  const auto in = random_floats(n, 7);
  x.upload(std::span<const float>(in));
  const gpuplug::KernelHandle f = gpu.op_cache().kernel(gpu, "scale", "scale");
  gpu.launch_args(f, gpuplug::Dim3{(n + 255) / 256, 1, 1}, gpuplug::Dim3{256, 1, 1}, 0,
                  gpuplug::Stream{}, n, -2.0f, x.ptr().value, y.ptr().value);
  gpu.synchronize();
  std::vector<float> want(n);
  for (std::uint32_t i = 0; i < n; ++i) want[i] = -2.0f * in[i];
  conf::check_close(y.download<float>(n), want, conf::Tolerance{}, "scale on managed memory");
}

}  // namespace

GPUPLUG_CONFORMANCE_CASES(
    {"scale_matches_host_and_cpu",
     "scale(a, x) is exactly a*x on four sizes, against the CPU and the host backend",
     scale_matches_host_and_cpu},
    {"scale_on_managed_memory", "scale works on managed memory, or the device has none",
     scale_on_managed_memory})
