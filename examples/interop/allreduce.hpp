// SPDX-License-Identifier: Apache-2.0
// An NCCL all-reduce across every CUDA backend, on gpuplug's memory and native streams.
#pragma once

#include <cstddef>
#include <gpuplug/registry.hpp>

namespace interop {

/// Sums `count` floats across every device `registry.create_all("cuda")` gives, one NCCL rank per
/// backend (one GPU is a valid single-rank run), checks the sum on every rank and prints the
/// bus bandwidth. Returns 0 when every rank holds the sum, 1 when one does not, and 0 with a
/// "skipped" line when there is no CUDA device or this build has no NCCL.
int allreduce_cuda(gpuplug::PluginRegistry& registry, std::size_t count, unsigned reps);

}  // namespace interop
