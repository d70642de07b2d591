// SPDX-License-Identifier: Apache-2.0
// Command line of gemm_pipeline: strict parsing where every bad value names its option (exit 2).
#pragma once

#include <cctype>
#include <charconv>
#include <cstdint>
#include <gpuplug/log.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace gemm_pipeline {

/// A usage error: what() names the option and the offending value. main() exits with status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Largest accepted --m/--n/--k: keeps every matrix under 1 GiB of f32 and every element
/// count (and hence every kernel grid) well inside uint32.
inline constexpr std::uint32_t max_dim = 16384;
inline constexpr std::uint32_t max_steps = 1000000;

struct CommandLine {
  std::optional<std::string> backend;  // --backend; nullopt: GPUPLUG_BACKEND, else "auto"
  std::uint32_t steps = 5;
  std::uint32_t m = 256;                             // rows of X (batch)
  std::uint32_t n = 256;                             // width of both layers
  std::uint32_t k = 256;                             // input features
  std::optional<gpuplug::LogLevel> log_level;        // nullopt: GPUPLUG_LOG, else info
  std::optional<std::uint64_t> device_memory_limit;  // bytes
  std::optional<std::string> trace_file;             // --trace: the trace layer's output
  std::optional<std::string> memory_snapshot;        // --memory-snapshot FILE
  bool compare_blas = false;                         // --compare-blas
  bool help = false;
};

inline constexpr const char* usage_text =
    "Usage: gemm_pipeline [options]\n"
    "Runs a two-layer MLP  H = relu(X*W1 + b1), Y = relu(H*W2 + b2)  on the backend it picks,\n"
    "verifies every step against a CPU reference and tears down to an empty ledger.\n"
    "\n"
    "Options (--opt VALUE or --opt=VALUE):\n"
    "  --backend SEL              selector: auto, host, cuda, cuda:1, hip:0!, cuda,hip,host ...\n"
    "                             (default: $GPUPLUG_BACKEND, else auto)\n"
    "  --steps N                  pipeline steps, 1..1000000 (default 5)\n"
    "  --m N, --n N, --k N        X is m x k, W1 is k x n, W2 is n x n; 1..16384 (default 256)\n"
    "  --log-level LEVEL          trace, debug, info, warning, error, off\n"
    "                             (default: $GPUPLUG_LOG, else info, so routes are logged)\n"
    "  --device-memory-limit SIZE device memory cap passed to the plugin (bytes, K/M/G/T\n"
    "                             suffix); past it weights fall back to managed memory\n"
    "  --trace FILE               record every backend call (the trace layer) and write them\n"
    "                             to FILE as Chrome trace-event JSON (Perfetto, chrome://tracing)\n"
    "  --memory-snapshot FILE     keep the ledger's history (memory_history) and write memory\n"
    "                             snapshots: FILE at exit, FILE's name with .warmup before\n"
    "                             its extension after step 1 (read with 'gpuplug mem')\n"
    "  --compare-blas             run the same pipeline with OpenBLAS's cblas_sgemm on the CPU\n"
    "                             after it, and print its GFLOP/s beside gpuplug's\n"
    "  --help                     this text\n"
    "\n"
    "Exit status: 0 success, 1 verification failure (or memory left on the ledger),\n"
    "2 usage error (bad option or value, or no backend matches the selector),\n"
    "3 runtime error reported by the backend (e.g. out of memory for activations).\n";

/// Parses a decimal integer in [lo, hi]; anything else (sign, spaces, suffix, overflow) is a
/// UsageError naming `option` and the value.
inline std::uint32_t parse_count(std::string_view option, std::string_view text, std::uint32_t lo,
                                 std::uint32_t hi) {
  std::uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc{} || p != end || v < lo || v > hi) {
    throw UsageError(std::string(option) + ": invalid value '" + std::string(text) +
                     "' (expected an integer from " + std::to_string(lo) + " to " +
                     std::to_string(hi) + ")");
  }
  return static_cast<std::uint32_t>(v);
}

/// "800K" -> 819200. Digits with an optional K/M/G/T suffix (binary units, either case),
/// optionally followed by "B" or "iB" — the plugin SDK's grammar. The example passes the plugin
/// the resulting byte count, so both always agree on the value.
inline std::uint64_t parse_size(std::string_view option, std::string_view text) {
  auto bad = [&](const char* why) {
    return UsageError(std::string(option) + ": invalid value '" + std::string(text) + "' (" + why +
                      ")");
  };
  std::uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || p == text.data()) throw bad("expected bytes such as 1048576, 800K or 64M");
  if (ec != std::errc{}) throw bad("too large");
  std::string_view suffix(p, static_cast<std::size_t>(end - p));
  unsigned shift = 0;
  if (!suffix.empty()) {
    constexpr std::string_view units = "KMGT";  // 2^10, 2^20, 2^30, 2^40
    const auto unit =
        units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(suffix.front()))));
    suffix.remove_prefix(1);
    if (unit == std::string_view::npos || !(suffix.empty() || suffix == "B" || suffix == "iB")) {
      throw bad("expected bytes such as 1048576, 800K or 64M");
    }
    shift = 10 * static_cast<unsigned>(unit + 1);
  }
  if (shift != 0 && v > (UINT64_MAX >> shift)) throw bad("too large");
  return v << shift;
}

/// Parses argv. Throws UsageError for an unknown option, a missing value or a bad value.
inline CommandLine parse_command_line(int argc, char** argv) {
  CommandLine cl;
  std::vector<std::string_view> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      cl.help = true;
      continue;
    }
    if (!arg.starts_with("--")) {
      throw UsageError("unexpected argument '" + std::string(arg) + "' (options start with --)");
    }
    std::string_view name = arg;
    std::optional<std::string_view> value;
    if (auto eq = arg.find('='); eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    auto take_value = [&]() -> std::string_view {
      if (value) return *value;
      if (i + 1 >= args.size()) throw UsageError(std::string(name) + ": missing value");
      return args[++i];
    };
    if (name == "--backend") {
      std::string_view v = take_value();
      if (v.empty()) throw UsageError("--backend: invalid value '' (expected a selector)");
      cl.backend = std::string(v);
    } else if (name == "--steps") {
      cl.steps = parse_count(name, take_value(), 1, max_steps);
    } else if (name == "--m") {
      cl.m = parse_count(name, take_value(), 1, max_dim);
    } else if (name == "--n") {
      cl.n = parse_count(name, take_value(), 1, max_dim);
    } else if (name == "--k") {
      cl.k = parse_count(name, take_value(), 1, max_dim);
    } else if (name == "--log-level") {
      std::string_view v = take_value();
      cl.log_level = gpuplug::parse_log_level(v);
      if (!cl.log_level) {
        throw UsageError("--log-level: invalid value '" + std::string(v) +
                         "' (expected trace, debug, info, warning, error or off)");
      }
    } else if (name == "--device-memory-limit") {
      cl.device_memory_limit = parse_size(name, take_value());
    } else if (name == "--trace") {
      std::string_view v = take_value();
      if (v.empty()) throw UsageError("--trace: invalid value '' (expected a file name)");
      cl.trace_file = std::string(v);
    } else if (name == "--memory-snapshot") {
      std::string_view v = take_value();
      if (v.empty()) throw UsageError("--memory-snapshot: invalid value '' (expected a file)");
      cl.memory_snapshot = std::string(v);
    } else if (name == "--compare-blas") {
      if (value) throw UsageError("--compare-blas: takes no value (got '" + std::string(*value) + "')");
      cl.compare_blas = true;
    } else {
      throw UsageError("unknown option '" + std::string(name) + "'");
    }
  }
  return cl;
}

}  // namespace gemm_pipeline
