// SPDX-License-Identifier: Apache-2.0
// Host kernel module "sync": `gate`, a kernel whose completion the caller controls, so that the
// conformance suite can hold a stream busy for as long as it likes (docs/kernels.md).
#include <chrono>
#include <thread>

#include <gpuplug/host_kernel.hpp>

using namespace gpuplug::host_kernels;

namespace {
// flags[2] after a gate gave up waiting: nothing may hang for good on a test that lost track.
constexpr std::uint32_t kTimedOut = 0x71D;
// About 10 s of polls 100 us apart. Sleeping, not spinning: the launching thread is the test's.
constexpr std::uint32_t kPolls = 100000;
}  // namespace

// gate(volatile uint32* flags, uint8* dst, uint8 value, uint64 bytes). Launch: grid 1, block 1.
// Writes flags[0] = 1 ("started"), waits until flags[1] != 0 ("released", written by the host
// into managed memory) or about 10 s passed (then writes flags[2] = 0x71D), then fills
// dst[0, bytes) with value.
GPUPLUG_HOST_KERNEL(gate) {
  if (block->block_idx.x != 0 || block->block_idx.y != 0 || block->block_idx.z != 0) return;
  auto* flags = ptr<std::uint32_t>(params, 0);
  auto* dst = ptr<std::uint8_t>(params, 1);
  const std::uint8_t value = arg<std::uint8_t>(params, 2);
  const std::uint64_t bytes = arg<std::uint64_t>(params, 3);
  __atomic_store_n(&flags[0], 1u, __ATOMIC_SEQ_CST);
  std::uint32_t polls = 0;
  while (__atomic_load_n(&flags[1], __ATOMIC_SEQ_CST) == 0) {
    if (++polls == kPolls) {
      __atomic_store_n(&flags[2], kTimedOut, __ATOMIC_SEQ_CST);
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  for (std::uint64_t i = 0; i < bytes; ++i) dst[i] = value;
}

// The argument sizes, for plugins that copy arguments (<gpuplug/kernel_args.h>).
GPUPLUG_HOST_KERNEL_ARGS(gate, 4, {8, 8, 1, 8});
