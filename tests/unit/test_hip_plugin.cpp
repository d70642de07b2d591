// SPDX-License-Identifier: Apache-2.0
// libgpuplug-hip.so through its C table: loads anywhere, says why HIP is unusable, and (on a GPU)
// works.

// Runs on every kind of machine. Without libamdhip64 it checks the "driver missing" report; with
// the runtime but no AMD GPU (the build machine: Debian's HIP 5.2, no /dev/kfd) the "no AMD GPU
// (hipErrorNoDevice)" report; in both cases clean refusals from create and describe_device. With
// an AMD GPU the device cases also run real work (allocation, copies, streams, the four kernel
// modules) against CPU references; elsewhere Boost.Test reports them skipped with the reason.

#define BOOST_TEST_MODULE test_hip_plugin
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gpu_plugin_cases.hpp"

using namespace gpuplug::test;  // NOLINT(google-build-using-namespace): the harness is the test's

std::filesystem::path gpuplug::test::plugin_under_test() {
  return GPUPLUG_TEST_PLUGIN_DIR "/libgpuplug-hip.so";
}

namespace {

const char* const kRuntimeNames[] = {"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6",
                                     "libamdhip64.so.5"};

// Whether the HIP runtime is in the process already (RTLD_NOLOAD loads nothing).
bool runtime_loaded() {
  for (const char* name : kRuntimeNames) {
    if (void* h = dlopen(name, RTLD_NOW | RTLD_NOLOAD)) {
      dlclose(h);  // balances the reference NOLOAD took
      return true;
    }
  }
  return false;
}

// Whether this machine has a HIP runtime at all, judged independently of the plugin.
bool runtime_present() {
  static const bool present = [] {
    for (const char* name : kRuntimeNames)
      if (dlopen(name, RTLD_LAZY | RTLD_LOCAL) != nullptr) return true;
    // The plugin also looks in ROCm's folders, off the loader's path.
    std::vector<std::string> folders{"/opt/rocm/lib"};
    if (const char* rocm = std::getenv("ROCM_PATH")) folders.push_back(std::string(rocm) + "/lib");
    for (const std::string& folder : folders)
      for (const char* name : kRuntimeNames)
        if (dlopen((folder + "/" + name).c_str(), RTLD_LAZY | RTLD_LOCAL) != nullptr) return true;
    return false;
  }();
  return present;
}

// Without the amdgpu kernel driver's /dev/kfd no AMD GPU can be used, whatever the runtime says.
bool kfd_present() { return std::filesystem::exists("/dev/kfd"); }

}  // namespace

// ---- every machine --------------------------------------------------------------------------

// First case on purpose: nothing has touched the runtime yet, so "not loaded" proves the plugin
// has no DT_NEEDED on libamdhip64.
BOOST_AUTO_TEST_CASE(plugin_loads_anywhere_and_names_itself) {
  check_identity("hip", "AMD");
  BOOST_TEST(!runtime_loaded(), "loading the plugin pulled in libamdhip64: it must be dlopen'ed");
}

BOOST_AUTO_TEST_CASE(probe_reports_why_hip_is_or_is_not_usable) {
  const gpuplug_probe_result_t r = probe();
  const std::string message = r.message;
  BOOST_TEST_MESSAGE("probe: reason " << r.reason << ", " << r.device_count
                                      << " devices: " << message);
  BOOST_TEST(!message.empty());
  if (!runtime_present()) {
    BOOST_TEST(r.reason == GPUPLUG_PROBE_DRIVER_MISSING);
    BOOST_TEST(contains(message, "driver missing: libamdhip64.so not found"), message);
    // Every place looked in: the loader's path (every major), ROCm's default prefix.
    for (const char* place : {".so.7", ".so.6", ".so.5", "the loader's path", "/opt/rocm/lib"})
      BOOST_TEST(contains(message, place), message);
    BOOST_TEST(r.device_count == 0u);
  } else if (!kfd_present()) {
    // This build machine: the runtime is installed, the GPU is not.
    BOOST_TEST(r.reason == GPUPLUG_PROBE_NO_DEVICE);
    BOOST_TEST(contains(message, "no AMD GPU (hipErrorNoDevice)"), message);
    BOOST_TEST(r.device_count == 0u);
  } else if (r.reason == GPUPLUG_PROBE_AVAILABLE) {
    BOOST_TEST(r.device_count > 0u);
    BOOST_TEST(contains(message, "HIP runtime"), message);
  } else {
    BOOST_TEST(r.reason != GPUPLUG_PROBE_DRIVER_MISSING);
    BOOST_TEST(r.device_count == 0u);
    if (r.reason == GPUPLUG_PROBE_NO_DEVICE) BOOST_TEST(contains(message, "hipErrorNoDevice"));
    if (r.reason == GPUPLUG_PROBE_DRIVER_TOO_OLD) BOOST_TEST(contains(message, "driver too old"));
  }
  check_probe_is_stable(r);
}

BOOST_AUTO_TEST_CASE(create_and_describe_refuse_cleanly_with_the_reason) {
  // With a device, the SDK refuses ordinal == device_count before the plugin's create runs:
  // "no device 1: hip has 1 device".
  check_create_and_describe_refuse([](std::uint32_t ordinal) {
    return "no device " + std::to_string(ordinal) + ": hip has " + std::to_string(ordinal) +
           " device";
  });
}

// ---- a machine with an AMD GPU --------------------------------------------------------------

BOOST_AUTO_TEST_CASE(device_info_is_reported, *needs_device()) {
  const gpuplug_device_info_t info = check_device_info();
  BOOST_TEST(std::strncmp(info.arch, "gfx", 3) == 0, info.arch);
}

BOOST_AUTO_TEST_CASE(axpy_runs_on_the_device, *needs_device()) { check_axpy_runs(1e-5f); }

BOOST_AUTO_TEST_CASE(gemm_kernels_match_the_cpu, *needs_device()) {
  Instance dev;
  BOOST_TEST(dev.published("gemm", "gemm_a_e4m3_a_e4m3") == 1u);
  BOOST_TEST(check_gemm_runs(dev, "gemm_f32", false) == 64u);
  BOOST_TEST(check_gemm_runs(dev, "gemm_a_e4m3", true) == 64u);
}

BOOST_AUTO_TEST_CASE(e4m3_cast_is_bit_identical_to_the_shared_header, *needs_device()) {
  check_e4m3_casts();
}

BOOST_AUTO_TEST_CASE(bias_relu_matches_the_cpu, *needs_device()) {
  Instance dev;
  const std::uint32_t rows = 37, cols = 301;
  const auto x = random_floats(std::size_t{rows} * cols, 6);
  const auto bias = random_floats(cols, 7);
  std::uint64_t d_x = dev.upload(x), d_bias = dev.upload(bias);
  const std::uint64_t f = dev.function("activation", "bias_relu");
  void* params[] = {const_cast<std::uint32_t*>(&rows), const_cast<std::uint32_t*>(&cols), &d_bias,
                    &d_x};
  dev.launch(f, {blocks_of(std::uint64_t{rows} * cols, 256), 1, 1}, {256, 1, 1}, params,
             "bias_relu");
  const auto got = dev.download<float>(d_x, x.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (got[i] != std::max(x[i] + bias[i % cols], 0.0f)) ++bad;
  BOOST_TEST(bad == 0u);
  for (std::uint64_t p : {d_x, d_bias}) dev.free(p);
}

BOOST_AUTO_TEST_CASE(streams_memset_async_copies_and_managed_memory, *needs_device()) {
  check_streams_and_managed_memory();
}

BOOST_AUTO_TEST_CASE(modules_load_from_bytes_and_bad_images_are_refused, *needs_device()) {
  Instance dev;
  const auto image = read_file_or_fail(std::string(GPUPLUG_TEST_KERNEL_DIR) + "/hip/axpy.hsaco");
  BOOST_TEST_REQUIRE(!image.empty());
  dev.ok(dev.t.load_module(dev.inst, "axpy_bytes", image.data(), image.size()), "load_module");
  BOOST_TEST(dev.function("axpy_bytes", "axpy") != 0u);
  BOOST_TEST(dev.t.load_module(dev.inst, "axpy_bytes", image.data(), image.size()) ==
             GPUPLUG_STATUS_INVALID_ARGUMENT);  // the name is taken

  const std::string junk = "definitely not a code object";
  BOOST_TEST(dev.t.load_module(dev.inst, "junk", junk.data(), junk.size()) ==
             GPUPLUG_STATUS_INVALID_IMAGE);
  BOOST_TEST(contains(dev.last_error(), "junk"), dev.last_error());
  // A bundle cut short: its entries lie outside the bytes given, so it never reaches HIP.
  BOOST_TEST(dev.t.load_module(dev.inst, "cut", image.data(), 64) == GPUPLUG_STATUS_INVALID_IMAGE);
}
