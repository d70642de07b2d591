// SPDX-License-Identifier: Apache-2.0
// The first pattern: MPI_Allreduce of buffers on gpuplug's ledger, over a sweep of message sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common.hpp"

namespace mpi_example {

struct SweepOptions {
  std::size_t min_floats = 1024;
  std::size_t max_floats = std::size_t{1} << 22;  // up to 16 MiB per message
  unsigned reps = 10;
  std::vector<Path> paths;
  int corrupt_rank = -1;  // this rank adds 1000 to element corrupt_element of its contribution
  std::size_t corrupt_element = 0;
};

/// For each path and each size from min_floats to max_floats (times 4 each step): fills the
/// send buffer with (rank + 1) * pattern on a gpuplug stream (axpy), all-reduces it into the
/// receive buffer with MPI_SUM, checks every element on every rank, then times `reps` more
/// all-reduces. Rank 0 prints one line per size: the median time (the slowest rank's) and the
/// algorithm and bus bandwidth. Collective: every rank calls it with the same options.
/// Returns the number of wrong elements over all ranks (the same on every rank). Throws
/// gpuplug::Error or std::runtime_error (an MPI failure).
std::uint64_t allreduce_sweep(const Rank& r, gpuplug::KernelHandle axpy, const SweepOptions& o);

}  // namespace mpi_example
