// SPDX-License-Identifier: Apache-2.0
// Test-only module: checks the block indices and shared memory the host executor hands out.
#include <gpuplug/host_kernel.hpp>

using namespace gpuplug::host_kernels;

// block_probe(uint32* out): for each block, out[linear block id] = linear id + 1 when the block
// saw a consistent view: block_idx inside grid_dim, 256-byte aligned shared memory of
// shared_bytes that no other block wrote to while this one ran; 0 otherwise. Launch with any
// grid and block and shared_bytes >= 8.
GPUPLUG_HOST_KERNEL(block_probe) {
  std::uint32_t* out = ptr<std::uint32_t>(params, 0);
  const gpuplug_dim3_t g = block->grid_dim, i = block->block_idx;
  const std::uint64_t id =
      i.x + static_cast<std::uint64_t>(g.x) * (i.y + static_cast<std::uint64_t>(g.y) * i.z);
  bool ok = i.x < g.x && i.y < g.y && i.z < g.z && block->shared != nullptr &&
            block->shared_bytes >= 8 && reinterpret_cast<std::uintptr_t>(block->shared) % 256 == 0;
  if (ok) {
    // Fill the whole buffer with our id, work a little, and check nobody else touched it.
    volatile std::uint32_t* shared = static_cast<std::uint32_t*>(block->shared);
    const std::uint32_t words = block->shared_bytes / 4;
    for (std::uint32_t w = 0; w < words; ++w) shared[w] = static_cast<std::uint32_t>(id);
    for (int spin = 0; spin < 2000; ++spin) shared[spin % words] = static_cast<std::uint32_t>(id);
    for (std::uint32_t w = 0; w < words; ++w)
      ok = ok && shared[w] == static_cast<std::uint32_t>(id);
  }
  out[id] = ok ? static_cast<std::uint32_t>(id + 1) : 0u;
}
