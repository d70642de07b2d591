// SPDX-License-Identifier: Apache-2.0
// Many devices (docs/interop.md): PluginRegistry::create_all, copy_peer and
// copy_peer_async between backends: the plugin's own peer copy (ABI 1.2), staged through pinned
// or pageable memory. On host here; CTest runs it again on the fake HIP runtime's two GPUs,
// where GPUPLUG_TEST_FAKE_HIP is set.
#define BOOST_TEST_MODULE many_devices
#include <boost/test/unit_test.hpp>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gpuplug/gpuplug.hpp>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "contains.hpp"
#include "error_of.hpp"
#include "loader_env.hpp"
#include "test_print.hpp"

using gpuplug::DevicePtr;
using gpuplug::GpuBackend;
using gpuplug::Status;
using namespace gpuplug::test;

BOOST_TEST_GLOBAL_FIXTURE(LoaderEnvironment);

namespace {

bool on_fake_hip() {
  const char* env = std::getenv("GPUPLUG_TEST_FAKE_HIP");
  return env != nullptr && std::string(env) == "full";
}

std::vector<std::string> names(const std::vector<std::shared_ptr<GpuBackend>>& backends) {
  std::vector<std::string> out;
  for (const auto& b : backends) out.emplace_back(b->name());
  return out;
}

struct Registry {
  gpuplug::PluginRegistry registry;
  Registry() { registry.discover(); }
};

/// `bytes` distinct bytes starting at `seed`.
std::vector<std::uint8_t> pattern(std::size_t bytes, unsigned seed) {
  std::vector<std::uint8_t> v(bytes);
  for (std::size_t i = 0; i < bytes; ++i) v[i] = static_cast<std::uint8_t>((i * 131 + seed) % 251);
  return v;
}

/// Copies `size` bytes from `src` (at offset `src_off` of an allocation) to `dst` (at `dst_off`)
/// with copy_peer; true when the destination holds them, and the bytes around them are intact.
/// No Boost.Test assertion inside: worker threads call it (Boost.Test is not thread-safe).
bool copy_is_exact(GpuBackend& dst, GpuBackend& src, std::size_t size, std::size_t src_off,
                   std::size_t dst_off, const gpuplug::PeerCopyOptions& options) {
  const std::size_t guard = 8;
  const auto in = pattern(size + src_off, 7);
  const std::vector<std::uint8_t> before(dst_off + size + guard, 0xEE);
  const DevicePtr s = src.alloc(in.size() + 1, "test src");
  const DevicePtr d = dst.alloc(before.size(), "test dst");
  if (!in.empty()) src.copy_h2d(s, in.data(), in.size());
  dst.copy_h2d(d, before.data(), before.size());
  gpuplug::copy_peer(dst, DevicePtr{d.value + dst_off}, src, DevicePtr{s.value + src_off}, size,
                     options);
  std::vector<std::uint8_t> out(before.size());
  dst.copy_d2h(out.data(), d, out.size());
  std::vector<std::uint8_t> expected = before;
  std::copy(in.begin() + static_cast<std::ptrdiff_t>(src_off), in.end(),
            expected.begin() + static_cast<std::ptrdiff_t>(dst_off));
  src.free(s);
  dst.free(d);
  return out == expected;
}

void check_copy(GpuBackend& dst, GpuBackend& src, std::size_t size, std::size_t src_off,
                std::size_t dst_off, const gpuplug::PeerCopyOptions& options) {
  BOOST_TEST(copy_is_exact(dst, src, size, src_off, dst_off, options),
             "size " << size << ", offsets " << src_off << "/" << dst_off);
}

/// copy_peer_async on a stream of each backend, with work queued on both around it: the source
/// is filled by a memset queued on src_stream before the call (the copy must see it), and a
/// memset queued on dst_stream after the call overwrites the first `size / 2` bytes of the
/// destination (it must land after the copy). True when the destination holds exactly that.
/// No Boost.Test assertion inside (worker threads call it).
bool async_copy_is_ordered(GpuBackend& dst, GpuBackend& src, std::size_t size,
                           const gpuplug::PeerCopyOptions& options) {
  const gpuplug::Stream src_stream = src.create_stream();
  const gpuplug::Stream dst_stream = dst.create_stream();
  const DevicePtr s = src.alloc(size, "test src");
  const DevicePtr d = dst.alloc(size, "test dst");
  dst.memset(d, 0x00, size, gpuplug::Stream{});
  dst.synchronize();
  src.memset(s, 0x5A, size, src_stream);  // queued: the copy starts after it
  gpuplug::PeerCopy copy =
      gpuplug::copy_peer_async(dst, d, dst_stream, src, s, src_stream, size, options);
  dst.memset(d, 0xA5, size / 2, dst_stream);  // queued after the copy: lands after it
  copy.wait();
  dst.synchronize(dst_stream);
  std::vector<std::uint8_t> out(size);
  dst.copy_d2h(out.data(), d, size);
  std::vector<std::uint8_t> expected(size, 0x5A);
  std::fill_n(expected.begin(), size / 2, std::uint8_t{0xA5});
  src.free(s);
  dst.free(d);
  src.destroy_stream(src_stream);
  dst.destroy_stream(dst_stream);
  return out == expected && copy.ready();
}

/// The ways copy_peer may copy between two backends: the plugin's own peer copy (used where both
/// come from one plugin), staged through pinned memory, staged through pageable memory.
const std::vector<std::pair<const char*, gpuplug::PeerCopyOptions>>& variants() {
  static const std::vector<std::pair<const char*, gpuplug::PeerCopyOptions>> all{
      {"vendor", {4096, true, true}},
      {"pinned staging", {4096, false, true}},
      {"pageable staging", {4096, false, false}},
  };
  return all;
}

/// A counter the fake HIP runtime exports (0 when it is not loaded).
std::size_t fake_hip_counter(const char* name) {
  void* fake = dlopen("libamdhip64.so", RTLD_NOW | RTLD_NOLOAD);
  if (fake == nullptr) return 0;
  const auto f = reinterpret_cast<std::size_t (*)()>(dlsym(fake, name));
  const std::size_t n = f != nullptr ? f() : 0;
  dlclose(fake);
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(create_all)

BOOST_FIXTURE_TEST_CASE(one_backend_per_device_each_with_its_own_ledger, Registry) {
  if (on_fake_hip()) {
    const auto all = registry.create_all("hip");
    BOOST_TEST(names(all) == (std::vector<std::string>{"hip:0", "hip:1"}));
    const DevicePtr p = all[0]->alloc(64);
    BOOST_TEST(all[0]->live_alloc_count() == 1u);
    BOOST_TEST(all[1]->live_alloc_count() == 0u);
    all[0]->free(p);
    BOOST_TEST(names(registry.create_all("auto")) == (std::vector<std::string>{"hip:0", "hip:1"}));
    BOOST_TEST(names(registry.create_all("hip:1,host")) ==
               (std::vector<std::string>{"hip:1", "host:0"}));
  } else {
    BOOST_TEST(names(registry.create_all("auto")) == (std::vector<std::string>{"host:0"}));
  }
  BOOST_TEST(names(registry.create_all("host")) == (std::vector<std::string>{"host:0"}));
  // Named twice: one backend.
  BOOST_TEST(names(registry.create_all("host,host:0")) == (std::vector<std::string>{"host:0"}));
  // A plugin that is not usable here is skipped unless required.
  BOOST_TEST(names(registry.create_all("nosuch,host")) == (std::vector<std::string>{"host:0"}));
}

BOOST_FIXTURE_TEST_CASE(nothing_usable_or_a_bad_selector_is_an_error, Registry) {
  const auto none = error_of([&] { registry.create_all("nosuch"); }, Status::not_found);
  BOOST_TEST(none.operation() == "create_all");
  BOOST_TEST(contains(none.message(), "selector 'nosuch' names no usable device"), none.what());
  const auto required = error_of([&] { registry.create_all("nosuch!,host"); });
  BOOST_TEST(contains(required.what(), "nosuch"), required.what());
  const auto bad = error_of([&] { registry.create_all("host:x"); }, Status::invalid_argument);
  BOOST_TEST(contains(bad.what(), "host:x"), bad.what());
  const auto no_device = error_of([&] { registry.create_all("host:7!"); }, Status::not_found);
  BOOST_TEST(contains(no_device.what(), "no such device"), no_device.what());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(copy_peer)

/// The pairs the cases copy between: two host backends, and with the fake HIP runtime, host and
/// hip:0 both ways and hip:0 to hip:1.
struct Pairs : Registry {
  std::vector<std::shared_ptr<GpuBackend>> keep;
  std::vector<std::pair<GpuBackend*, GpuBackend*>> pairs;  // (dst, src)
  Pairs() {
    auto a = registry.create("host!");
    auto b = registry.create("host!");
    keep = {a, b};
    pairs = {{a.get(), b.get()}, {b.get(), a.get()}};
    if (on_fake_hip()) {
      auto hips = registry.create_all("hip");
      keep.insert(keep.end(), hips.begin(), hips.end());
      pairs.push_back({hips[0].get(), a.get()});
      pairs.push_back({a.get(), hips[0].get()});
      pairs.push_back({hips[1].get(), hips[0].get()});
    }
  }
  ~Pairs() {
    for (const auto& b : keep) BOOST_TEST(b->live_alloc_count() == 0u, b->name());
  }
};

BOOST_FIXTURE_TEST_CASE(sizes_zero_one_a_chunk_and_many_with_misaligned_ends, Pairs) {
  const std::size_t chunk = 4096;
  for (const auto& [how, options] : variants()) {
    for (auto [dst, src] : pairs) {
      BOOST_TEST_CONTEXT(src->name() << " -> " << dst->name() << ", " << how) {
        check_copy(*dst, *src, 0, 0, 0, options);
        check_copy(*dst, *src, 1, 0, 0, options);
        check_copy(*dst, *src, chunk, 0, 0, options);
        check_copy(*dst, *src, 3 * chunk + 17, 3, 5, options);  // several chunks, misaligned ends
        check_copy(*dst, *src, 2 * chunk - 1, 1, 0, options);
      }
    }
  }
}

BOOST_FIXTURE_TEST_CASE(the_same_backend_copies_device_to_device, Pairs) {
  GpuBackend& gpu = *keep[0];
  check_copy(gpu, gpu, 10000, 4, 12, {4096});
  BOOST_TEST(async_copy_is_ordered(gpu, gpu, 10000, {4096}));
}

BOOST_FIXTURE_TEST_CASE(overlapping_calls_from_many_threads, Pairs) {
  for (const auto& [how, options] : variants()) {
    for (auto [dst, src] : pairs) {
      std::vector<std::thread> threads;
      std::vector<int> exact(4, 0);  // per thread: 1 when its copy was exact
      for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
          exact[static_cast<std::size_t>(t)] =
              copy_is_exact(*dst, *src, 20000 + static_cast<std::size_t>(t) * 1000, 0,
                            static_cast<std::size_t>(t), options) &&
              async_copy_is_ordered(*dst, *src, 9000 + static_cast<std::size_t>(t), options);
        });
      }
      for (auto& t : threads) t.join();
      BOOST_TEST(exact == std::vector<int>(4, 1), src->name() << " -> " << dst->name() << ", " << how);
    }
  }
}

BOOST_FIXTURE_TEST_CASE(the_async_form_orders_on_both_streams, Pairs) {
  for (const auto& [how, options] : variants()) {
    for (auto [dst, src] : pairs) {
      BOOST_TEST_CONTEXT(src->name() << " -> " << dst->name() << ", " << how) {
        BOOST_TEST(async_copy_is_ordered(*dst, *src, 1, options));
        BOOST_TEST(async_copy_is_ordered(*dst, *src, 3 * 4096 + 17, options));
      }
    }
  }
  // Zero bytes: nothing in flight.
  gpuplug::PeerCopy none = gpuplug::copy_peer_async(*keep[0], DevicePtr{}, {}, *keep[1],
                                                    DevicePtr{}, {}, 0);
  BOOST_TEST(none.ready());
  none.wait();
}

BOOST_FIXTURE_TEST_CASE(errors_name_both_backends_and_where_the_copy_stopped, Pairs) {
  GpuBackend& dst = *pairs[0].first;
  GpuBackend& src = *pairs[0].second;
  const DevicePtr s = src.alloc(10000, "src");
  const DevicePtr d = dst.alloc(6000, "dst");
  // The destination ends at 6000 bytes: staged, the second 4096-byte chunk runs past it.
  const auto e = error_of([&] { gpuplug::copy_peer(dst, d, src, s, 10000, {4096, false}); },
                          Status::invalid_argument);
  BOOST_TEST(e.operation() == "copy_peer");
  BOOST_TEST(contains(e.message(), std::string(src.name()) + " "), e.what());
  BOOST_TEST(contains(e.message(), "10000 bytes"), e.what());
  BOOST_TEST(contains(e.message(), ": at byte 4096: "), e.what());
  // The plugin's own copy refuses the whole range before copying anything.
  const auto vendor = error_of([&] { gpuplug::copy_peer(dst, d, src, s, 10000, {4096}); },
                               Status::invalid_argument);
  BOOST_TEST(contains(vendor.message(), "10000 bytes (9.8 KiB): copy_peer_async: "), vendor.what());
  BOOST_TEST(contains(vendor.message(), "destination"), vendor.what());
  const auto async = error_of(
      [&] {
        auto c = gpuplug::copy_peer_async(dst, d, {}, src, s, {}, 10000, {4096, false, false});
      },
      Status::invalid_argument);
  BOOST_TEST(async.operation() == "copy_peer_async");
  BOOST_TEST(contains(async.message(), ": at byte 4096: "), async.what());
  const auto zero = error_of([&] { gpuplug::copy_peer(dst, d, src, s, 16, {0}); },
                             Status::invalid_argument);
  BOOST_TEST(contains(zero.message(), "chunk_bytes is 0"), zero.what());
  const auto unknown = error_of(
      [&] { gpuplug::copy_peer(dst, d, src, DevicePtr{0x10}, 16, {4096, false}); },
      Status::invalid_argument);
  BOOST_TEST(contains(unknown.message(), ": at byte 0: copy_d2h: "), unknown.what());
  const auto unknown_vendor = error_of(
      [&] { gpuplug::copy_peer(dst, d, src, DevicePtr{0x10}, 16); }, Status::invalid_argument);
  BOOST_TEST(contains(unknown_vendor.message(), "source"), unknown_vendor.what());
  // Both backends still work.
  src.free(s);
  dst.free(d);
  check_copy(dst, src, 5000, 0, 0, {4096});
}

// The plugin's own copy reaches the plugin through layers on either side: the source's instance
// is the plugin's, passed through the destination's layers unchanged.
BOOST_FIXTURE_TEST_CASE(the_vendor_copy_passes_through_layers, Registry) {
  const std::filesystem::path trace =
      std::filesystem::temp_directory_path() /
      ("gpuplug_peer_trace_" + std::to_string(::getpid()) + ".json");
  {
    auto layered = registry.create(
        "host!", {{"layers", "validate,trace"}, {"trace_file", trace.string()}});
    auto plain = registry.create("host!");
    check_copy(*layered, *plain, 3 * 4096 + 5, 1, 2, {4096});
    check_copy(*plain, *layered, 3 * 4096 + 5, 1, 2, {4096});
    check_copy(*layered, *plain, 3 * 4096 + 5, 1, 2, {4096, false});  // pinned by `layered`
    BOOST_TEST(async_copy_is_ordered(*layered, *plain, 5000, {4096}));
    BOOST_TEST(layered->live_alloc_count() == 0u);
  }
  // The trace layer saw the new slots (written when the backend went).
  std::ifstream in(trace);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(trace);
  BOOST_TEST(contains(text, "copy_peer_async"));
  BOOST_TEST(contains(text, "host_alloc_pinned"));
  BOOST_TEST(contains(text, "host_free_pinned"));
}

// On the fake HIP runtime: hip:0 -> hip:1 is hipMemcpyPeerAsync, staging is hipHostMalloc'd,
// kept by the backend for the next copy, and freed when the backend goes.
BOOST_FIXTURE_TEST_CASE(hip_uses_its_peer_copy_and_pinned_staging, Pairs) {
  if (!on_fake_hip()) return;
  GpuBackend& hip0 = *keep[2];
  GpuBackend& hip1 = *keep[3];
  const std::size_t peer_before = fake_hip_counter("gpuplug_fake_hip_peer_copies");
  check_copy(hip1, hip0, 10000, 0, 0, {4096});
  BOOST_TEST(async_copy_is_ordered(hip1, hip0, 10000, {4096}));
  BOOST_TEST(fake_hip_counter("gpuplug_fake_hip_peer_copies") == peer_before + 2);
  check_copy(hip1, hip0, 10000, 0, 0, {4096, false});
  BOOST_TEST(fake_hip_counter("gpuplug_fake_hip_peer_copies") == peer_before + 2);
  const std::size_t pinned_before = fake_hip_counter("gpuplug_fake_hip_pinned_allocs");
  const std::size_t live_before = fake_hip_counter("gpuplug_fake_hip_pinned_live");
  {
    auto fresh = registry.create("hip:0!");
    check_copy(*fresh, *keep[0], 10000, 0, 0, {4096});  // host -> hip:0, staged in hip's memory
    BOOST_TEST(fake_hip_counter("gpuplug_fake_hip_pinned_allocs") == pinned_before + 2);
    // The next copy reuses the two buffers the backend kept; pageable staging takes none.
    check_copy(*keep[0], *fresh, 10000, 0, 0, {4096});
    BOOST_TEST(async_copy_is_ordered(*fresh, *keep[0], 10000, {4096}));
    check_copy(*fresh, *keep[0], 10000, 0, 0, {4096, true, false});
    BOOST_TEST(fake_hip_counter("gpuplug_fake_hip_pinned_allocs") == pinned_before + 2);
    BOOST_TEST(fake_hip_counter("gpuplug_fake_hip_pinned_live") == live_before + 2);
  }
  // The backend freed what it kept when it went.
  BOOST_TEST(fake_hip_counter("gpuplug_fake_hip_pinned_live") == live_before);
}

BOOST_AUTO_TEST_SUITE_END()
