// SPDX-License-Identifier: Apache-2.0
// The second pattern: a ring exchange with MPI_Isend / MPI_Irecv while a kernel runs on another
// gpuplug stream, ordered by a gpuplug event.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common.hpp"

namespace mpi_example {

/// Each rank sends (rank + 1) * pattern, `count` floats, to rank + 1 and receives from rank - 1
/// (modulo the size), while a kernel on a second stream adds its own send buffer into a work
/// buffer; once the receive is complete it adds the received one too, and every element of the
/// work buffer is checked: (rank + 1 + left + 1) * pattern. Rank 0 prints the slowest rank's
/// time. Collective. Returns the number of wrong elements over all ranks. Throws as
/// allreduce_sweep.
std::uint64_t ring_exchange(const Rank& r, gpuplug::KernelHandle axpy, Path path,
                            std::size_t count);

}  // namespace mpi_example
