// SPDX-License-Identifier: Apache-2.0
// Conformance cases for lifetimes: idempotent release, destroy with live state, cycles, the C
// table.
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <thread>

#include "helpers.hpp"

namespace gpuplug::conformance::detail {

namespace {

void release_idempotent(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  OpCache& cache = gpu.op_cache();
  cache.release(gpu);  // on an empty cache
  cache.release(gpu);
  cache.scratch(gpu, "conformance", 1 << 16);
  cache.kernel(gpu, "gemm", "gemm_f32");
  cache.release(gpu);
  cache.release(gpu);
  GPUPLUG_CHECK_EQ(gpu.ledger_stats().live_count, 0u);
  GPUPLUG_CHECK_EQ(cache.kernel_count(), 0u);
  GPUPLUG_CHECK_EQ(cache.scratch_count(), 0u);
  GPUPLUG_CHECK_EQ(gpu.sweep_unreleased().live_count,
                   0u);  // nothing left, and sweeping nothing is fine
  GPUPLUG_CHECK_EQ(gpu.sweep_unreleased().live_count, 0u);
}

void destroy_with_live_resources(Context& ctx) {
  // Destroying a backend that still holds allocations, scratch, loaded modules, a stream with
  // queued work and memoized kernels must neither crash nor throw: destroy sweeps (and warns).
  const auto image = ctx.module_image("axpy");
  ScopedLogLevel quiet(LogLevel::error);
  for (int round = 0; round < 3; ++round) {
    auto gpu = ctx.make_backend();
    gpu->alloc(4096, "conformance_leak");
    if (gpu->device_info().managed_memory) gpu->alloc_managed(4096, "conformance_leak");
    gpu->op_cache().scratch(*gpu, "conformance", 8192);
    gpu->load_module("axpy_bytes", image);
    const Stream s = gpu->create_stream();
    const DevicePtr x = gpu->alloc(1 << 20, "conformance_leak");
    const DevicePtr y = gpu->alloc(1 << 20, "conformance_leak");
    gpu->memset(x, 0, 1 << 20, s);
    gpu->memset(y, 0, 1 << 20, s);
    for (int i = 0; i < 8; ++i) launch_axpy(*gpu, (1 << 20) / 4, 1.0f, x, y, s);
    gpu.reset();  // no synchronize, no free, no release: all of it is destroy's job
  }
}

void library_outlives_registry(Context& ctx) {
  auto registry = ctx.target().make_registry();
  auto gpu = registry->create(ctx.target().selector());
  registry.reset();  // the backend keeps its plugin library loaded
  const std::vector<float> x{1, 2, 3}, y{1, 1, 1};
  GPUPLUG_CHECK((run_axpy(*gpu, 2.0f, x, y) == std::vector<float>{3, 5, 7}));
  gpu->op_cache().release(*gpu);
  gpu.reset();
}

std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

void one_cycle(Context& ctx, std::size_t i) {
  auto gpu = ctx.make_backend();
  OpCache& cache = gpu->op_cache();
  cache.kernel(*gpu, "gemm", "gemm_f32");  // loads gemm from modules_dir and reads its symbols
  const DevicePtr scratch = cache.scratch(*gpu, "conformance", 64 * 1024);
  DeviceBuffer x(*gpu, 1024 * sizeof(float));
  gpu->memset(x.ptr(), 0, x.bytes());
  gpu->memset(scratch, 0, 1024 * sizeof(float));
  launch_axpy(*gpu, 1024, 1.0f, x.ptr(), scratch);  // loads axpy
  gpu->synchronize();
  x.free();
  cache.release(*gpu);
  const LedgerStats left = gpu->ledger_stats();
  GPUPLUG_CHECK_MSG(left.live_count == 0,
                    "cycle " << i << " left " << left.live_count
                             << " allocation(s) on the ledger: " << gpu->alloc_report(3));
}

void create_destroy_cycles(Context& ctx) {
  const std::size_t cycles = lifecycle_cycles();
  const std::size_t warmup = std::min<std::size_t>(50, cycles / 4 + 1);
  for (std::size_t i = 0; i < warmup; ++i) one_cycle(ctx, i);  // first-use allocations settle
  const std::size_t before = resident_bytes();
  for (std::size_t i = 0; i < cycles; ++i) one_cycle(ctx, i);
  const std::size_t after = resident_bytes();
  const double grown_mib =
      (static_cast<double>(after) - static_cast<double>(before)) / (1024.0 * 1024.0);
  std::ostringstream os;
  os.precision(3);
  os << cycles << " cycles after " << warmup << " warm-up; RSS grew " << grown_mib << " MiB";
  if (!sanitizer_name().empty()) {
    ctx.note(os.str() + ", not checked: RSS is meaningless under " + std::string(sanitizer_name()));
    return;
  }
  GPUPLUG_CHECK_MSG(after < before + 4 * 1024 * 1024, os.str() << " (limit 4 MiB)");
  ctx.note(os.str());
}

// ---- the C table, straight from the plugin file ------------------------------------------------

void abi_table(Context& ctx) {
  const Target& target = ctx.target();
  RawPlugin plugin(target.plugin_file);
  const gpuplug_plugin_v1* t = plugin.entry(GPUPLUG_ABI_VERSION);
  GPUPLUG_CHECK_MSG(t != nullptr, "gpuplug_plugin_entry returned null for the host's own version");
  GPUPLUG_CHECK(t->struct_size >= GPUPLUG_PLUGIN_V1_MIN_SIZE);
  GPUPLUG_CHECK_EQ(GPUPLUG_ABI_MAJOR(t->abi_version), std::uint32_t{GPUPLUG_ABI_VERSION_MAJOR});
  GPUPLUG_CHECK(t->name != nullptr && t->vendor != nullptr && t->version != nullptr);
  GPUPLUG_CHECK_EQ(std::string(t->name), target.plugin);
  GPUPLUG_CHECK(std::strlen(t->vendor) > 0 && std::strlen(t->version) > 0);
  for (const char* c = t->name; *c != '\0'; ++c) {
    GPUPLUG_CHECK_MSG((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_',
                      "plugin name '" << t->name << "' is not [a-z0-9_]+");
  }
  // Required slots (everything but the ones abi.h marks optional).
  const void* required[] = {reinterpret_cast<const void*>(t->probe),
                            reinterpret_cast<const void*>(t->describe_device),
                            reinterpret_cast<const void*>(t->create),
                            reinterpret_cast<const void*>(t->destroy),
                            reinterpret_cast<const void*>(t->last_error),
                            reinterpret_cast<const void*>(t->alloc),
                            reinterpret_cast<const void*>(t->free),
                            reinterpret_cast<const void*>(t->memory_info),
                            reinterpret_cast<const void*>(t->device_info),
                            reinterpret_cast<const void*>(t->copy_h2d),
                            reinterpret_cast<const void*>(t->copy_d2h),
                            reinterpret_cast<const void*>(t->copy_d2d),
                            reinterpret_cast<const void*>(t->memset_d8),
                            reinterpret_cast<const void*>(t->stream_create),
                            reinterpret_cast<const void*>(t->stream_destroy),
                            reinterpret_cast<const void*>(t->stream_synchronize),
                            reinterpret_cast<const void*>(t->synchronize),
                            reinterpret_cast<const void*>(t->load_module),
                            reinterpret_cast<const void*>(t->has_module),
                            reinterpret_cast<const void*>(t->get_function),
                            reinterpret_cast<const void*>(t->get_global),
                            reinterpret_cast<const void*>(t->launch),
                            reinterpret_cast<const void*>(t->ledger_stats),
                            reinterpret_cast<const void*>(t->sweep_unreleased)};
  for (std::size_t i = 0; i < std::size(required); ++i) {
    GPUPLUG_CHECK_MSG(required[i] != nullptr, "required slot #" << i << " of the table is null");
  }

  // Negotiation: a newer minor is answered with ours (or lower); another major must not crash.
  const gpuplug_plugin_v1* newer =
      plugin.entry(GPUPLUG_MAKE_VERSION(GPUPLUG_ABI_VERSION_MAJOR, 0xFFFF));
  GPUPLUG_CHECK(newer != nullptr);
  GPUPLUG_CHECK_EQ(GPUPLUG_ABI_MAJOR(newer->abi_version),
                   std::uint32_t{GPUPLUG_ABI_VERSION_MAJOR});
  (void)plugin.entry(GPUPLUG_MAKE_VERSION(GPUPLUG_ABI_VERSION_MAJOR + 1, 0));

  gpuplug_probe_result_t probe{};
  probe.struct_size = sizeof probe;
  GPUPLUG_CHECK_EQ(t->probe(&probe), GPUPLUG_STATUS_SUCCESS);
  GPUPLUG_CHECK_EQ(probe.reason, GPUPLUG_PROBE_AVAILABLE);
  GPUPLUG_CHECK(probe.device_count > target.ordinal);
  GPUPLUG_CHECK(std::memchr(probe.message, '\0', sizeof probe.message) != nullptr);
  gpuplug_device_info_t info{};
  info.struct_size = sizeof info;
  GPUPLUG_CHECK_EQ(t->describe_device(target.ordinal, &info), GPUPLUG_STATUS_SUCCESS);
  GPUPLUG_CHECK_EQ(info.ordinal, target.ordinal);
  GPUPLUG_CHECK(std::strlen(info.name) > 0);
  gpuplug_device_info_t missing{};
  missing.struct_size = sizeof missing;
  GPUPLUG_CHECK(t->describe_device(probe.device_count + 100, &missing) != GPUPLUG_STATUS_SUCCESS);

  // create refuses what it cannot do, and says why in the caller's buffer.
  char error[512] = {};
  gpuplug_instance_t inst = nullptr;
  const gpuplug_option_t bad_option{"no_such_option", "1"};
  GPUPLUG_CHECK(t->create(target.ordinal, &bad_option, 1, nullptr, &inst, error, sizeof error) !=
                GPUPLUG_STATUS_SUCCESS);
  GPUPLUG_CHECK_MSG(std::strstr(error, "no_such_option") != nullptr,
                    "create's error does not name the option: " << error);
  error[0] = '\0';
  GPUPLUG_CHECK(t->create(probe.device_count + 100, nullptr, 0, nullptr, &inst, error,
                          sizeof error) != GPUPLUG_STATUS_SUCCESS);
  GPUPLUG_CHECK_MSG(std::strlen(error) > 0, "create of a missing device gave no reason");
  // A tiny error buffer is truncated, never overrun.
  char tiny[4] = {'x', 'x', 'x', 'x'};
  GPUPLUG_CHECK(t->create(target.ordinal, &bad_option, 1, nullptr, &inst, tiny, 3) !=
                GPUPLUG_STATUS_SUCCESS);
  GPUPLUG_CHECK_MSG(tiny[3] == 'x' && std::memchr(tiny, '\0', 3) != nullptr,
                    "create overran or did not terminate a 3-byte error buffer");

  // A real instance without host services (logging is then dropped), per-thread last_error.
  GPUPLUG_CHECK_EQ(t->create(target.ordinal, nullptr, 0, nullptr, &inst, error, sizeof error),
                   GPUPLUG_STATUS_SUCCESS);
  GPUPLUG_CHECK(inst != nullptr);
  GPUPLUG_CHECK_EQ(t->free(inst, 0), GPUPLUG_STATUS_SUCCESS);
  GPUPLUG_CHECK_EQ(t->free(inst, 0xdead0000), GPUPLUG_STATUS_INVALID_ARGUMENT);
  char message[512] = {};
  const std::size_t length = t->last_error(inst, message, sizeof message);
  GPUPLUG_CHECK_MSG(length > 0 && std::strlen(message) > 0,
                    "last_error is empty right after a failure");
  std::size_t other_length = 1;
  std::thread([&] {
    char other[512] = {};
    other_length = t->last_error(inst, other, sizeof other);
  }).join();
  GPUPLUG_CHECK_MSG(other_length == 0, "another thread sees this thread's last error");
  std::uint64_t p = 0;
  GPUPLUG_CHECK_EQ(t->alloc(inst, 64, "conformance_abi", &p), GPUPLUG_STATUS_SUCCESS);
  gpuplug_ledger_stats_t stats{};
  stats.struct_size = sizeof stats;
  GPUPLUG_CHECK_EQ(t->ledger_stats(inst, &stats), GPUPLUG_STATUS_SUCCESS);
  GPUPLUG_CHECK_EQ(stats.live_count, 1u);
  if (t->ledger_report != nullptr) {
    char small[8] = {};
    const std::size_t full = t->ledger_report(inst, 10, small, sizeof small);
    GPUPLUG_CHECK_MSG(full >= std::strlen(small), "ledger_report returned less than it wrote");
    GPUPLUG_CHECK(std::memchr(small, '\0', sizeof small) != nullptr);
  }
  GPUPLUG_CHECK_EQ(t->free(inst, p), GPUPLUG_STATUS_SUCCESS);
  t->destroy(inst);
}

const Case cases[] = {
    {"release_idempotent", "OpCache::release and sweep_unreleased may run again harmlessly",
     release_idempotent},
    {"destroy_with_live_resources",
     "destroying a backend with memory, modules, scratch and queued work is clean",
     destroy_with_live_resources},
    {"library_outlives_registry", "a backend keeps working after its registry is gone",
     library_outlives_registry},
    {"create_destroy_cycles",
     "create/destroy cycles with modules and scratch leave no ledger entries and < 4 MiB RSS",
     create_destroy_cycles},
    {"abi_table",
     "the C table: identity, required slots, negotiation, probe, create errors, per-thread "
     "last_error",
     abi_table},
};

}  // namespace

std::span<const Case> lifecycle_cases() { return cases; }

}  // namespace gpuplug::conformance::detail
