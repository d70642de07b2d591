// SPDX-License-Identifier: Apache-2.0
// Native handles and import on the host plugin: native() of default and created
// streams, native_pointer, imported memory on the ledger (copies, range checks, on_release once
// on free, sweep and destroy), imported streams that destroy_stream forgets, bad input, and many
// threads importing at once; the same through the validate and trace layers.
#define BOOST_TEST_MODULE native
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <sstream>
#include <thread>
#include <vector>

#include <unistd.h>

#include "contains.hpp"
#include "error_of.hpp"
#include "host_backend.hpp"
#include "test_print.hpp"

using namespace gpuplug;
using gpuplug::test::contains;
using gpuplug::test::error_of;

namespace {

void* as_address(DevicePtr p) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(p.value)); }

const LiveAllocation* live_at(const MemorySnapshot& s, DevicePtr p) {
  for (const LiveAllocation& a : s.allocations)
    if (a.ptr == p) return &a;
  return nullptr;
}

}  // namespace

BOOST_AUTO_TEST_CASE(native_handles_of_default_and_created_streams) {
  test::Host h;
  GpuBackend& gpu = *h.gpu;
  const NativeHandles d = gpu.native();
  BOOST_TEST(d.vendor == "host");
  BOOST_TEST(d.device == 0);
  BOOST_TEST(d.context == nullptr);
  BOOST_TEST(d.stream == nullptr);  // the default stream is the runtime's default: null

  const Stream s = gpu.create_stream();
  const Stream t = gpu.create_stream();
  const NativeHandles ns = gpu.native(s);
  BOOST_TEST(ns.vendor == "host");
  BOOST_TEST(ns.stream != nullptr);
  BOOST_TEST(ns.stream != gpu.native(t).stream);  // each stream its own queue
  BOOST_TEST(gpu.native(s).stream == ns.stream);  // stable while the stream lives
  gpu.destroy_stream(s);
  const Error e = error_of([&] { (void)gpu.native(s); }, Status::invalid_argument);
  BOOST_TEST(contains(e.what(), "host:0"), e.what());
  BOOST_TEST(contains(e.what(), "unknown stream " + std::to_string(s.value)), e.what());
  gpu.destroy_stream(t);
}

BOOST_AUTO_TEST_CASE(native_pointer_is_the_address_inside_allocations) {
  test::Host h;
  GpuBackend& gpu = *h.gpu;
  const DevicePtr p = gpu.alloc(256, "native test");
  BOOST_TEST(gpu.native_pointer(p) == as_address(p));
  BOOST_TEST(gpu.native_pointer(p + 100) == as_address(p + 100));
  // The address is what the vendor (here: the CPU) reads and writes.
  const std::uint32_t value = 0xC0FFEE;
  gpu.copy_h2d(p + 16, &value, sizeof value);
  std::uint32_t seen = 0;
  std::memcpy(&seen, static_cast<char*>(gpu.native_pointer(p)) + 16, sizeof seen);
  BOOST_TEST(seen == value);
  gpu.free(p);
  // Freed, or never this backend's: refused, naming the pointer.
  const Error freed = error_of([&] { (void)gpu.native_pointer(p); }, Status::invalid_argument);
  BOOST_TEST(contains(freed.what(), "host:0"), freed.what());
  BOOST_TEST(contains(freed.what(), "native_pointer"), freed.what());
  std::ostringstream hex;
  hex << std::hex << p.value;
  BOOST_TEST(contains(freed.what(), hex.str()), freed.what());
  (void)error_of([&] { (void)gpu.native_pointer(DevicePtr{}); }, Status::invalid_argument);
}

BOOST_AUTO_TEST_CASE(imported_vector_is_on_the_ledger_and_copies_through_gpuplug) {
  test::Host h;
  GpuBackend& gpu = *h.gpu;
  std::vector<float> owned(1000);
  std::iota(owned.begin(), owned.end(), 0.0f);
  const std::size_t bytes = owned.size() * sizeof(float);
  const LedgerStats before = gpu.ledger_stats();
  int released = 0;
  const DevicePtr x = gpu.import_memory(owned.data(), bytes, [&] { ++released; }, "vector");
  BOOST_TEST(gpu.native_pointer(x) == static_cast<void*>(owned.data()));

  // Counted, and kind external in the snapshot.
  const LedgerStats during = gpu.ledger_stats();
  BOOST_TEST(during.live_bytes == before.live_bytes + bytes);
  BOOST_TEST(during.live_count == before.live_count + 1);
  const MemorySnapshot snap = gpu.memory_snapshot();
  const LiveAllocation* a = live_at(snap, x);
  BOOST_TEST_REQUIRE(a != nullptr);
  BOOST_TEST(a->bytes == bytes);
  BOOST_TEST((a->kind == AllocKind::external));
  BOOST_TEST(a->site == "vector");
  BOOST_TEST(contains(to_json(snap), "\"kind\": \"external\""));

  // Copies through gpuplug see and change the application's vector.
  std::vector<float> back(owned.size());
  gpu.copy_d2h(back.data(), x, bytes);
  BOOST_TEST(back == owned);
  const DevicePtr y = gpu.alloc(bytes);
  gpu.copy_d2d(y, x, bytes);
  const float seven = 7.0f;
  gpu.copy_h2d(x + 4 * sizeof(float), &seven, sizeof seven);
  BOOST_TEST(owned[4] == 7.0f);
  gpu.memset(x, 0, 4 * sizeof(float));
  gpu.synchronize();
  BOOST_TEST(owned[0] == 0.0f);
  BOOST_TEST(owned[3] == 0.0f);
  gpu.copy_d2h(back.data(), y, bytes);
  BOOST_TEST(back[4] == 4.0f);  // y kept what x held before

  // Range-checked like an allocation: one byte past the import is refused.
  const Error past = error_of([&] { gpu.copy_d2h(back.data(), x + 8, bytes); },
                              Status::invalid_argument);
  BOOST_TEST(contains(past.what(), "overruns its allocation of " + std::to_string(bytes)),
             past.what());

  BOOST_TEST(released == 0);
  gpu.free(x);
  BOOST_TEST(released == 1);
  BOOST_TEST(gpu.ledger_stats().live_bytes == before.live_bytes + bytes);  // y only
  BOOST_TEST(owned[5] == 5.0f);  // never freed, still the application's
  // A second free is a double free, and runs nothing.
  (void)error_of([&] { gpu.free(x); }, Status::invalid_argument);
  BOOST_TEST(released == 1);
  gpu.free(y);
}

BOOST_AUTO_TEST_CASE(on_release_runs_once_on_destroy_and_on_sweep) {
  test::Host h;
  std::vector<char> a(64), b(64), c(64);
  std::atomic<int> released{0};
  {
    std::shared_ptr<GpuBackend> gpu = h.another();
    (void)gpu->import_memory(a.data(), a.size(), [&] { ++released; });
    (void)gpu->import_memory(b.data(), b.size(), [&] { ++released; });
    const DevicePtr freed = gpu->import_memory(c.data(), c.size(), [&] { ++released; });
    gpu->free(freed);
    BOOST_TEST(released == 1);
    gpu.reset();  // destroy: the two still live are forgotten, and their owners told
  }
  BOOST_TEST(released == 3);

  std::shared_ptr<GpuBackend> gpu = h.another();
  (void)gpu->import_memory(a.data(), a.size(), [&] { ++released; });
  const LedgerStats swept = gpu->sweep_unreleased();
  BOOST_TEST(swept.live_count == 1u);
  BOOST_TEST(released == 4);
  BOOST_TEST(gpu->ledger_stats().live_count == 0u);
  gpu.reset();
  BOOST_TEST(released == 4);  // never twice
}

BOOST_AUTO_TEST_CASE(an_exception_from_on_release_reaches_free_after_the_range_is_forgotten) {
  test::Host h;
  GpuBackend& gpu = *h.gpu;
  std::vector<char> a(32);
  const DevicePtr x = gpu.import_memory(a.data(), a.size(), [] { throw std::runtime_error("owner says no"); });
  BOOST_CHECK_THROW(gpu.free(x), std::runtime_error);
  (void)error_of([&] { gpu.free(x); }, Status::invalid_argument);  // forgotten all the same
}

BOOST_AUTO_TEST_CASE(bad_imports_are_refused_and_keep_no_callback) {
  test::Host h;
  std::atomic<int> released{0};
  {
    std::shared_ptr<GpuBackend> gpu = h.another();
    const Error null = error_of(
        [&] { (void)gpu->import_memory(nullptr, 16, [&] { ++released; }); },
        Status::invalid_argument);
    BOOST_TEST(contains(null.what(), "host:0"), null.what());
    BOOST_TEST(contains(null.what(), "null"), null.what());

    // gpuplug's own memory, or part of it, is not someone else's to import.
    const DevicePtr own = gpu->alloc(128);
    const Error overlap = error_of(
        [&] { (void)gpu->import_memory(gpu->native_pointer(own + 64), 128, [&] { ++released; }); },
        Status::invalid_argument);
    BOOST_TEST(contains(overlap.what(), "overlaps the allocation of 128 bytes"), overlap.what());

    std::vector<char> v(64);
    const DevicePtr x = gpu->import_memory(v.data(), v.size(), [&] { ++released; });
    const Error twice = error_of(
        [&] { (void)gpu->import_memory(v.data() + 8, 8, [&] { ++released; }); },
        Status::invalid_argument);
    BOOST_TEST(contains(twice.what(), "overlaps the imported range of 64 bytes"), twice.what());

    const Error wraps = error_of(
        [&] { (void)gpu->import_memory(v.data(), SIZE_MAX, [&] { ++released; }); },
        Status::invalid_argument);
    BOOST_TEST(contains(wraps.what(), "wraps around"), wraps.what());
    gpu->free(x);
    BOOST_TEST(released == 1);
    gpu->free(own);
  }
  BOOST_TEST(released == 1);  // the refused imports kept nothing to run at destroy
}

BOOST_AUTO_TEST_CASE(imported_stream_is_forgotten_never_destroyed) {
  test::Host h;
  GpuBackend& gpu = *h.gpu;
  const Stream own = gpu.create_stream();
  void* queue = gpu.native(own).stream;
  const Stream imported = gpu.import_stream(queue);
  BOOST_TEST(imported.value != own.value);
  BOOST_TEST(gpu.native(imported).stream == queue);  // the same queue underneath

  // Work on either handle runs on the queue, in order.
  const DevicePtr p = gpu.alloc(4096);
  std::vector<std::uint8_t> ones(4096, 1), back(4096);
  gpu.copy_h2d_async(p, ones.data(), ones.size(), imported);
  gpu.memset(p, 2, 2048, own);
  gpu.synchronize(imported);
  gpu.synchronize(own);
  gpu.copy_d2h(back.data(), p, back.size());
  BOOST_TEST(back[0] == 2);
  BOOST_TEST(back[4095] == 1);

  gpu.destroy_stream(imported);  // forgets the import; the queue is still the backend's
  gpu.memset(p, 3, 4096, own);
  gpu.synchronize(own);
  gpu.copy_d2h(back.data(), p, back.size());
  BOOST_TEST(back[100] == 3);
  BOOST_TEST(gpu.native(own).stream == queue);
  (void)error_of([&] { gpu.destroy_stream(imported); }, Status::invalid_argument);
  (void)error_of([&] { (void)gpu.native(imported); }, Status::invalid_argument);

  // An import left live is forgotten by destroy, not an error.
  (void)gpu.import_stream(queue);
  gpu.destroy_stream(own);
  gpu.free(p);
}

BOOST_AUTO_TEST_CASE(bad_native_streams_are_refused) {
  test::Host h;
  GpuBackend& gpu = *h.gpu;
  const Error null = error_of([&] { (void)gpu.import_stream(nullptr); }, Status::invalid_argument);
  BOOST_TEST(contains(null.what(), "import_stream"), null.what());
  BOOST_TEST(contains(null.what(), "null"), null.what());
  const Error unknown = error_of([&] { (void)gpu.import_stream(reinterpret_cast<void*>(987654)); },
                                 Status::invalid_argument);
  BOOST_TEST(contains(unknown.what(), "987654 is not a queue of this host device"), unknown.what());
  // Another host backend's queue is not this one's.
  std::shared_ptr<GpuBackend> other = h.another();
  const Stream s = other->create_stream();
  const Stream mine = gpu.create_stream();
  const Stream other2 = other->create_stream();
  (void)other2;
  (void)mine;
  const Error foreign = error_of(
      [&] { (void)gpu.import_stream(reinterpret_cast<void*>(std::uintptr_t{1} << 40)); },
      Status::invalid_argument);
  BOOST_TEST(contains(foreign.what(), "not a queue"), foreign.what());
  other->destroy_stream(s);
}

BOOST_AUTO_TEST_CASE(many_threads_import_copy_and_free_at_once) {
  test::Host h;
  GpuBackend& gpu = *h.gpu;
  constexpr int threads = 8;
  constexpr int rounds = 200;
  std::atomic<int> released{0};
  std::atomic<int> wrong{0};
  const LedgerStats before = gpu.ledger_stats();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<std::uint32_t> mine(64, static_cast<std::uint32_t>(t));
      std::vector<std::uint32_t> back(64);
      for (int r = 0; r < rounds; ++r) {
        const DevicePtr x =
            gpu.import_memory(mine.data(), mine.size() * 4, [&] { ++released; }, "threads");
        gpu.copy_d2h(back.data(), x, back.size() * 4);
        if (back != mine) ++wrong;
        const DevicePtr own = gpu.alloc(64);  // ordinary frees interleave with imported ones
        gpu.free(x);
        gpu.free(own);
      }
    });
  }
  for (auto& th : pool) th.join();
  BOOST_TEST(wrong == 0);
  BOOST_TEST(released == threads * rounds);
  BOOST_TEST(gpu.ledger_stats().live_count == before.live_count);
}

BOOST_AUTO_TEST_CASE(layers_forward_native_handles_and_validate_knows_imports) {
  test::Host h;
  const std::filesystem::path trace_file =
      std::filesystem::temp_directory_path() /
      ("gpuplug-test-native-" + std::to_string(::getpid()) + ".json");
  std::shared_ptr<GpuBackend> gpu =
      h.another({{"layers", "validate,trace"}, {"trace_file", trace_file.string()}});
  std::vector<std::uint8_t> v(256, 9), back(256);
  int released = 0;
  const DevicePtr x = gpu->import_memory(v.data(), v.size(), [&] { ++released; });
  BOOST_TEST(gpu->native_pointer(x + 1) == static_cast<void*>(v.data() + 1));
  gpu->copy_d2h(back.data(), x, back.size());  // validate accepts the imported range
  BOOST_TEST(back[255] == 9);
  (void)error_of([&] { gpu->copy_d2h(back.data(), x + 1, back.size()); },
                 Status::invalid_argument);
  const Stream s = gpu->create_stream();
  const Stream i = gpu->import_stream(gpu->native(s).stream);
  BOOST_TEST(gpu->native(i).vendor == "host");
  gpu->destroy_stream(i);
  gpu->destroy_stream(s);
  gpu->free(x);
  BOOST_TEST(released == 1);
  gpu.reset();  // writes the trace: the import is in it, with its site
  std::ifstream in(trace_file);
  const std::string trace((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_TEST(contains(trace, "\"import_memory\""));
  BOOST_TEST(contains(trace, "\"import_stream\""));
  std::filesystem::remove(trace_file);
}
