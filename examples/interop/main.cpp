// SPDX-License-Identifier: Apache-2.0
// interop: vendor libraries on gpuplug's memory and streams (docs/interop.md).
//
//   interop [--backend SELECTOR] [--gemm M,N,K] [--reps N] [--allreduce-floats N]
//
// 1. gemm: gpuplug's gemm_f32 and the vendor's BLAS (cuBLAS on CUDA, OpenBLAS on host) on the
//    same buffers and the same gpuplug stream, each checked against the other and timed.
// 2. allreduce: an NCCL all-reduce across every CUDA backend create_all("cuda") gives.
// A part that cannot run here says why on a "skipped" line. Exit status: 0 when every part that
// ran agreed, 1 when a result was wrong, 2 for a bad command line, 3 for a runtime error.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <gpuplug/gpuplug.hpp>
#include <string>
#include <string_view>

#include "allreduce.hpp"
#include "gemm.hpp"

namespace {

constexpr int exit_wrong = 1;
constexpr int exit_usage = 2;
constexpr int exit_runtime = 3;

struct Options {
  std::string backend = "auto";
  interop::GemmShape gemm;
  unsigned reps = 5;
  std::size_t allreduce_floats = std::size_t{1} << 24;
};

void usage(std::FILE* to) {
  std::fprintf(to,
               "usage: interop [--backend SELECTOR] [--gemm M,N,K] [--reps N] "
               "[--allreduce-floats N]\n"
               "  --backend           the backend of the gemm part (default auto)\n"
               "  --gemm              its shape (default 256,256,256)\n"
               "  --reps              timed runs per measurement, the median is printed (default 5)\n"
               "  --allreduce-floats  floats per rank in the NCCL all-reduce (default 16777216)\n");
}

// A whole positive decimal number no larger than `max`, or false.
bool parse_count(std::string_view text, std::uint64_t max, std::uint64_t& out) {
  if (text.empty() || text.size() > 20) return false;
  std::uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    if (v > (max - digit) / 10) return false;
    v = v * 10 + digit;
  }
  if (v == 0) return false;
  out = v;
  return true;
}

bool parse_shape(std::string_view text, interop::GemmShape& out) {
  std::uint32_t* dims[] = {&out.m, &out.n, &out.k};
  for (int i = 0; i < 3; ++i) {
    const std::size_t comma = text.find(',');
    if ((i < 2) != (comma != std::string_view::npos)) return false;
    std::uint64_t v = 0;
    if (!parse_count(text.substr(0, comma), 1u << 16, v)) return false;
    *dims[i] = static_cast<std::uint32_t>(v);
    text = i < 2 ? text.substr(comma + 1) : std::string_view{};
  }
  return true;
}

// Returns -1 when the options are good, else the exit status.
int parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      usage(stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "interop: %s: needs a value, or is not an option\n", argv[i]);
      usage(stderr);
      return exit_usage;
    }
    const std::string_view value = argv[++i];
    std::uint64_t n = 0;
    bool ok = true;
    if (arg == "--backend") {
      o.backend = std::string(value);
    } else if (arg == "--gemm") {
      ok = parse_shape(value, o.gemm);
    } else if (arg == "--reps") {
      ok = parse_count(value, 1000, n);
      o.reps = static_cast<unsigned>(n);
    } else if (arg == "--allreduce-floats") {
      ok = parse_count(value, std::uint64_t{1} << 32, n);
      o.allreduce_floats = static_cast<std::size_t>(n);
    } else {
      std::fprintf(stderr, "interop: unknown option %s\n", argv[i - 1]);
      usage(stderr);
      return exit_usage;
    }
    if (!ok) {
      std::fprintf(stderr, "interop: %s: bad value '%s'\n", argv[i - 1], argv[i]);
      usage(stderr);
      return exit_usage;
    }
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (const int status = parse(argc, argv, options); status >= 0) return status;
  try {
    gpuplug::PluginRegistry registry;
    registry.discover();
    int status = 0;
    {
      const gpuplug::Selection selection = registry.select(options.backend);
      status |= interop::compare_gemm(*selection.backend, options.gemm, options.reps);
    }
    status |= interop::allreduce_cuda(registry, options.allreduce_floats, options.reps);
    return status == 0 ? 0 : exit_wrong;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "interop: error: %s\n", e.what());
    return exit_runtime;
  }
}
