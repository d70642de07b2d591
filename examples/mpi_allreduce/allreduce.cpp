// SPDX-License-Identifier: Apache-2.0
// MPI_Allreduce on gpuplug memory (allreduce.hpp). MPI is not stream-aware: a blocking MPI call
// reads and writes memory now, so the host waits for the gpuplug stream that wrote a buffer
// before handing it over, and queues nothing that touches it until the call has returned.
#include "allreduce.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

namespace mpi_example {

namespace {

std::string size_text(std::size_t bytes) {
  char out[32];
  if (bytes >= (std::size_t{1} << 20)) {
    std::snprintf(out, sizeof out, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  } else {
    std::snprintf(out, sizeof out, "%.1f KiB", static_cast<double>(bytes) / (1 << 10));
  }
  return out;
}

// The buffers of one sweep, sized for its largest message.
struct Buffers {
  Buffers(gpuplug::GpuBackend& gpu, std::size_t floats)
      : x(gpu, floats * sizeof(float), "mpi_allreduce pattern"),
        send(gpu, floats * sizeof(float), "mpi_allreduce send"),
        recv(gpu, floats * sizeof(float), "mpi_allreduce recv"),
        host_send(floats),
        host_recv(floats) {}
  DeviceBuffer x;
  DeviceBuffer send;
  DeviceBuffer recv;
  // Staging is pageable host memory: gpuplug's public API has no pinned host allocation (its
  // pinned buffers serve copy_peer inside the core), so the staged copies run at pageable speed.
  std::vector<float> host_send;
  std::vector<float> host_recv;
};

// One all-reduce of `count` floats from b.send into b.recv. On return b.recv holds the sum and
// nothing is queued on `stream`. The fill of b.send on `stream` need not have completed.
void allreduce_once(const Rank& r, Path path, Buffers& b, gpuplug::Stream stream,
                    std::size_t count) {
  const int n = static_cast<int>(count);
  const std::size_t bytes = count * sizeof(float);
  if (path == Path::direct) {
    r.gpu->synchronize(stream);  // the fill is complete before MPI reads the memory
    check_mpi("MPI_Allreduce",
              MPI_Allreduce(b.send.native(), b.recv.native(), n, MPI_FLOAT, MPI_SUM, r.comm));
    return;
  }
  r.gpu->copy_d2h_async(b.host_send.data(), b.send.get(), bytes, stream);  // after the fill
  r.gpu->synchronize(stream);  // the copy is complete before MPI reads host_send
  check_mpi("MPI_Allreduce",
            MPI_Allreduce(b.host_send.data(), b.host_recv.data(), n, MPI_FLOAT, MPI_SUM, r.comm));
  r.gpu->copy_h2d_async(b.recv.get(), b.host_recv.data(), bytes, stream);
  r.gpu->synchronize(stream);  // host_recv stays valid until the copy has read it
}

// The element the corruption variable names, made wrong on the rank it names: after the fill,
// before the reduction, so every rank's sum is wrong there.
void corrupt_if_asked(const Rank& r, const SweepOptions& o, Buffers& b, gpuplug::Stream stream,
                      std::size_t count) {
  if (r.rank != o.corrupt_rank || o.corrupt_element >= count) return;
  r.gpu->synchronize(stream);  // after the fill, which the synchronous copy is not ordered with
  float value = 0;
  const gpuplug::DevicePtr at = b.send.get() + o.corrupt_element * sizeof(float);
  r.gpu->copy_d2h(&value, at, sizeof value);
  value += 1000.0f;
  r.gpu->copy_h2d(at, &value, sizeof value);
}

}  // namespace

std::uint64_t allreduce_sweep(const Rank& r, gpuplug::KernelHandle axpy, const SweepOptions& o) {
  Buffers b(*r.gpu, o.max_floats);
  const std::vector<float> p = pattern_of(o.max_floats);
  r.gpu->copy_h2d(b.x.get(), p.data(), o.max_floats * sizeof(float));
  const OwnedStream stream(*r.gpu);
  // Rank k contributes (k + 1) * pattern: the sum is size (size + 1) / 2 * pattern.
  const float sum = static_cast<float>(r.size) * static_cast<float>(r.size + 1) / 2.0f;
  std::uint64_t wrong_everywhere = 0;
  for (const Path path : o.paths) {
    for (std::size_t count = o.min_floats; count <= o.max_floats; count *= 4) {
      const auto n = static_cast<std::uint32_t>(count);
      fill_from_rank(r, axpy, stream.get(), b.x.get(), b.send.get(), n);
      corrupt_if_asked(r, o, b, stream.get(), count);
      allreduce_once(r, path, b, stream.get(), count);

      std::vector<float> got(count);
      r.gpu->copy_d2h(got.data(), b.recv.get(), count * sizeof(float));
      const std::string what = std::string("allreduce of ") + std::to_string(count) + " floats (" +
                               path_name(path) + ")";
      std::uint64_t wrong = check_elements(r, what.c_str(), got, sum);
      check_mpi("MPI_Allreduce",
                MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UINT64_T, MPI_SUM, r.comm));
      wrong_everywhere += wrong;

      std::vector<double> times;
      for (unsigned i = 0; i < o.reps; ++i) {  // the same sum again: timed, not checked
        check_mpi("MPI_Barrier", MPI_Barrier(r.comm));
        const auto t0 = std::chrono::steady_clock::now();
        allreduce_once(r, path, b, stream.get(), count);
        times.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(times.begin(), times.end());
      double t = times.empty() ? 0.0 : times[times.size() / 2];
      check_mpi("MPI_Allreduce", MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, r.comm));
      if (r.rank != 0) continue;
      // Bus bandwidth as NCCL's tests define it for all-reduce: bytes * 2 (n - 1) / n per time.
      const double bytes = static_cast<double>(count * sizeof(float));
      const double alg = t > 0.0 ? bytes / t * 1e-9 : 0.0;
      const double bus = alg * 2.0 * (r.size - 1) / r.size;
      const std::string verdict =
          wrong == 0 ? "every element on every rank is the sum"
                     : "WRONG: " + std::to_string(wrong) + " elements over all ranks";
      std::printf(
          "allreduce: %s, %d %s, %zu floats (%s): %s; median %.3f ms, algbw %.2f GB/s, "
          "busbw %.2f GB/s\n",
          path_name(path), r.size, r.size == 1 ? "rank" : "ranks", count,
          size_text(count * sizeof(float)).c_str(), verdict.c_str(), t * 1e3, alg, bus);
      std::fflush(stdout);
    }
  }
  return wrong_everywhere;
}

}  // namespace mpi_example
