// SPDX-License-Identifier: Apache-2.0
// Conformance cases for pinned, mapped host memory (alloc_host_pinned, host_ptr_to_device) and
// host_address (ABI 1.3): zeroed, reached by kernels, copies and memset at its device address, on
// the ledger as kind pinned outside the device budget, and its pointer checks.
#include <algorithm>
#include <cstring>
#include <vector>

#include "gpuplug/support/text.hpp"
#include "helpers.hpp"

namespace gpuplug::conformance::detail {

namespace {

/// Owns one alloc_host_pinned allocation.
class PinnedBuffer {
 public:
  PinnedBuffer(GpuBackend& gpu, std::size_t bytes, const char* site = "conformance_pinned")
      : gpu_(&gpu), host_(gpu.alloc_host_pinned(bytes, site)), bytes_(bytes) {}
  ~PinnedBuffer() {
    try {
      gpu_->free_host_pinned(host_);
    } catch (...) {
    }
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  std::byte* host() const noexcept { return static_cast<std::byte*>(host_); }
  template <class T>
  T* as() const noexcept {
    return static_cast<T*>(host_);
  }
  DevicePtr device() const { return gpu_->host_ptr_to_device(host_); }
  std::size_t bytes() const noexcept { return bytes_; }

 private:
  GpuBackend* gpu_;
  void* host_;
  std::size_t bytes_;
};

/// Skips the case on a backend without mapped host memory, after checking that it says so with
/// Error(unsupported) rather than anything else.
void require_mapped(GpuBackend& gpu) {
  void* p = nullptr;
  try {
    p = gpu.alloc_host_pinned(64, "conformance_probe");
  } catch (const Error& e) {
    if (e.status() != Status::unsupported) throw;
    skip("mapped host memory is not supported by this backend: " + std::string(e.what()));
  }
  gpu.free_host_pinned(p);
}

std::string hex_of(const void* p) { return support::hex(reinterpret_cast<std::uintptr_t>(p)); }

void pinned_is_zeroed_and_on_the_ledger(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  require_mapped(gpu);
  const LedgerStats before = gpu.ledger_stats();
  {
    PinnedBuffer b(gpu, 12345, "conformance_pinned");
    GPUPLUG_CHECK(b.host() != nullptr);
    GPUPLUG_CHECK_MSG(std::all_of(b.host(), b.host() + b.bytes(),
                                  [](std::byte v) { return v == std::byte{0}; }),
                      "alloc_host_pinned returned memory that is not zeroed");
    const LedgerStats during = gpu.ledger_stats();
    GPUPLUG_CHECK_EQ(during.live_count, before.live_count + 1);
    GPUPLUG_CHECK_EQ(during.live_bytes, before.live_bytes);  // not the device's budget
    GPUPLUG_CHECK_EQ(during.live_pinned_bytes, before.live_pinned_bytes + 12345);
    GPUPLUG_CHECK_EQ(during.total_allocs, before.total_allocs + 1);
    const MemorySnapshot s = gpu.memory_snapshot();
    const DevicePtr d = b.device();
    const auto it = std::find_if(s.allocations.begin(), s.allocations.end(),
                                 [&](const LiveAllocation& a) { return a.ptr == d; });
    GPUPLUG_CHECK_MSG(it != s.allocations.end(),
                      "the snapshot has no allocation at the device address " << show(d));
    GPUPLUG_CHECK_EQ(static_cast<int>(it->kind), static_cast<int>(AllocKind::pinned));
    GPUPLUG_CHECK_EQ(it->site, std::string("conformance_pinned"));
    GPUPLUG_CHECK_EQ(it->bytes, 12345u);
    GPUPLUG_CHECK_EQ(s.totals.live_pinned_bytes, during.live_pinned_bytes);
  }
  const LedgerStats after = gpu.ledger_stats();
  GPUPLUG_CHECK_EQ(after.live_count, before.live_count);
  GPUPLUG_CHECK_EQ(after.live_pinned_bytes, before.live_pinned_bytes);
  GPUPLUG_CHECK_EQ(after.total_frees, before.total_frees + 1);
}

void pinned_reached_by_kernels(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  require_mapped(gpu);
  constexpr std::uint32_t n = 1000;
  const std::vector<float> x = random_floats(n, -1.0f, 1.0f, 5);
  const std::vector<float> y0 = random_floats(n, -1.0f, 1.0f, 6);
  DeviceBuffer dx(gpu, n * sizeof(float));
  gpu.copy_h2d(dx.ptr(), x.data(), n * sizeof(float));
  PinnedBuffer y(gpu, n * sizeof(float));
  std::memcpy(y.host(), y0.data(), n * sizeof(float));  // the host writes it in place
  // The kernel reads and writes y at its device address; the host sees the result in place.
  launch_axpy(gpu, n, 2.0f, dx.ptr(), y.device());
  gpu.synchronize();
  const std::vector<float> want = reference_axpy(2.0f, x, y0);
  for (std::uint32_t i = 0; i < n; ++i)
    GPUPLUG_CHECK_MSG(y.as<float>()[i] == want[i], "y[" << i << "] is " << y.as<float>()[i]
                                                        << " after axpy, expected " << want[i]);
}

void pinned_reached_by_copies_and_memset(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  require_mapped(gpu);
  PinnedBuffer y(gpu, 4000);
  // memset and copies take the device address, and interior ones, like any allocation's.
  gpu.memset(y.device() + 16, 0xAB, 8);
  gpu.synchronize();
  for (std::size_t i = 0; i < 8; ++i) GPUPLUG_CHECK_EQ(y.host()[16 + i], std::byte{0xAB});
  const std::uint8_t pattern[4] = {1, 2, 3, 4};
  gpu.copy_h2d(y.device() + 40, pattern, sizeof pattern);
  GPUPLUG_CHECK(std::memcmp(y.host() + 40, pattern, sizeof pattern) == 0);
  std::uint8_t back[4] = {};
  gpu.copy_d2h(back, y.device() + 40, sizeof back);
  GPUPLUG_CHECK(std::memcmp(back, pattern, sizeof back) == 0);
  // A copy past its end is refused like any overrun.
  GPUPLUG_CHECK_THROWS(gpu.copy_d2h(back, y.device() + (y.bytes() - 2), sizeof back),
                       Status::invalid_argument);
}

void pinned_offsets_map_to_device_offsets(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  require_mapped(gpu);
  PinnedBuffer b(gpu, 4096);
  const DevicePtr base = b.device();
  GPUPLUG_CHECK(base);
  GPUPLUG_CHECK_EQ(gpu.host_ptr_to_device(b.host() + 100), base + 100);
  GPUPLUG_CHECK_EQ(gpu.host_ptr_to_device(b.host() + 4095), base + 4095);
  GPUPLUG_CHECK(gpu.host_address(base) == static_cast<void*>(b.host()));
  GPUPLUG_CHECK(gpu.host_address(base + 100) == static_cast<void*>(b.host() + 100));
  // One past the end is no longer the allocation.
  const Error past = GPUPLUG_CHECK_THROWS(gpu.host_ptr_to_device(b.host() + 4096),
                                          Status::invalid_argument);
  GPUPLUG_CHECK_MSG(contains(past.what(), hex_of(b.host() + 4096)),
                    "the error does not name the pointer: " << past.what());
}

void pinned_bad_pointers_refused(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  require_mapped(gpu);
  int on_stack = 0;
  const Error unknown =
      GPUPLUG_CHECK_THROWS(gpu.free_host_pinned(&on_stack), Status::invalid_argument);
  GPUPLUG_CHECK_MSG(contains(unknown.what(), hex_of(&on_stack)),
                    "the error does not name the pointer: " << unknown.what());
  GPUPLUG_CHECK_THROWS(gpu.host_ptr_to_device(&on_stack), Status::invalid_argument);
  gpu.free_host_pinned(nullptr);  // a no-op
  void* p = gpu.alloc_host_pinned(256, "conformance_pinned");
  // An interior pointer is not the allocation; free of its device address is not its free.
  GPUPLUG_CHECK_THROWS(gpu.free_host_pinned(static_cast<char*>(p) + 8), Status::invalid_argument);
  const DevicePtr d = gpu.host_ptr_to_device(p);
  GPUPLUG_CHECK_THROWS(gpu.free(d), Status::invalid_argument);
  GPUPLUG_CHECK_EQ(gpu.ledger_stats().live_pinned_bytes, 256u);  // still live after both
  gpu.free_host_pinned(p);
  const Error twice = GPUPLUG_CHECK_THROWS(gpu.free_host_pinned(p), Status::invalid_argument);
  GPUPLUG_CHECK_MSG(contains(twice.what(), hex_of(p)),
                    "the error does not name the pointer: " << twice.what());
  GPUPLUG_CHECK_THROWS(gpu.host_ptr_to_device(p), Status::invalid_argument);
  GPUPLUG_CHECK_THROWS(gpu.alloc_host_pinned(0), Status::invalid_argument);
}

void pinned_outside_device_budget(Context& ctx) {
  auto limited = ctx.make_backend({{"device_memory_limit", "1M"}});
  GpuBackend& gpu = *limited;
  require_mapped(gpu);
  // Past device_memory_limit: host memory is not the device's budget.
  PinnedBuffer big(gpu, 2 * 1024 * 1024);
  GPUPLUG_CHECK_EQ(gpu.ledger_stats().live_bytes, 0u);
  DeviceBuffer whole(gpu, 1024 * 1024);  // the whole limit is still there
  GPUPLUG_CHECK(whole.ptr());
}

void pinned_swept_with_the_rest(Context& ctx) {
  auto gpu = ctx.make_backend();
  require_mapped(*gpu);
  void* p = gpu->alloc_host_pinned(4096, "conformance_pinned_leak");
  GPUPLUG_CHECK(p != nullptr);
  const LedgerStats swept = gpu->sweep_unreleased();
  GPUPLUG_CHECK_EQ(swept.live_count, 1u);
  GPUPLUG_CHECK_EQ(swept.live_pinned_bytes, 4096u);
  const LedgerStats after = gpu->ledger_stats();
  GPUPLUG_CHECK_EQ(after.live_count, 0u);
  GPUPLUG_CHECK_EQ(after.live_pinned_bytes, 0u);
  // Swept means freed: the pointer is no longer this backend's.
  GPUPLUG_CHECK_THROWS(gpu->free_host_pinned(p), Status::invalid_argument);
}

void host_address_of_managed_and_device_memory(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  DeviceBuffer dev(gpu, 256);
  try {
    (void)gpu.host_address(dev.ptr());
  } catch (const Error& e) {
    // A plugin older than the slot, without a ledger snapshot to answer from, cannot say.
    if (e.status() == Status::unsupported)
      skip("host_address is not supported by this backend: " + std::string(e.what()));
  }
  const Error refused = GPUPLUG_CHECK_THROWS(gpu.host_address(dev.ptr() + 8), Status::invalid_argument);
  GPUPLUG_CHECK_MSG(contains(refused.what(), "device memory has no host address") &&
                        contains(refused.what(), support::hex((dev.ptr() + 8).value)),
                    "the refusal does not say why or name the pointer: " << refused.what());
  if (!gpu.device_info().managed_memory) {
    ctx.note("the device has no managed memory: checked the refusal for device memory only");
    return;
  }
  DeviceBuffer m = DeviceBuffer::managed(gpu, 1024);
  auto* host = static_cast<std::uint8_t*>(gpu.host_address(m.ptr()));
  GPUPLUG_CHECK(host != nullptr);
  GPUPLUG_CHECK(gpu.host_address(m.ptr() + 10) == static_cast<void*>(host + 10));
  // The host writes managed memory through its host address; the device sees it, and back.
  gpu.synchronize();
  for (std::size_t i = 0; i < 1024; ++i) host[i] = static_cast<std::uint8_t>(i * 7);
  std::vector<std::uint8_t> seen(1024);
  gpu.copy_d2h(seen.data(), m.ptr(), seen.size());
  for (std::size_t i = 0; i < 1024; ++i)
    GPUPLUG_CHECK_EQ(seen[i], static_cast<std::uint8_t>(i * 7));
  gpu.memset(m.ptr() + 100, 0x5A, 4);
  gpu.synchronize();
  for (std::size_t i = 100; i < 104; ++i) GPUPLUG_CHECK_EQ(host[i], std::uint8_t{0x5A});
}

const Case cases[] = {
    {"pinned_zeroed_on_ledger",
     "alloc_host_pinned is zeroed, on the ledger as kind pinned with its site, in live_count and "
     "live_pinned_bytes but not live_bytes",
     pinned_is_zeroed_and_on_the_ledger},
    {"pinned_kernel_access",
     "a kernel reads and writes mapped memory at host_ptr_to_device; the host sees its writes "
     "after synchronize",
     pinned_reached_by_kernels},
    {"pinned_copy_memset",
     "memset and copies take the device address of mapped memory (interior ones too); the host "
     "sees their writes; an overrun is refused",
     pinned_reached_by_copies_and_memset},
    {"pinned_offsets", "an offset host pointer maps to the same offset of the device address, "
                       "and host_address maps back",
     pinned_offsets_map_to_device_offsets},
    {"pinned_bad_pointers",
     "free_host_pinned and host_ptr_to_device refuse unknown, interior and freed pointers with "
     "invalid_argument naming them",
     pinned_bad_pointers_refused},
    {"pinned_outside_budget", "mapped host memory is not counted against device_memory_limit",
     pinned_outside_device_budget},
    {"pinned_swept", "sweep_unreleased frees mapped host memory left live and reports it",
     pinned_swept_with_the_rest},
    {"host_address",
     "host_address of managed memory is an address the host reads and writes; of device memory "
     "it is refused",
     host_address_of_managed_and_device_memory},
};

}  // namespace

std::span<const Case> pinned_cases() { return cases; }

}  // namespace gpuplug::conformance::detail
