// SPDX-License-Identifier: Apache-2.0
// mpi_allreduce: gpuplug memory in MPI, one backend per rank (docs/interop.md, "Past one machine").
//
//   mpirun -np N mpi_allreduce [--backend SELECTOR] [--path auto|direct|staged|both]
//                              [--min-floats N] [--max-floats N] [--reps N] [--ring-floats N]
//
// 1. allreduce: MPI_Allreduce of axpy-filled buffers over a sweep of message sizes, every
//    element checked on every rank, the bandwidth printed per size.
// 2. ring: MPI_Isend / MPI_Irecv to the neighbours, overlapped with a kernel on a second stream.
// MPI_ALLREDUCE_CORRUPT=RANK:ELEMENT makes that element of that rank's contribution wrong, so
// the checks can be seen to fail. Exit status (every rank's, and so mpirun's): 0 when every
// element was right, 1 when one was wrong, 2 for a bad command line; a rank that cannot go on
// (no backend, an MPI or gpuplug error) says why and ends the job with MPI_Abort and status 3.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <gpuplug/gpuplug.hpp>
#include <string>
#include <string_view>

#include "allreduce.hpp"
#include "common.hpp"
#include "ring.hpp"

namespace {

using mpi_example::Path;
using mpi_example::Rank;

constexpr int exit_wrong = 1;
constexpr int exit_usage = 2;
constexpr int exit_runtime = 3;

struct Options {
  // The first that works: the GPU of this rank's local rank on a GPU node, else host.
  std::string backend = "cuda:%l,hip:%l,host";
  std::string path = "auto";
  mpi_example::SweepOptions sweep;
  std::size_t ring_floats = std::size_t{1} << 20;
};

constexpr const char* usage_text =
    "usage: mpirun -np N mpi_allreduce [--backend SELECTOR] [--path auto|direct|staged|both]\n"
    "                     [--min-floats N] [--max-floats N] [--reps N] [--ring-floats N]\n"
    "  --backend      each rank's selector; %l is its local rank (default cuda:%l,hip:%l,host)\n"
    "  --path         direct: MPI takes native_pointer; staged: through host memory on a gpuplug\n"
    "                 stream; auto: direct where every rank's MPI takes its memory (default)\n"
    "  --min-floats   smallest all-reduce (default 1024); sizes grow 4 times a step\n"
    "  --max-floats   largest all-reduce (default 4194304)\n"
    "  --reps         timed all-reduces per size, the median is printed (default 10)\n"
    "  --ring-floats  floats each rank sends in the ring (default 1048576)\n"
    "environment: MPI_ALLREDUCE_CORRUPT=RANK:ELEMENT corrupts that rank's contribution\n";

// A whole decimal number in [1, max], or false.
bool parse_count(std::string_view text, std::uint64_t max, std::uint64_t& out) {
  if (text.empty() || text.size() > 20) return false;
  std::uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (v > (max - digit) / 10) return false;
    v = v * 10 + digit;
  }
  if (v == 0) return false;
  out = v;
  return true;
}

// A whole decimal number in [0, max), or false.
bool parse_index(std::string_view text, std::uint64_t max, std::uint64_t& out) {
  if (text.empty() || text.size() > 19) return false;
  std::uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (v >= max) return false;
  out = v;
  return true;
}

// Returns an empty string when the options are good, else what is wrong with them.
std::string parse(int argc, char** argv, Options& o) {
  constexpr std::uint64_t max_floats = std::uint64_t{1} << 28;  // an int count, 1 GiB
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (i + 1 >= argc) return std::string(arg) + ": needs a value, or is not an option";
    const std::string_view value = argv[++i];
    std::uint64_t n = 0;
    bool ok = true;
    if (arg == "--backend") {
      o.backend = std::string(value);
      ok = !value.empty();
    } else if (arg == "--path") {
      o.path = std::string(value);
      ok = value == "auto" || value == "direct" || value == "staged" || value == "both";
    } else if (arg == "--min-floats" || arg == "--max-floats" || arg == "--ring-floats") {
      ok = parse_count(value, max_floats, n);
      (arg == "--min-floats"   ? o.sweep.min_floats
       : arg == "--max-floats" ? o.sweep.max_floats
                               : o.ring_floats) = n;
    } else if (arg == "--reps") {
      ok = parse_count(value, 10000, n);
      o.sweep.reps = static_cast<unsigned>(n);
    } else {
      return "unknown option " + std::string(arg);
    }
    if (!ok) return std::string(arg) + ": bad value '" + std::string(value) + "'";
  }
  if (o.sweep.min_floats > o.sweep.max_floats) return "--min-floats is above --max-floats";
  if (const char* corrupt = std::getenv("MPI_ALLREDUCE_CORRUPT"); corrupt && *corrupt) {
    const std::string_view text = corrupt;
    const std::size_t colon = text.find(':');
    std::uint64_t rank = 0;
    std::uint64_t element = 0;
    if (colon == std::string_view::npos || !parse_index(text.substr(0, colon), 1u << 20, rank) ||
        !parse_index(text.substr(colon + 1), max_floats, element)) {
      return "MPI_ALLREDUCE_CORRUPT: bad value '" + std::string(text) + "' (RANK:ELEMENT)";
    }
    o.sweep.corrupt_rank = static_cast<int>(rank);
    o.sweep.corrupt_element = static_cast<std::size_t>(element);
  }
  return {};
}

// Ends the whole job from one rank: the message first, so it is seen whatever the others are
// waiting for, then MPI_Abort, which mpirun turns into the end of every rank.
[[noreturn]] void abort_job(const Rank& r, const std::string& why) {
  std::fprintf(stderr, "mpi_allreduce: rank %d of %d: %s; aborting the job\n", r.rank, r.size,
               why.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  MPI_Abort(MPI_COMM_WORLD, exit_runtime);
  std::_Exit(exit_runtime);  // MPI_Abort does not return; this is for a library where it does
}

// Open MPI's OMPI_COMM_WORLD_LOCAL_RANK, else the rank among the processes of this node.
int local_rank_of(MPI_Comm comm) {
  if (const char* env = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK"); env && *env) {
    return std::atoi(env);
  }
  MPI_Comm node = MPI_COMM_NULL;
  mpi_example::check_mpi("MPI_Comm_split_type",
                         MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int local = 0;
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  return local;
}

std::string with_local_rank(std::string selector, int local_rank) {
  const std::string local = std::to_string(local_rank);
  for (std::size_t at = selector.find("%l"); at != std::string::npos;
       at = selector.find("%l", at + local.size())) {
    selector.replace(at, 2, local);
  }
  return selector;
}

// The job after MPI_Init: one backend for this rank, both patterns, and the exit status.
int run(Rank& r, const Options& o) {
  const std::string selector = with_local_rank(o.backend, r.local_rank);
  gpuplug::PluginRegistry registry;
  gpuplug::Selection selection;
  try {
    registry.discover();
    selection = registry.select(selector);
  } catch (const std::exception& e) {
    abort_job(r, "no backend for selector '" + selector + "': " + e.what());
  }
  r.gpu = selection.backend.get();
  r.mpi_takes_device_memory = mpi_example::mpi_takes_memory_of(*r.gpu, r.why);
  std::printf("rank %d of %d (local rank %d): %s; MPI takes its memory directly: %s (%s)\n", r.rank,
              r.size, r.local_rank, selection.explain().c_str(),
              r.mpi_takes_device_memory ? "yes" : "no", r.why.c_str());
  std::fflush(stdout);

  // The ranks agree on the paths, since each pattern is collective.
  int direct_everywhere = r.mpi_takes_device_memory ? 1 : 0;
  mpi_example::check_mpi("MPI_Allreduce", MPI_Allreduce(MPI_IN_PLACE, &direct_everywhere, 1,
                                                        MPI_INT, MPI_LAND, r.comm));
  if (o.path == "direct" && !r.mpi_takes_device_memory) {
    abort_job(r, "--path direct, but MPI cannot take memory of " + std::string(r.gpu->name()) +
                     ": " + r.why);
  }
  mpi_example::SweepOptions sweep = o.sweep;
  if (o.path == "direct" || ((o.path == "auto" || o.path == "both") && direct_everywhere)) {
    sweep.paths.push_back(Path::direct);
  }
  if (o.path == "staged" || o.path == "both" || (o.path == "auto" && !direct_everywhere)) {
    sweep.paths.push_back(Path::staged);
  }
  if (r.rank == 0 && o.path == "both" && !direct_everywhere) {
    std::printf("direct: skipped: the MPI library of some rank cannot take its memory\n");
  }

  const gpuplug::KernelHandle axpy = r.gpu->op_cache().kernel(*r.gpu, "axpy", "axpy");
  std::uint64_t wrong = mpi_example::allreduce_sweep(r, axpy, sweep);
  for (const Path path : sweep.paths) {
    wrong += mpi_example::ring_exchange(r, axpy, path, o.ring_floats);
  }
  r.gpu->op_cache().release(*r.gpu);
  if (r.rank == 0) {
    if (wrong == 0) {
      std::printf("mpi_allreduce: PASS: %d %s, every element checked on every rank\n", r.size,
                  r.size == 1 ? "rank" : "ranks");
    } else {
      std::printf("mpi_allreduce: FAIL: %llu wrong elements over all ranks\n",
                  static_cast<unsigned long long>(wrong));
    }
  }
  return wrong == 0 ? 0 : exit_wrong;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  // Only the main thread calls MPI; gpuplug's host backend runs kernels on worker threads.
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "mpi_allreduce: MPI_Init_thread failed\n");
    return exit_runtime;
  }
  Rank r;
  MPI_Comm_set_errhandler(r.comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(r.comm, &r.rank);
  MPI_Comm_size(r.comm, &r.size);
  if (provided < MPI_THREAD_FUNNELED) abort_job(r, "MPI does not provide MPI_THREAD_FUNNELED");

  Options options;
  if (const std::string bad = parse(argc, argv, options); !bad.empty()) {
    if (r.rank == 0) std::fprintf(stderr, "mpi_allreduce: %s\n%s", bad.c_str(), usage_text);
    MPI_Finalize();
    return exit_usage;
  }
  int status = exit_runtime;
  try {
    r.local_rank = local_rank_of(r.comm);
    status = run(r, options);
  } catch (const std::exception& e) {
    abort_job(r, e.what());
  }
  std::fflush(stdout);
  MPI_Finalize();
  return status;
}
