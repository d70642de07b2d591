// SPDX-License-Identifier: Apache-2.0
// The checks test_cuda_plugin and test_hip_plugin share: a GPU plugin's C table on any machine,
// and real work on a device against CPU references.
#pragma once

// Each function is the body of one test case; the vendor's test passes what differs (its name,
// its vendor, its wording for a missing device). The device checks need a created Instance, so
// their cases carry *needs_device().

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "../../kernels/common/e4m3.h"
#include "plugin_table_harness.hpp"

namespace gpuplug::test {

// ---- every machine ---------------------------------------------------------------------------

/// The table's identity: a v1 table of this ABI major, with the plugin's name and vendor.
inline void check_identity(std::string_view name, std::string_view vendor) {
  const gpuplug_plugin_v1& t = table();
  BOOST_TEST(t.struct_size >= GPUPLUG_PLUGIN_V1_MIN_SIZE);
  BOOST_TEST(GPUPLUG_ABI_MAJOR(t.abi_version) == GPUPLUG_ABI_VERSION_MAJOR);
  BOOST_TEST(std::string(t.name) == name);
  BOOST_TEST(std::string(t.vendor) == vendor);
}

/// The driver or runtime is loaded once per process: a second probe says what the first said.
inline void check_probe_is_stable(const gpuplug_probe_result_t& first) {
  const gpuplug_probe_result_t again = probe();
  BOOST_TEST(again.reason == first.reason);
  BOOST_TEST(std::string(again.message) == std::string(first.message));
}

/// Without a device create(0) and describe_device(0) are refused as unavailable, create saying
/// the probe's reason; with devices the same holds for the first ordinal past the last one, and
/// create's message contains `missing_device(ordinal)`.
template <class MissingDeviceText>
void check_create_and_describe_refuse(MissingDeviceText missing_device) {
  const gpuplug_probe_result_t r = probe();
  const std::uint32_t ordinal = r.reason == GPUPLUG_PROBE_AVAILABLE ? r.device_count : 0;
  std::string error;
  gpuplug_instance_t inst = nullptr;
  const gpuplug_status_t s = try_create({}, &inst, &error, nullptr, ordinal);
  BOOST_TEST_MESSAGE("create(" << ordinal << "): " << error);
  BOOST_TEST(s == GPUPLUG_STATUS_UNAVAILABLE);
  BOOST_TEST(inst == nullptr);
  if (r.reason == GPUPLUG_PROBE_AVAILABLE)
    BOOST_TEST(contains(error, missing_device(ordinal)), error);
  else
    BOOST_TEST(contains(error, r.message), error);
  gpuplug_device_info_t info{};
  info.struct_size = sizeof info;
  BOOST_TEST(table().describe_device(ordinal, &info) == GPUPLUG_STATUS_UNAVAILABLE);
}

// ---- a machine with a device -----------------------------------------------------------------

/// Device 0 as describe_device lists it and as an instance reports it; returned for the
/// vendor's own checks (uuid and arch formats).
inline gpuplug_device_info_t check_device_info() {
  gpuplug_device_info_t listed{};
  listed.struct_size = sizeof listed;
  BOOST_TEST_REQUIRE(table().describe_device(0, &listed) == GPUPLUG_STATUS_SUCCESS);
  Instance dev;
  gpuplug_device_info_t info{};
  info.struct_size = sizeof info;
  dev.ok(dev.t.device_info(dev.inst, &info), "device_info");
  BOOST_TEST_MESSAGE("device 0: " << info.name << ", " << info.arch << ", uuid '" << info.uuid
                                  << "', " << info.compute_units << " compute units, "
                                  << info.free_memory << " of " << info.total_memory
                                  << " bytes free, managed " << info.managed_memory);
  BOOST_TEST(std::string(info.name) == listed.name);
  BOOST_TEST(std::string(info.uuid) == listed.uuid);
  BOOST_TEST(std::string(info.arch) == listed.arch);
  BOOST_TEST(info.compute_units > 0u);
  BOOST_TEST(info.total_memory > 0u);
  BOOST_TEST(info.free_memory <= info.total_memory);
  std::uint64_t free_bytes = 0, total_bytes = 0;
  dev.ok(dev.t.memory_info(dev.inst, &free_bytes, &total_bytes), "memory_info");
  BOOST_TEST(total_bytes > 0u);
  BOOST_TEST(free_bytes <= total_bytes);
  return info;
}

/// axpy from the default modules_dir, within `tolerance` (relative to 1 + |y|) of the fused
/// a*x+y; the ledger counts its two buffers; a double free is refused; a missing kernel is
/// not_found naming it.
inline void check_axpy_runs(float tolerance) {
  Instance dev;
  const std::uint32_t n = 100'003;
  const float alpha = 1.5f;
  const auto x = random_floats(n, 3);
  const auto y = random_floats(n, 4);
  std::uint64_t dx = dev.upload(x), dy = dev.upload(y);
  const std::uint64_t f = dev.function("axpy", "axpy");
  void* params[] = {const_cast<std::uint32_t*>(&n), const_cast<float*>(&alpha), &dx, &dy};
  dev.launch(f, dim(blocks_of(n, 256)), dim(256), params, "axpy");
  const auto got = dev.download<float>(dy, n);
  std::size_t bad = 0;
  for (std::uint32_t i = 0; i < n; ++i)
    if (std::fabs(got[i] - std::fma(alpha, x[i], y[i])) > tolerance * (1.0f + std::fabs(y[i])))
      ++bad;
  BOOST_TEST(bad == 0u);

  const gpuplug_ledger_stats_t stats = dev.stats();
  BOOST_TEST(stats.live_count == 2u);
  BOOST_TEST(stats.live_bytes == 2 * std::uint64_t{n} * sizeof(float));
  dev.free(dx);
  dev.free(dy);
  BOOST_TEST(dev.t.free(dev.inst, dy) == GPUPLUG_STATUS_INVALID_ARGUMENT);  // an error, no crash

  // A missing kernel names the module's kernels (when the driver can enumerate them).
  std::uint64_t missing = 0;
  BOOST_TEST(dev.t.get_function(dev.inst, "axpy", "axpy_f16", &missing) ==
             GPUPLUG_STATUS_NOT_FOUND);
  const std::string why = dev.last_error();
  BOOST_TEST_MESSAGE("missing kernel: " << why);
  BOOST_TEST(contains(why, "axpy_f16"), why);
}

/// C = A * B in double, A optionally rounded through E4M3 first.
inline std::vector<float> gemm_reference(std::uint32_t M, std::uint32_t N, std::uint32_t K,
                                         const std::vector<float>& A, const std::vector<float>& B,
                                         bool round_a) {
  std::vector<float> C(std::size_t{M} * N);
  for (std::uint32_t i = 0; i < M; ++i)
    for (std::uint32_t j = 0; j < N; ++j) {
      double sum = 0;
      for (std::uint32_t k = 0; k < K; ++k) {
        float a = A[std::size_t{i} * K + k];
        if (round_a) a = gpuplug_e4m3_to_f32(gpuplug_f32_to_e4m3(a));
        sum += double{a} * B[std::size_t{k} * N + j];
      }
      C[std::size_t{i} * N + j] = static_cast<float>(sum);
    }
  return C;
}

/// gemm::<func> on 67x131x45 (no dimension a multiple of a tile), with the grid from its
/// published n_tile, against the CPU; returns that n_tile.
inline std::uint32_t check_gemm_runs(Instance& dev, const char* func, bool round_a) {
  const std::uint32_t M = 67, N = 131, K = 45;
  const auto A = random_floats(std::size_t{M} * K, 1);
  const auto B = random_floats(std::size_t{K} * N, 2);
  std::uint64_t a = dev.upload(A), b = dev.upload(B), c = dev.alloc(std::size_t{M} * N * 4);
  const std::uint32_t n_tile = dev.published("gemm", std::string(func) + "_n_tile");
  BOOST_TEST_REQUIRE(n_tile > 0u);
  const std::uint64_t f = dev.function("gemm", func);
  void* params[] = {const_cast<std::uint32_t*>(&M),
                    const_cast<std::uint32_t*>(&N),
                    const_cast<std::uint32_t*>(&K),
                    &a,
                    &b,
                    &c};
  dev.launch(f, dim(blocks_of(N, n_tile), blocks_of(M, 16)), dim(16, 16), params, func);
  dev.ok(dev.t.synchronize(dev.inst), "synchronize");
  const auto got = dev.download<float>(c, std::size_t{M} * N);
  const auto want = gemm_reference(M, N, K, A, B, round_a);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::fabs(got[i] - want[i]) > 1e-4f * (1.0f + std::fabs(want[i]))) ++bad;
  BOOST_TEST(bad == 0u, func << ": " << bad << " of " << got.size() << " differ from the CPU");
  for (std::uint64_t p : {a, b, c}) dev.free(p);
  return n_tile;
}

/// Both E4M3 casts bit for bit as kernels/common/e4m3.h computes them (NaN comes back as the
/// same NaN), on random values and the edges: zeros, saturation, subnormals, NaN, infinities.
inline void check_e4m3_casts() {
  Instance dev;
  std::vector<float> in = random_floats(4096, 5);
  for (float v : {0.0f, -0.0f, 448.0f, 464.0f, -1e9f, 1e-3f, 0.0009765625f, 0.00146484375f, NAN,
                  INFINITY, -INFINITY})
    in.push_back(v);
  const auto n = static_cast<std::uint32_t>(in.size());
  std::uint64_t d_in = dev.upload(in), d_out = dev.alloc(n), d_back = dev.alloc(std::size_t{n} * 4);
  const std::uint64_t to8 = dev.function("e4m3", "cast_f32_e4m3");
  const std::uint64_t to32 = dev.function("e4m3", "cast_e4m3_f32");
  void* p1[] = {const_cast<std::uint32_t*>(&n), &d_in, &d_out};
  void* p2[] = {const_cast<std::uint32_t*>(&n), &d_out, &d_back};
  dev.launch(to8, dim(blocks_of(n, 256)), dim(256), p1, "cast_f32_e4m3");
  dev.launch(to32, dim(blocks_of(n, 256)), dim(256), p2, "cast_e4m3_f32");
  const auto bytes = dev.download<std::uint8_t>(d_out, n);
  const auto back = dev.download<float>(d_back, n);
  std::size_t bad = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::uint8_t want = gpuplug_f32_to_e4m3(in[i]);
    const float want_back = gpuplug_e4m3_to_f32(want);
    // Bits, not values: NaN must come back as the same NaN.
    // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
    if (bytes[i] != want || std::memcmp(&back[i], &want_back, 4) != 0) ++bad;
  }
  BOOST_TEST(bad == 0u);
  for (std::uint64_t p : {d_in, d_out, d_back}) dev.free(p);
}

/// memset, d2d and d2h on a created stream land in order; a destroyed stream is refused; managed
/// memory works where device_info says so and is unsupported elsewhere. Two buffers are left
/// live on purpose: destroy sweeps them (with a warning) instead of leaking.
inline void check_streams_and_managed_memory() {
  Instance dev;
  const std::uint64_t stream = dev.stream();
  const std::size_t n = 1 << 20;
  const std::uint64_t a = dev.alloc(n), b = dev.alloc(n);
  std::vector<std::uint8_t> host(n, 0);
  dev.ok(dev.t.memset_d8(dev.inst, a, 0x5A, n, stream), "memset_d8");
  dev.ok(dev.t.copy_d2d_async(dev.inst, b, a, n, stream), "copy_d2d_async");
  dev.ok(dev.t.copy_d2h_async(dev.inst, host.data(), b, n, stream), "copy_d2h_async");
  dev.ok(dev.t.stream_synchronize(dev.inst, stream), "stream_synchronize");
  BOOST_TEST(std::count(host.begin(), host.end(), 0x5A) == static_cast<std::ptrdiff_t>(n));
  dev.ok(dev.t.stream_destroy(dev.inst, stream), "stream_destroy");
  BOOST_TEST(dev.t.stream_destroy(dev.inst, stream) == GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(dev.t.stream_synchronize(dev.inst, stream) == GPUPLUG_STATUS_INVALID_ARGUMENT);

  gpuplug_device_info_t info{};
  info.struct_size = sizeof info;
  dev.ok(dev.t.device_info(dev.inst, &info), "device_info");
  std::uint64_t managed = 0;
  const gpuplug_status_t s = dev.t.alloc_managed(dev.inst, 4096, "test", &managed);
  if (info.managed_memory != 0) {
    dev.ok(s, "alloc_managed");
    dev.free(managed);
  } else {
    BOOST_TEST(s == GPUPLUG_STATUS_UNSUPPORTED);
  }
}

}  // namespace gpuplug::test
