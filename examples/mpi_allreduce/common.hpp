// SPDX-License-Identifier: Apache-2.0
// What both patterns of mpi_allreduce share: one rank's backend and what MPI may take from it,
// a gpuplug allocation freed on scope exit, the rank's fill kernel and the element check.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <gpuplug/gpuplug.hpp>
#include <string>
#include <vector>

#include "../common/device_buffer.hpp"

namespace mpi_example {

/// Throws std::runtime_error naming `call` and MPI's error string when `rc` is not MPI_SUCCESS
/// (MPI_COMM_WORLD's handler is set to MPI_ERRORS_RETURN, so failures come back here).
void check_mpi(const char* call, int rc);

/// How a message reaches MPI: the backend's own memory (`native_pointer`), or a host copy made
/// on a gpuplug stream before the call and copied back after it.
enum class Path { direct, staged };
const char* path_name(Path path) noexcept;

/// One process of the job: where it sits, its backend, and whether its MPI library reads and
/// writes that backend's memory itself.
struct Rank {
  MPI_Comm comm = MPI_COMM_WORLD;
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  gpuplug::GpuBackend* gpu = nullptr;
  bool mpi_takes_device_memory = false;
  std::string why;  // the reason for mpi_takes_device_memory, for the report
};

/// Whether the MPI library takes memory of `gpu`'s vendor directly, and why: host memory always;
/// CUDA memory when the library is CUDA-aware (MPIX_Query_cuda_support), HIP memory when it is
/// ROCm-aware (MPIX_Query_rocm_support), each asked only where <mpi-ext.h> declares it.
bool mpi_takes_memory_of(gpuplug::GpuBackend& gpu, std::string& why);

/// A gpuplug allocation, freed when it goes out of scope (the examples' shared one).
using gpuplug_examples::DeviceBuffer;

/// A gpuplug stream, destroyed (after its work) when it goes out of scope.
class OwnedStream {
 public:
  explicit OwnedStream(gpuplug::GpuBackend& gpu) : gpu_(&gpu), stream_(gpu.create_stream()) {}
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  ~OwnedStream() {
    try {
      gpu_->destroy_stream(stream_);
    } catch (...) {  // as ~DeviceBuffer
    }
  }
  gpuplug::Stream get() const noexcept { return stream_; }

 private:
  gpuplug::GpuBackend* gpu_;
  gpuplug::Stream stream_;
};

/// A gpuplug event (ABI 1.1), destroyed when it goes out of scope.
class OwnedEvent {
 public:
  explicit OwnedEvent(gpuplug::GpuBackend& gpu) : gpu_(&gpu), event_(gpu.create_event()) {}
  OwnedEvent(const OwnedEvent&) = delete;
  OwnedEvent& operator=(const OwnedEvent&) = delete;
  ~OwnedEvent() {
    try {
      gpu_->destroy_event(event_);
    } catch (...) {  // as ~DeviceBuffer
    }
  }
  gpuplug::Event get() const noexcept { return event_; }

 private:
  gpuplug::GpuBackend* gpu_;
  gpuplug::Event event_;
};

/// The pattern every rank scales: element i is (i mod 251) + 1. A sum over ranks of multiples
/// of it is exact in float for any job below a few thousand ranks, so the checks compare for
/// equality.
float pattern(std::size_t i) noexcept;
std::vector<float> pattern_of(std::size_t count);

/// Queues y = (rank + 1) * x on `stream`: a memset of y to zero, then the axpy kernel.
/// `x` holds pattern_of(count) at least.
void fill_from_rank(const Rank& r, gpuplug::KernelHandle axpy, gpuplug::Stream stream,
                    gpuplug::DevicePtr x, gpuplug::DevicePtr y, std::uint32_t count);

/// Queues y = x + y on `stream` (the axpy kernel with a = 1).
void accumulate(const Rank& r, gpuplug::KernelHandle axpy, gpuplug::Stream stream,
                gpuplug::DevicePtr x, gpuplug::DevicePtr y, std::uint32_t count);

/// Compares every element of `got` with scale * pattern(i). Prints the first few mismatches,
/// each naming this rank, `what` and the element; returns how many elements differ.
std::uint64_t check_elements(const Rank& r, const char* what, const std::vector<float>& got,
                             float scale);

}  // namespace mpi_example
