// SPDX-License-Identifier: Apache-2.0
// NCCL's all-reduce over create_all("cuda") (allreduce.hpp). Past one machine the same pattern
// holds with one process per GPU: rank 0's ncclGetUniqueId goes to the others through MPI (or
// any channel) and each calls ncclCommInitRank instead of ncclCommInitAll (docs/interop.md).
#include "allreduce.hpp"

#include <cstdio>
#include <string>
#include <vector>

#include "../common/device_buffer.hpp"

#ifdef GPUPLUG_INTEROP_NCCL
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>
#endif

namespace interop {

using gpuplug_examples::DeviceBuffer;

#ifndef GPUPLUG_INTEROP_NCCL

int allreduce_cuda(gpuplug::PluginRegistry&, std::size_t, unsigned) {
  std::printf("allreduce: skipped: this build found no NCCL (nccl.h and libnccl)\n");
  return 0;
}

#else

namespace {

void check_nccl(const char* call, ncclResult_t r) {
  if (r != ncclSuccess) {
    throw std::runtime_error(std::string(call) + " failed: " + ncclGetErrorString(r));
  }
}

struct CommDeleter {
  void operator()(ncclComm_t c) const { ncclCommDestroy(c); }
};
using Comm = std::unique_ptr<ncclComm, CommDeleter>;

}  // namespace

int allreduce_cuda(gpuplug::PluginRegistry& registry, std::size_t count, unsigned reps) {
  std::vector<std::shared_ptr<gpuplug::GpuBackend>> gpus;
  try {
    gpus = registry.create_all("cuda");
  } catch (const gpuplug::Error& e) {
    if (e.status() != gpuplug::Status::not_found) throw;
    std::printf("allreduce: skipped: no CUDA device here (%s)\n", e.message().c_str());
    return 0;
  }
  const int ranks = static_cast<int>(gpus.size());
  std::vector<int> devices;
  std::vector<DeviceBuffer> buffers;
  std::vector<gpuplug::Stream> streams;
  for (auto& gpu : gpus) {
    devices.push_back(gpu->native().device);
    buffers.emplace_back(*gpu, count * sizeof(float), "interop allreduce");
  }
  // Rank r contributes r + 1 in every element: the sum is ranks (ranks + 1) / 2 everywhere.
  for (int r = 0; r < ranks; ++r) {
    const std::vector<float> mine(count, static_cast<float>(r + 1));
    gpus[r]->copy_h2d(buffers[r].get(), mine.data(), count * sizeof(float));
    streams.push_back(gpus[r]->create_stream());
  }

  std::vector<ncclComm_t> raw(ranks);
  check_nccl("ncclCommInitAll", ncclCommInitAll(raw.data(), ranks, devices.data()));
  std::vector<Comm> comms;
  for (ncclComm_t c : raw) comms.emplace_back(c);

  const auto once = [&] {
    // One thread drives every rank, so the calls are grouped (NCCL's rule for that case).
    check_nccl("ncclGroupStart", ncclGroupStart());
    for (int r = 0; r < ranks; ++r) {
      void* data = buffers[r].native();
      check_nccl("ncclAllReduce",
                 ncclAllReduce(data, data, count, ncclFloat, ncclSum, comms[r].get(),
                               static_cast<cudaStream_t>(gpus[r]->native(streams[r]).stream)));
    }
    check_nccl("ncclGroupEnd", ncclGroupEnd());
    for (int r = 0; r < ranks; ++r) gpus[r]->synchronize(streams[r]);
  };
  once();  // the checked run
  std::uint64_t wrong = 0;
  const float expected = static_cast<float>(ranks) * static_cast<float>(ranks + 1) / 2.0f;
  for (int r = 0; r < ranks; ++r) {
    std::vector<float> got(count);
    gpus[r]->copy_d2h(got.data(), buffers[r].get(), count * sizeof(float));
    wrong += static_cast<std::uint64_t>(
        std::count_if(got.begin(), got.end(), [&](float v) { return v != expected; }));
  }
  std::vector<double> times;
  for (unsigned i = 0; i < reps; ++i) {  // later runs sum sums: timed only, not checked
    const auto t0 = std::chrono::steady_clock::now();
    once();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  const double t = times.empty() ? 0.0 : times[times.size() / 2];
  // NCCL's bus bandwidth for all-reduce: bytes * 2 (ranks - 1) / ranks per unit of time.
  const double bus = t > 0.0 ? count * sizeof(float) * 2.0 * (ranks - 1) / ranks / t * 1e-9 : 0.0;
  std::printf("allreduce: NCCL %d.%d.%d, %d rank(s), %zu floats: %s; median %.3f ms, bus %.2f GB/s\n",
              NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, ranks, count,
              wrong == 0 ? "every rank holds the sum" : "WRONG", t * 1e3, bus);
  comms.clear();
  for (int r = 0; r < ranks; ++r) gpus[r]->destroy_stream(streams[r]);
  return wrong == 0 ? 0 : 1;
}

#endif

}  // namespace interop
