// SPDX-License-Identifier: Apache-2.0
// The ring exchange (ring.hpp). The ordering rules with an engine that is not stream-aware:
// - MPI reads the send buffer from MPI_Isend until the request completes, so the host waits for
//   the event recorded after the fill (or after the staging copy) before posting it, and nothing
//   writes that buffer until MPI_Waitall;
// - MPI writes the receive buffer until MPI_Waitall, so gpuplug work that reads it is queued
//   only after MPI_Waitall has returned;
// - gpuplug work on other memory runs meanwhile: the compute stream waits for the same event on
//   the device (no host wait) and reads the send buffer beside MPI.
#include "ring.hpp"

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace mpi_example {

std::uint64_t ring_exchange(const Rank& r, gpuplug::KernelHandle axpy, Path path,
                            std::size_t count) {
  gpuplug::GpuBackend& gpu = *r.gpu;
  const std::size_t bytes = count * sizeof(float);
  const auto n = static_cast<std::uint32_t>(count);
  DeviceBuffer x(gpu, bytes, "mpi_allreduce ring pattern");
  DeviceBuffer send(gpu, bytes, "mpi_allreduce ring send");
  DeviceBuffer recv(gpu, bytes, "mpi_allreduce ring recv");
  DeviceBuffer work(gpu, bytes, "mpi_allreduce ring work");
  std::vector<float> host_send(path == Path::staged ? count : 0);  // pageable, as the sweep's
  std::vector<float> host_recv(path == Path::staged ? count : 0);
  const std::vector<float> p = pattern_of(count);
  gpu.copy_h2d(x.get(), p.data(), bytes);

  const OwnedStream fill(gpu);
  const OwnedStream compute(gpu);
  const OwnedEvent ready(gpu);
  const int right = (r.rank + 1) % r.size;
  const int left = (r.rank + r.size - 1) % r.size;
  constexpr int tag = 1;

  check_mpi("MPI_Barrier", MPI_Barrier(r.comm));
  const auto t0 = std::chrono::steady_clock::now();
  fill_from_rank(r, axpy, fill.get(), x.get(), send.get(), n);
  if (path == Path::staged) gpu.copy_d2h_async(host_send.data(), send.get(), bytes, fill.get());
  gpu.record(ready.get(), fill.get());
  gpu.memset(work.get(), 0, bytes, compute.get());

  gpu.synchronize(ready.get());  // the host's wait: MPI reads what the fill stream wrote
  void* send_at = path == Path::direct ? send.native() : host_send.data();
  void* recv_at = path == Path::direct ? recv.native() : host_recv.data();
  MPI_Request requests[2];
  check_mpi("MPI_Irecv", MPI_Irecv(recv_at, static_cast<int>(count), MPI_FLOAT, left, tag, r.comm,
                                   &requests[0]));
  check_mpi("MPI_Isend", MPI_Isend(send_at, static_cast<int>(count), MPI_FLOAT, right, tag, r.comm,
                                   &requests[1]));

  // Overlapped with the exchange: the device's wait for the same event, then a kernel that
  // reads the send buffer (MPI reads it too; neither writes it) and writes only `work`.
  gpu.wait(compute.get(), ready.get());
  accumulate(r, axpy, compute.get(), send.get(), work.get(), n);

  check_mpi("MPI_Waitall", MPI_Waitall(2, requests, MPI_STATUSES_IGNORE));
  if (path == Path::staged) gpu.copy_h2d_async(recv.get(), host_recv.data(), bytes, compute.get());
  accumulate(r, axpy, compute.get(), recv.get(), work.get(), n);  // queued after the receive
  gpu.synchronize(compute.get());  // also keeps host_recv alive until its copy has read it
  double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::vector<float> got(count);
  gpu.copy_d2h(got.data(), work.get(), bytes);
  const std::string what = "ring of " + std::to_string(count) + " floats from rank " +
                           std::to_string(left) + " (" + path_name(path) + ")";
  std::uint64_t wrong =
      check_elements(r, what.c_str(), got, static_cast<float>(r.rank + 1 + left + 1));
  check_mpi("MPI_Allreduce", MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UINT64_T, MPI_SUM, r.comm));
  check_mpi("MPI_Allreduce", MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, r.comm));
  if (r.rank == 0) {
    std::printf(
        "ring: %s, %d %s, %zu floats each to the next rank, a kernel on a second "
        "stream overlapped: %s; %.3f ms (slowest rank)\n",
        path_name(path), r.size, r.size == 1 ? "rank" : "ranks", count,
        wrong == 0 ? "every element on every rank is right" : "WRONG", t * 1e3);
    std::fflush(stdout);
  }
  return wrong;
}

}  // namespace mpi_example
