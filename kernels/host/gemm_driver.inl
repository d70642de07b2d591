// SPDX-License-Identifier: Apache-2.0
// The block loop every vectorised gemm kernel shares, included by one file per instruction set
// after it defines GPUPLUG_GEMM_TARGET (that file's target attribute) and its micro-kernel type,
// so that everything here is compiled for that instruction set and only called where the CPU has
// it. No include guard: each includer gets its own copy in an unnamed namespace.
//
// The micro-kernel type provides kMR (rows of C it keeps in registers), kNR (columns: 16), kKC
// (the depth of one packed panel), kPack16 (whether it has pack16(a, lda, kc, ap), a faster
// packer of 16 full rows when kMR is 16) and
//   static void run(kc, ap, bp, c, ldc, rows, cols, accumulate)
// which computes C[rows x cols] (+)= Ap[kc x kMR] x Bp[kc x 16] with Ap packed (k-major, kMR
// values per k, zero past `rows`), Bp packed (16 values per k, zero past `cols`), C row-major
// and read first when `accumulate`.

namespace {

using gpuplug::host_gemm::BlockJob;
using gpuplug::host_gemm::kNTile;
using gpuplug::host_gemm::kRows;

/// Packs rows [0, rows) of A's columns [pc, pc + kc) into ap, k-major, mr values per k, rows past
/// `rows` zero; with `cast`, each value is rounded through E4M3 here, once per block.
template <int mr>
GPUPLUG_GEMM_TARGET void pack_a(const float* a, std::uint64_t lda, std::uint64_t rows,
                                std::uint64_t kc, bool cast, float* ap) noexcept {
  for (int i = 0; i < mr; ++i) {
    float* dst = ap + i;
    if (static_cast<std::uint64_t>(i) < rows) {
      const float* src = a + static_cast<std::uint64_t>(i) * lda;
      for (std::uint64_t k = 0; k < kc; ++k) dst[k * mr] = src[k];
    } else {
      for (std::uint64_t k = 0; k < kc; ++k) dst[k * mr] = 0.0f;
    }
  }
  if (cast) {
    for (std::uint64_t i = 0; i < kc * mr; ++i) ap[i] = gpuplug::host_gemm::round_e4m3(ap[i]);
  }
}

/// Copies B's rows [0, kc) x columns [0, cols) into bp as strips 16 wide (strip s at
/// bp + s * kc * 16, zero past `cols`), row by row so that each row's lines (one page) are
/// fetched together. Packed, a strip is contiguous: the micro-kernel's walks over it, one per
/// panel of rows, stream from L1 and L2, where B's own rows, N floats apart, share cache sets.
GPUPLUG_GEMM_TARGET inline void pack_b(const float* b, std::uint64_t ldb, std::uint64_t kc,
                                       std::uint64_t cols, float* bp) noexcept {
  const std::uint64_t full = cols / 16;
  const std::uint64_t rest = cols - full * 16;
  for (std::uint64_t k = 0; k < kc; ++k) {
    const float* src = b + k * ldb;
    // The row 16 ahead, each line of it (a hint, never a fault): each row of B is a page of its
    // own once N reaches 1024, where the hardware prefetchers stop.
    const std::uintptr_t ahead = reinterpret_cast<std::uintptr_t>(src) + 16 * ldb * sizeof(float);
    for (std::uint64_t x = 0; x < cols; x += 16)
      __builtin_prefetch(reinterpret_cast<const void*>(ahead + x * sizeof(float)));
    for (std::uint64_t s = 0; s < full; ++s) {
      float* dst = bp + (s * kc + k) * 16;
      for (int x = 0; x < 16; ++x) dst[x] = src[s * 16 + x];
    }
    if (rest != 0) {
      float* dst = bp + (full * kc + k) * 16;
      for (std::uint64_t x = 0; x < 16; ++x) dst[x] = x < rest ? src[full * 16 + x] : 0.0f;
    }
  }
}

/// One block: for each panel of kKC along K, B's columns packed once, then for each 16 rows,
/// A's rows packed (so the E4M3 rounding happens once per block and panel) and every 16-wide
/// strip through the micro-kernel, panel by panel of kMR rows. C holds the partial sums between
/// panels of K, so each element still sums its products in ascending k.
template <class Micro>
GPUPLUG_GEMM_TARGET void run_block(const BlockJob& job) noexcept {
  static_assert(Micro::kNR == 16, "pack_b lays B out in strips of 16 columns");
  constexpr int mr = Micro::kMR;
  constexpr int panels = (kRows + mr - 1) / mr;
  constexpr std::uint64_t kc_max = Micro::kKC;
  alignas(64) float ap[panels * mr * kc_max];
  alignas(64) float bp[kc_max * kNTile];
  float* c0 = job.C + job.row0 * job.N + job.col0;
  if (job.K == 0) {  // an empty sum: C = 0
    for (std::uint64_t i = 0; i < job.rows; ++i)
      for (std::uint64_t j = 0; j < job.cols; ++j) c0[i * job.N + j] = 0.0f;
    return;
  }
  for (std::uint64_t pc = 0; pc < job.K; pc += kc_max) {
    const std::uint64_t kc = job.K - pc < kc_max ? job.K - pc : kc_max;
    pack_b(job.B + pc * job.N + job.col0, job.N, kc, job.cols, bp);
    // While this panel computes, the next one's rows of B are fetched into L2 a slice per group
    // of 16 rows (the next panel of K, or after the last one the first panel of the block to
    // the right, which this thread most likely claims next): pack_b then finds them there.
    const bool last = pc + kc >= job.K;
    const float* next = last ? job.B + job.col0 + job.cols : job.B + (pc + kc) * job.N + job.col0;
    const std::uint64_t next_cols =
        last ? (job.N - job.col0 - job.cols < kNTile ? job.N - job.col0 - job.cols : kNTile)
             : job.cols;
    const std::uint64_t next_kc = last ? (job.K < kc_max ? job.K : kc_max)
                                       : (job.K - pc - kc < kc_max ? job.K - pc - kc : kc_max);
    const std::uint64_t groups = (job.rows + kRows - 1) / kRows;
    const std::uint64_t slice = (next_kc + groups - 1) / groups;
    for (std::uint64_t r0 = 0; r0 < job.rows; r0 += kRows) {
      const std::uint64_t group = job.rows - r0 < kRows ? job.rows - r0 : kRows;
      const std::uint64_t k_begin = r0 / kRows * slice;
      const std::uint64_t k_end = k_begin + slice < next_kc ? k_begin + slice : next_kc;
      for (std::uint64_t k = k_begin; k < k_end; ++k)
        for (std::uint64_t x = 0; x < next_cols; x += 16)
          __builtin_prefetch(next + k * job.N + x, 0, 2);
      for (int p = 0; p < panels; ++p) {
        const std::uint64_t first = static_cast<std::uint64_t>(p) * mr;
        if (first >= group) break;
        const float* a = job.A + (job.row0 + r0 + first) * job.K + pc;
        if constexpr (Micro::kPack16) {
          if (group == 16) {  // a full 16-row panel, the micro-kernel's own packer
            Micro::pack16(a, job.K, kc, ap);
            if (job.cast_a)
              for (std::uint64_t i = 0; i < kc * 16; ++i)
                ap[i] = gpuplug::host_gemm::round_e4m3(ap[i]);
            continue;
          }
        }
        pack_a<mr>(a, job.K, group - first, kc, job.cast_a, ap + p * mr * kc_max);
      }
      for (std::uint64_t j = 0; j < job.cols; j += 16) {
        const std::uint64_t cols = job.cols - j < 16 ? job.cols - j : 16;
        for (int p = 0; p < panels; ++p) {
          const std::uint64_t first = static_cast<std::uint64_t>(p) * mr;
          if (first >= group) break;
          const std::uint64_t rows = group - first < mr ? group - first : mr;
          Micro::run(kc, ap + p * mr * kc_max, bp + j * kc, c0 + (r0 + first) * job.N + j, job.N,
                     static_cast<unsigned>(rows), static_cast<unsigned>(cols), pc != 0);
        }
      }
    }
  }
}

}  // namespace
