// SPDX-License-Identifier: Apache-2.0
// Counted launches on the host plugin, with and without the validate layer: an argument count or
// size that differs from the kernel's `<func>_args` is invalid_argument naming the kernel (where
// the primitive launch would read past the arguments and crash), and a kernel that publishes no
// `<func>_args` launches unchecked.
#define BOOST_TEST_MODULE counted_launch
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <gpuplug/gpuplug.hpp>
#include <string>
#include <vector>

#include "contains.hpp"
#include "host_backend.hpp"
#include "test_print.hpp"

namespace {

using gpuplug::Dim3;
using gpuplug::Error;
using gpuplug::GpuBackend;
using gpuplug::KernelArg;
using gpuplug::KernelHandle;
using gpuplug::Status;
using gpuplug::Stream;
using gpuplug::test::contains;
using gpuplug::test::Host;

std::vector<float> read_back(GpuBackend& gpu, gpuplug::DevicePtr p, std::size_t n) {
  std::vector<float> out(n);
  gpu.copy_d2h(out.data(), p, n * sizeof(float));
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(axpy_with_three_arguments_is_refused_with_and_without_validate) {
  Host host;
  for (const std::string layers : {"", "validate"}) {
    BOOST_TEST_CONTEXT("layers '" << layers << "'") {
      const auto gpu = layers.empty() ? host.another() : host.another({{"layers", layers}});
      const std::uint32_t n = 64;
      const std::vector<float> ones(n, 1.0f);
      const auto x = gpu->alloc(n * sizeof(float), "x"), y = gpu->alloc(n * sizeof(float), "y");
      gpu->copy_h2d(x, ones.data(), n * sizeof(float));
      gpu->copy_h2d(y, ones.data(), n * sizeof(float));
      const KernelHandle f = gpu->kernel("axpy", "axpy");
      try {
        gpu->launch(f, Dim3{1, 1, 1}, Dim3{64, 1, 1}, 0, Stream{}, {n, 2.0f, x});
        BOOST_FAIL("three arguments to axpy were launched");
      } catch (const Error& e) {
        BOOST_TEST(e.status() == Status::invalid_argument);
        BOOST_TEST(e.backend() == gpu->name());
        BOOST_TEST(contains(e.message(), "kernel axpy::axpy takes 4 arguments"), e.message());
        BOOST_TEST(contains(e.message(), "given 3 arguments"), e.message());
      }
      BOOST_CHECK_THROW(gpu->launch_args(f, Dim3{1, 1, 1}, Dim3{64, 1, 1}, 0, Stream{}, n, 2.0,
                                         x, y),  // a double for the float a
                        Error);
      gpu->synchronize();
      BOOST_TEST(read_back(*gpu, y, n) == ones);
      gpu->launch_args(f, Dim3{1, 1, 1}, Dim3{64, 1, 1}, 0, Stream{}, n, 2.0f, x, y);
      gpu->synchronize();
      BOOST_TEST(read_back(*gpu, y, n) == std::vector<float>(n, 3.0f));
      gpu->free(x);
      gpu->free(y);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_kernel_without_args_metadata_launches_unchecked) {
  Host host;
  GpuBackend& gpu = *host.gpu;
  const KernelHandle axpy = gpu.kernel("axpy", "axpy");
  BOOST_TEST(gpu.kernel_signature(axpy) != nullptr);
  BOOST_TEST(gpu.kernel_signature(KernelHandle{}) == nullptr);
  // many_kernels publishes no `<func>_args`: there is no count to check against.
  gpu.load_module_file("many", std::string(GPUPLUG_TEST_HOST_KERNEL_DIR) + "/many_kernels.so");
  const KernelHandle f = gpu.kernel("many", "kernel_with_a_name_long_enough_to_fill_0000");
  BOOST_TEST(gpu.kernel_signature(f) == nullptr);
  gpu.launch(f, Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0, Stream{}, {std::uint32_t{1}, 2.0f});
  gpu.synchronize();
}

BOOST_AUTO_TEST_CASE(more_arguments_than_a_launch_takes_are_refused) {
  Host host;
  GpuBackend& gpu = *host.gpu;
  const KernelHandle f = gpu.kernel("axpy", "axpy");
  const std::vector<KernelArg> many(GpuBackend::max_launch_args + 1, KernelArg(std::uint32_t{0}));
  try {
    gpu.launch(f, Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0, Stream{}, many);
    BOOST_FAIL("65 arguments were launched");
  } catch (const Error& e) {
    BOOST_TEST(e.status() == Status::invalid_argument);
    BOOST_TEST(contains(e.message(), "more than a launch takes (64)"), e.message());
  }
}

BOOST_AUTO_TEST_CASE(a_kernel_arg_copies_small_values_and_refers_to_large_ones) {
  const std::uint32_t n = 7;
  const KernelArg small(n);
  BOOST_TEST(small.size() == 4u);
  BOOST_TEST(small.data() != static_cast<const void*>(&n));  // a copy: temporaries are safe
  BOOST_TEST(*static_cast<const std::uint32_t*>(small.data()) == 7u);
  struct Big {
    double v[4];
  } big{{1, 2, 3, 4}};
  const KernelArg large(big);
  BOOST_TEST(large.size() == sizeof(Big));
  BOOST_TEST(large.data() == static_cast<const void*>(&big));
  const KernelArg copy = small;
  BOOST_TEST(*static_cast<const std::uint32_t*>(copy.data()) == 7u);
  BOOST_TEST(copy.data() != small.data());
}
