// SPDX-License-Identifier: Apache-2.0
// gemm_pipeline: a verified two-layer MLP on the backend the registry picks, through its OpCache.
//
// This file is the application around the pipeline: the command line (options.hpp), the choice
// of backend and the exit status. The pipeline itself is pipeline.hpp, its model model.hpp and
// its CPU reference reference.hpp; docs/gemm-pipeline.md explains it all.
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <gpuplug/gpuplug.hpp>
#include <set>
#include <string>
#include <vector>

#include "options.hpp"
#include "pipeline.hpp"

namespace gemm_pipeline {
namespace {

using gpuplug::GpuBackend;
using gpuplug::LogLevel;

/// The selector and where it came from, for messages: the option, the variable or the default.
struct Selector {
  std::string text;
  std::string source;  // "--backend", "GPUPLUG_BACKEND" or "default"
};

Selector choose_selector(const CommandLine& cl) {
  if (cl.backend) return {*cl.backend, "--backend"};
  if (const char* env = std::getenv("GPUPLUG_BACKEND"); env != nullptr && *env != '\0') {
    return {env, "GPUPLUG_BACKEND"};
  }
  return {"auto", "default"};
}

/// Rejects a selector that cannot parse or names a backend no plugin here has and no vendor
/// gpuplug ships (a typo like "nosuch"), before the registry would try it.
void check_selector(const Selector& sel, const gpuplug::PluginRegistry& registry) {
  std::vector<gpuplug::SelectorItem> items;
  try {
    items = gpuplug::parse_selector(sel.text);
  } catch (const gpuplug::Error& e) {
    throw UsageError(sel.source + ": invalid selector '" + sel.text + "': " + e.message());
  }
  std::set<std::string> known{"auto", "cuda", "hip", "host"};
  for (const auto& p : registry.plugins()) known.insert(p.name);
  for (const auto& item : items) {
    if (known.count(item.name) != 0) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    throw UsageError(sel.source + ": unknown backend '" + item.name + "' in selector '" + sel.text +
                     "' (known: " + list + ")");
  }
}

int run_main(int argc, char** argv) {
  CommandLine cl;
  try {
    cl = parse_command_line(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "gemm_pipeline: %s\n(see gemm_pipeline --help)\n", e.what());
    return exit_usage;
  }
  if (cl.help) {
    std::fputs(usage_text, stdout);
    return exit_success;
  }
  // Route lines are info-level; show them unless the user chose a level (option or GPUPLUG_LOG).
  if (cl.log_level) {
    gpuplug::set_log_level(*cl.log_level);
  } else if (const char* env = std::getenv("GPUPLUG_LOG"); env == nullptr || *env == '\0') {
    gpuplug::set_log_level(LogLevel::info);
  }

  gpuplug::PluginRegistry registry;
  registry.discover();
  const Selector selector = choose_selector(cl);
  gpuplug::Options plugin_options;
  if (cl.device_memory_limit) {
    plugin_options["device_memory_limit"] = std::to_string(*cl.device_memory_limit);
  }
  if (cl.trace_file) {
    // The trace layer on top of whatever GPUPLUG_LAYERS enables: the core merges the two lists,
    // the option's first, and enables a layer both name once.
    plugin_options["layers"] = "trace";
    plugin_options["trace_file"] = *cl.trace_file;
  }
  // The whole run fits: setup allocates a few dozen buffers and steady state none.
  if (cl.memory_snapshot) plugin_options["memory_history"] = "4096";

  gpuplug::Selection selection;
  try {
    check_selector(selector, registry);
    selection = registry.select(selector.text, plugin_options);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "gemm_pipeline: %s\n", e.what());
    return exit_usage;
  } catch (const gpuplug::Error& e) {
    // A selector the user gave that matches nothing here is a usage error; the default one
    // failing means this installation has no usable backend at all.
    std::fprintf(stderr, "gemm_pipeline: %s '%s': %s\n", selector.source.c_str(),
                 selector.text.c_str(), e.what());
    return selector.source == "default" ? exit_runtime : exit_usage;
  }
  GpuBackend& gpu = *selection.backend;
  std::printf("backend: %s\n", selection.explain().c_str());
  const std::string limit_note =
      cl.device_memory_limit ? ", device_memory_limit=" + std::to_string(*cl.device_memory_limit)
                             : "";
  std::printf("selector: '%s' (from %s)%s\n", selector.text.c_str(), selector.source.c_str(),
              limit_note.c_str());
  std::printf(
      "pipeline: X[%ux%u] -> H = relu(X*W1 + b1)[%ux%u] -> Y = relu(H*W2 + b2)[%ux%u], %u steps\n",
      cl.m, cl.k, cl.m, cl.n, cl.m, cl.n, cl.steps);
  std::fflush(stdout);

  const std::string note = "(selector '" + selector.text + "' from " + selector.source + ")";
  try {
    Pipeline pipeline(gpu, Shape{cl.m, cl.n, cl.k, cl.steps, cl.compare_blas});
    return pipeline.run(note, cl.memory_snapshot.value_or(""));
  } catch (const gpuplug::Error& e) {
    std::fprintf(stderr, "gemm_pipeline: error: %s\n", e.what());
    if (e.status() == gpuplug::Status::out_of_memory && cl.device_memory_limit) {
      // Only the weights can fall back to managed memory; activations need device memory.
      const std::uint64_t activations =
          (std::uint64_t{cl.m} * cl.k + 2 * std::uint64_t{cl.m} * cl.n) * sizeof(float);
      std::fprintf(stderr,
                   "gemm_pipeline: --device-memory-limit=%" PRIu64
                   " leaves no room for the activations, which need %" PRIu64
                   " bytes of device memory\n",
                   *cl.device_memory_limit, activations);
    }
    return exit_runtime;
  }
}

}  // namespace
}  // namespace gemm_pipeline

int main(int argc, char** argv) {
  try {
    return gemm_pipeline::run_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemm_pipeline: error: %s\n", e.what());
    return gemm_pipeline::exit_runtime;
  }
}
