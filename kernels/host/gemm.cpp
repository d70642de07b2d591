// SPDX-License-Identifier: Apache-2.0
// Host kernel module "gemm": row-major f32 GEMM, and a variant that rounds A through E4M3 first.
// Each block computes 16 rows x kNTile columns of C with the fastest kernel the CPU runs (AVX-512,
// AVX2 + FMA, or portable C++), chosen once when the module loads; GPUPLUG_HOST_GEMM_ISA
// (avx512, avx2, portable) forces one, for measurement. Launch rule (every backend):
// grid = (ceil(N / n_tile), ceil(M / 16)), block = (16, 16).
#include "e4m3.h"
#include "gemm_block.hpp"

#include <gpuplug/host_kernel.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace gpuplug::host_kernels;
using namespace gpuplug::host_gemm;

namespace {

enum Isa : std::uint32_t { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };

bool cpu_runs(Isa isa) noexcept {
#if defined(GPUPLUG_HOST_GEMM_X86)
  __builtin_cpu_init();  // this may run from a load-time initializer, before libgcc's own
  if (isa == kAvx512) return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  if (isa == kAvx2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return isa == kPortable;
}

/// The best kernel this CPU runs, or the one GPUPLUG_HOST_GEMM_ISA names. A name that is not a
/// kernel, or one the CPU cannot run, is reported on stderr (a module cannot fail its load) and
/// the best kernel is used instead.
Isa choose_isa() noexcept {
  const Isa best = cpu_runs(kAvx512) ? kAvx512 : cpu_runs(kAvx2) ? kAvx2 : kPortable;
  const char* env = std::getenv("GPUPLUG_HOST_GEMM_ISA");
  if (env == nullptr || *env == '\0') return best;
  Isa want = best;
  if (std::strcmp(env, "avx512") == 0) {
    want = kAvx512;
  } else if (std::strcmp(env, "avx2") == 0) {
    want = kAvx2;
  } else if (std::strcmp(env, "portable") == 0) {
    want = kPortable;
  } else {
    std::fprintf(stderr,
                 "gpuplug gemm: GPUPLUG_HOST_GEMM_ISA='%.64s' is not avx512, avx2 or portable; "
                 "using the CPU's best kernel\n",
                 env);
    return best;
  }
  if (!cpu_runs(want)) {
    std::fprintf(stderr,
                 "gpuplug gemm: GPUPLUG_HOST_GEMM_ISA=%s: this CPU cannot run that kernel; "
                 "using the CPU's best kernel\n",
                 env);
    return best;
  }
  return want;
}

using BlockFn = void (*)(const BlockJob&) noexcept;

BlockFn kernel_for(std::uint32_t isa) noexcept {
#if defined(GPUPLUG_HOST_GEMM_X86)
  if (isa == kAvx512) return block_avx512;
  if (isa == kAvx2) return block_avx2;
#endif
  (void)isa;
  return block_portable;
}

}  // namespace

// The kernel this module runs, chosen when it loaded: 0 portable, 1 AVX2 + FMA, 2 AVX-512.
// Host only; a diagnostic (benchmarks print it), not part of the gemm contract.
extern "C" GPUPLUG_PLUGIN_EXPORT const std::uint32_t gemm_host_isa = choose_isa();

namespace {

const BlockFn g_block = kernel_for(gemm_host_isa);

void gemm_block(const gpuplug_host_block_t* block, void* const* params, bool cast_a) noexcept {
  const std::uint64_t M = arg<std::uint32_t>(params, 0);
  const std::uint64_t N = arg<std::uint32_t>(params, 1);
  const std::uint64_t K = arg<std::uint32_t>(params, 2);
  // Tall grids: the block whose y is a multiple of `group` also computes the group - 1 tiles
  // below it (their blocks return at once), so that each packed panel of B serves 16 * group
  // rows of C instead of 16. group = grid_y / 2 clamped to [1, kGroup] keeps at least 2 busy
  // rows of blocks, for parallelism; it depends on the grid alone, so every block agrees.
  const std::uint64_t y = block->block_idx.y;
  const std::uint64_t grid_y = block->grid_dim.y;
  const std::uint64_t group = grid_y / 2 < 1 ? 1 : grid_y / 2 < kGroup ? grid_y / 2 : kGroup;
  if (y % group != 0) return;
  const std::uint64_t row0 = y * kRows;
  const std::uint64_t col0 = static_cast<std::uint64_t>(block->block_idx.x) * kNTile;
  if (row0 >= M || col0 >= N) return;  // blocks past the edge of C do nothing
  const std::uint64_t tiles = grid_y - y < group ? grid_y - y : group;
  const std::uint64_t row_end = row0 + tiles * kRows < M ? row0 + tiles * kRows : M;
  const BlockJob job{N,
                     K,
                     ptr<const float>(params, 3),
                     ptr<const float>(params, 4),
                     ptr<float>(params, 5),
                     row0,
                     col0,
                     row_end - row0,
                     N - col0 < kNTile ? N - col0 : kNTile,
                     cast_a};
  g_block(job);
}

}  // namespace

// gemm_f32(uint32 M, uint32 N, uint32 K, const float* A, const float* B, float* C): C = A * B.
GPUPLUG_HOST_KERNEL(gemm_f32) { gemm_block(block, params, false); }
extern "C" GPUPLUG_PLUGIN_EXPORT const std::uint32_t gemm_f32_n_tile = kNTile;

// gemm_a_e4m3(same arguments): A's elements rounded through E4M3 (no scale), B and the
// accumulation in f32.
GPUPLUG_HOST_KERNEL(gemm_a_e4m3) { gemm_block(block, params, true); }
extern "C" GPUPLUG_PLUGIN_EXPORT const std::uint32_t gemm_a_e4m3_n_tile = kNTile;
extern "C" GPUPLUG_PLUGIN_EXPORT const std::uint32_t gemm_a_e4m3_a_e4m3 = 1;

// The argument sizes, for plugins that copy arguments (<gpuplug/kernel_args.h>).
GPUPLUG_HOST_KERNEL_ARGS(gemm_f32, 6, {4, 4, 4, 8, 8, 8});
GPUPLUG_HOST_KERNEL_ARGS(gemm_a_e4m3, 6, {4, 4, 4, 8, 8, 8});
