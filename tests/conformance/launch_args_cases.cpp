// SPDX-License-Identifier: Apache-2.0
// Conformance cases for launch arguments: params belong to the caller once launch returns, and
// every sample kernel publishes <func>_args (<gpuplug/kernel_args.h>, docs/kernels.md).
#include <gpuplug/kernel_args.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "helpers.hpp"

namespace gpuplug::conformance::detail {

namespace {

void launch_arguments_copied_during_launch(Context& ctx) {
  // params and the values they point to belong to the caller, who may reuse them as soon as
  // launch returns: a plugin that runs the launch later must have copied them during the call
  // (their sizes are the kernel's <func>_args, <gpuplug/kernel_args.h>). Here the launch is
  // queued behind work on its stream, then every value and every pointer of params is replaced
  // at once with others that are valid but different (a decoy buffer, another scalar).
  GpuBackend& gpu = ctx.backend();
  constexpr std::uint32_t n = 4096;
  const std::vector<float> xs(n, 3.0f), ys(n, 1.0f), decoy_xs(n, 100.0f), decoy_ys(n, 50.0f);
  DeviceBuffer x = to_device(gpu, xs);
  DeviceBuffer y(gpu, n * sizeof(float));
  DeviceBuffer dx = to_device(gpu, decoy_xs);
  DeviceBuffer dy = to_device(gpu, decoy_ys);
  DeviceBuffer busy(gpu, std::size_t{16} << 20);
  const KernelHandle axpy = gpu.op_cache().kernel(gpu, "axpy", "axpy");
  const Stream s = gpu.create_stream();
  gpu.memset(busy.ptr(), 0x5A, busy.bytes(), s);  // work ahead of the launch on s
  gpu.copy_h2d_async(y.ptr(), ys.data(), n * sizeof(float), s);

  std::uint32_t arg_n = n;
  float arg_a = 2.0f;
  std::uint64_t arg_x = x.ptr().value, arg_y = y.ptr().value;
  // What params points to after the launch: the same kinds of values, all different.
  std::uint32_t other_n = n;
  float other_a = 5.0f;
  std::uint64_t other_x = dx.ptr().value, other_y = dy.ptr().value;
  void* params[] = {&arg_n, &arg_a, &arg_x, &arg_y};
  gpu.launch(axpy, Dim3{n / 256, 1, 1}, Dim3{256, 1, 1}, 0, s, params);
  // The caller reuses its storage at once: new values in place, and params pointing elsewhere.
  arg_a = other_a;
  arg_x = other_x;
  arg_y = other_y;
  params[0] = &other_n;
  params[1] = &other_a;
  params[2] = &other_x;
  params[3] = &other_y;
  gpu.synchronize(s);
  gpu.destroy_stream(s);

  const auto got = y.download<float>(n);
  const auto decoy = dy.download<float>(n);
  GPUPLUG_CHECK_MSG(
      decoy == decoy_ys && std::all_of(got.begin(), got.end(), [](float v) { return v == 7.0f; }),
      "launch read its params after it returned: a plugin that runs a launch later "
      "must copy the arguments during the call (sizes from <func>_args) (y[0] = "
          << got[0] << ", expected 2*3+1 = 7; the decoy y[0] = " << decoy[0]
          << ", expected it untouched at 50)");
}

void kernel_args_published(Context& ctx) {
  // Every sample kernel publishes <func>_args (<gpuplug/kernel_args.h>), and it describes the
  // arguments the suite launches it with (helpers.hpp): what a plugin that copies arguments
  // relies on. Read like any module global: device_symbol, then a copy.
  struct Expected {
    const char* module;
    const char* func;
    std::vector<std::uint32_t> sizes;
  };
  const std::vector<Expected> kernels = {
      {"axpy", "axpy", {4, 4, 8, 8}},
      {"gemm", "gemm_f32", {4, 4, 4, 8, 8, 8}},
      {"gemm", "gemm_a_e4m3", {4, 4, 4, 8, 8, 8}},
      {"e4m3", "cast_f32_e4m3", {4, 8, 8}},
      {"e4m3", "cast_e4m3_f32", {4, 8, 8}},
      {"activation", "bias_relu", {4, 4, 8, 8}},
      {"sync", "gate", {8, 8, 1, 8}},
  };
  ctx.require_abi_minor(1, "every sample kernel's <func>_args (docs/kernels.md)");
  GpuBackend& gpu = ctx.backend();
  for (const Expected& k : kernels) {
    const std::string name = std::string(k.func) + GPUPLUG_KERNEL_ARGS_SUFFIX;
    const std::string kernel = std::string(k.module) + "::" + k.func;
    if (std::string_view(k.module) == "sync" && !gpu.has_module("sync")) {
      ctx.note("no module \"sync\": gate_args not checked");
      continue;
    }
    const auto sym = gpu.device_symbol(k.module, name);
    GPUPLUG_CHECK_MSG(sym.has_value(), kernel << " publishes no " << name
                                              << ": every sample kernel publishes its argument "
                                                 "sizes (docs/kernels.md)");
    GPUPLUG_CHECK_MSG(sym->bytes >= sizeof(gpuplug_kernel_args_t),
                      kernel << "'s " << name << " is " << sym->bytes << " bytes, not a "
                             << sizeof(gpuplug_kernel_args_t) << "-byte gpuplug_kernel_args_t");
    gpuplug_kernel_args_t args{};
    gpu.copy_d2h(&args, sym->address, sizeof args);
    GPUPLUG_CHECK_MSG(args.version >= GPUPLUG_KERNEL_ARGS_VERSION,
                      kernel << "'s " << name << " has version " << args.version << ", not "
                             << GPUPLUG_KERNEL_ARGS_VERSION);
    std::vector<std::uint32_t> sizes(
        std::begin(args.sizes),
        std::begin(args.sizes) + std::min<std::uint32_t>(args.count, GPUPLUG_KERNEL_ARGS_MAX));
    const auto show = [](const std::vector<std::uint32_t>& v) {
      std::string text = "{";
      for (std::size_t i = 0; i < v.size(); ++i) text += (i ? ", " : "") + std::to_string(v[i]);
      return text + "}";
    };
    GPUPLUG_CHECK_MSG(args.count == k.sizes.size() && sizes == k.sizes,
                      kernel << "'s " << name << " says " << args.count << " arguments of "
                             << show(sizes) << " bytes; the kernel takes " << show(k.sizes));
    GPUPLUG_CHECK_MSG(std::all_of(std::begin(args.sizes) + args.count, std::end(args.sizes),
                                  [](std::uint32_t v) { return v == 0; }),
                      kernel << "'s " << name << " has non-zero sizes past its count");
  }
}

const Case cases[] = {
    {"launch_arguments_copied_during_launch",
     "params are valid only during launch: reusing them at once does not change a queued launch",
     launch_arguments_copied_during_launch},
    {"kernel_args_published",
     "every sample kernel publishes <func>_args, matching the arguments it is launched with",
     kernel_args_published},
};

}  // namespace

std::span<const Case> launch_args_cases() { return cases; }

}  // namespace gpuplug::conformance::detail
