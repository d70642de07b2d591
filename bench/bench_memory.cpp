// SPDX-License-Identifier: Apache-2.0
// What memory you can see costs (docs/memory.md): the AllocationLedger's alloc + free
// with the history ring on (memory_history=N) and with a MemoryScope open, beside the same loop
// with both off (`alloc_free/ledger` of bench_backend measures the same loop), and a snapshot.
//   - `ledger_alloc_free/history:0|4096`: alloc + free around aligned_alloc, as
//     `alloc_free/ledger`, without and with the history;
//   - `ledger_alloc_free/scope`: history off, one scope open;
//   - `ledger_snapshot/<live>`: AllocationLedger::snapshot + to_json with <live> allocations.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

#include "ledger.hpp"  // plugins/common: the SDK's AllocationLedger

namespace {

constexpr std::size_t kAlignment = 256;  // the host plugin's allocation alignment
constexpr const char* kSite = "bench_memory alloc_free";

std::uint64_t host_alloc(std::size_t bytes) {
  void* q = std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  if (q == nullptr) throw std::bad_alloc();
  return reinterpret_cast<std::uintptr_t>(q);
}

void alloc_free(benchmark::State& state, gpuplug::sdk::AllocationLedger& ledger) {
  const auto bytes = static_cast<std::uint64_t>(state.range(0));
  for (auto _ : state) {
    const std::uint64_t p = ledger.allocate(
        bytes, GPUPLUG_ALLOC_DEVICE, kSite, [&] { return host_alloc(bytes); },
        [](std::uint64_t q) { std::free(reinterpret_cast<void*>(q)); });
    benchmark::DoNotOptimize(p);
    ledger.release_kind(p);
    std::free(reinterpret_cast<void*>(p));
  }
  state.SetItemsProcessed(state.iterations());
}

void ledger_alloc_free_history(benchmark::State& state) {
  gpuplug::sdk::AllocationLedger ledger("bench:0", {}, {},
                                        static_cast<std::size_t>(state.range(1)));
  alloc_free(state, ledger);
}

void ledger_alloc_free_scope(benchmark::State& state) {
  gpuplug::sdk::AllocationLedger ledger("bench:0");
  const std::uint64_t scope = ledger.begin_scope();
  alloc_free(state, ledger);
  ledger.end_scope(scope);
}

void ledger_snapshot(benchmark::State& state) {
  gpuplug::sdk::AllocationLedger ledger("bench:0", {}, {}, 4096);
  std::vector<std::uint64_t> live;
  for (std::int64_t i = 0; i < state.range(0); ++i)
    live.push_back(ledger.allocate(
        256, GPUPLUG_ALLOC_DEVICE, i % 2 ? "weights" : "activations",
        [] { return host_alloc(256); },
        [](std::uint64_t q) { std::free(reinterpret_cast<void*>(q)); }));
  for (auto _ : state) {
    const std::string json = gpuplug::sdk::to_json(ledger.snapshot());
    benchmark::DoNotOptimize(json.data());
  }
  for (const std::uint64_t p : live) {
    ledger.release_kind(p);
    std::free(reinterpret_cast<void*>(p));
  }
}

}  // namespace

BENCHMARK(ledger_alloc_free_history)
    ->Name("ledger_alloc_free/history")
    ->ArgsProduct({{256, 65536}, {0, 4096}})
    ->UseRealTime();
BENCHMARK(ledger_alloc_free_scope)->Name("ledger_alloc_free/scope")->Arg(256)->UseRealTime();
BENCHMARK(ledger_snapshot)->Arg(1000)->Arg(100000)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
