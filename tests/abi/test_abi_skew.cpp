// SPDX-License-Identifier: Apache-2.0
// ABI skew, both ways: a plugin built against the frozen ABI 1.0 header under the 1.1 core, and
// the 1.1 host plugin answering hosts of 1.0, 1.1, 1.99 and 2.0 (docs/architecture.md, ABI-4).
#define BOOST_TEST_MODULE abi_skew
#include <dlfcn.h>
#include <gpuplug/abi.h>

#include <boost/test/unit_test.hpp>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <functional>
#include <gpuplug/gpuplug.hpp>
#include <gpuplug/table_backend.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../unit/abi_text.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kAbi10Plugin = GPUPLUG_ABI10_PLUGIN;
const fs::path kHostPlugin = fs::path(GPUPLUG_TEST_PLUGIN_DIR) / "libgpuplug-host.so";

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

/// A plugin's entry point, dlopen'ed for the test's life.
class Entry {
 public:
  explicit Entry(const fs::path& file) : handle_(::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    BOOST_TEST_REQUIRE(handle_ != nullptr, "dlopen " << file << ": " << ::dlerror());
    entry_ =
        reinterpret_cast<gpuplug_plugin_entry_fn>(::dlsym(handle_, GPUPLUG_PLUGIN_ENTRY_SYMBOL));
    BOOST_TEST_REQUIRE(entry_ != nullptr);
  }
  ~Entry() { ::dlclose(handle_); }
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;
  const gpuplug_plugin_v1* operator()(std::uint32_t host) const { return entry_(host); }

 private:
  void* handle_;
  gpuplug_plugin_entry_fn entry_ = nullptr;
};

std::shared_ptr<gpuplug::GpuBackend> abi10_backend(gpuplug::PluginRegistry& registry) {
  const gpuplug::PluginInfo info = registry.add_plugin_file(kAbi10Plugin);
  BOOST_TEST_REQUIRE((info.state == gpuplug::PluginState::available), info.message);
  return registry.create("example:0!");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(v1_0_plugin)

BOOST_AUTO_TEST_CASE(publishes_the_1_0_table) {
  // Built against the frozen header: it speaks 1.0 whatever the host asks, with the 1.0 table.
  Entry entry(kAbi10Plugin);
  for (const std::uint32_t host :
       {GPUPLUG_MAKE_VERSION(1, 0), GPUPLUG_MAKE_VERSION(1, 1), GPUPLUG_MAKE_VERSION(1, 99)}) {
    const gpuplug_plugin_v1* t = entry(host);
    BOOST_TEST_REQUIRE(t != nullptr);
    BOOST_TEST(t->abi_version == GPUPLUG_MAKE_VERSION(1, 0));
    BOOST_TEST(t->struct_size == GPUPLUG_PLUGIN_V1_0_SIZE);
    BOOST_TEST(std::string(t->name) == "example");
  }
}

BOOST_AUTO_TEST_CASE(loads_under_the_1_1_core_and_runs) {
  gpuplug::PluginRegistry registry;
  const gpuplug::PluginInfo info = registry.add_plugin_file(kAbi10Plugin);
  BOOST_TEST_REQUIRE((info.state == gpuplug::PluginState::available), info.message);
  BOOST_TEST(info.abi_version == GPUPLUG_MAKE_VERSION(1, 0));
  auto gpu = registry.create("example:0!");
  const std::vector<std::uint32_t> up{1, 2, 3, 0xdeadbeef};
  std::vector<std::uint32_t> down(up.size());
  const gpuplug::DevicePtr p = gpu->alloc(up.size() * 4, "abi_skew");
  gpu->copy_h2d(p, up.data(), up.size() * 4);
  gpu->copy_d2h(down.data(), p, down.size() * 4);
  gpu->free(p);
  BOOST_TEST(down == up);
  // Device info of a 1.0 plugin: the 1.1 identity fields read as unknown.
  const gpuplug::DeviceInfo d = gpu->device_info();
  BOOST_TEST(!d.name.empty());
}

BOOST_AUTO_TEST_CASE(events_are_unsupported_with_a_clear_message) {
  gpuplug::PluginRegistry registry;
  auto gpu = abi10_backend(registry);
  try {
    (void)gpu->create_event();
    BOOST_FAIL("create_event on an ABI 1.0 plugin did not throw");
  } catch (const gpuplug::Error& e) {
    BOOST_TEST((e.status() == gpuplug::Status::unsupported));
    const std::string what = e.what();
    BOOST_TEST(contains(what, "create_event"), what);
    BOOST_TEST(contains(what, "example"), what);
    BOOST_TEST(contains(what, "events are not supported"), what);
  }
  BOOST_CHECK_THROW(gpu->record(gpuplug::Event{1}), gpuplug::Error);
}

BOOST_AUTO_TEST_CASE(a_default_slot_names_the_older_abi) {
  // The core's default for a missing optional slot says the plugin speaks an older ABI, so that
  // "unsupported" reads as "built before this existed", not as a refusal.
  Entry entry(kAbi10Plugin);
  gpuplug_plugin_v1 t{};
  std::memcpy(&t, entry(GPUPLUG_ABI_VERSION), GPUPLUG_PLUGIN_V1_0_SIZE);
  t.alloc_managed = nullptr;
  auto gpu = gpuplug::create_backend_from_table(kAbi10Plugin, t);
  try {
    (void)gpu->alloc_managed(64, "abi_skew");
    BOOST_FAIL("alloc_managed without its slot did not throw");
  } catch (const gpuplug::Error& e) {
    BOOST_TEST((e.status() == gpuplug::Status::unsupported));
    BOOST_TEST(contains(e.what(),
                        "not supported by the example plugin (it speaks ABI 1.0, this "
                        "host " GPUPLUG_TEST_ABI_TEXT ")"),
               e.what());
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(v1_1_plugin_negotiates)

BOOST_AUTO_TEST_CASE(a_1_0_host_gets_the_1_0_table) {
  Entry entry(kHostPlugin);
  const gpuplug_plugin_v1* t = entry(GPUPLUG_MAKE_VERSION(1, 0));
  BOOST_TEST_REQUIRE(t != nullptr);
  BOOST_TEST(t->abi_version == GPUPLUG_MAKE_VERSION(1, 0));
  BOOST_TEST(t->struct_size == GPUPLUG_PLUGIN_V1_0_SIZE);
  // Every 1.0 slot is the full table's: the 1.0 table is a view of the same plugin.
  const gpuplug_plugin_v1* full = entry(GPUPLUG_ABI_VERSION);
  BOOST_TEST_REQUIRE(full != nullptr);
  BOOST_TEST(full != t);
  BOOST_TEST(std::memcmp(&t->name, &full->name,
                         GPUPLUG_PLUGIN_V1_0_SIZE - offsetof(gpuplug_plugin_v1, name)) == 0);
  // Nothing of 1.1 is there even for a host that reads past struct_size.
  BOOST_TEST(t->event_create == nullptr);
  BOOST_TEST(t->event_elapsed_ms == nullptr);
  BOOST_TEST(t->inspect_module == nullptr);
  // The same answer every time, from any thread: a constant.
  BOOST_TEST(entry(GPUPLUG_MAKE_VERSION(1, 0)) == t);
}

BOOST_AUTO_TEST_CASE(a_1_1_host_gets_the_1_1_table) {
  Entry entry(kHostPlugin);
  const gpuplug_plugin_v1* t = entry(GPUPLUG_MAKE_VERSION(1, 1));
  BOOST_TEST_REQUIRE(t != nullptr);
  BOOST_TEST(t->abi_version == GPUPLUG_MAKE_VERSION(1, 1));
  BOOST_TEST(t->struct_size == GPUPLUG_PLUGIN_V1_1_SIZE);
  BOOST_TEST(t->event_create != nullptr);
  // Nothing of 1.2 is there even for a host that reads past struct_size.
  BOOST_TEST(t->ledger_snapshot == nullptr);
  BOOST_TEST(t->ledger_scope_end == nullptr);
  BOOST_TEST(t->copy_peer_async == nullptr);
  BOOST_TEST(t->host_free_pinned == nullptr);
  BOOST_TEST(t->native_handles == nullptr);
  BOOST_TEST(t->import_stream == nullptr);
  BOOST_TEST(entry(GPUPLUG_MAKE_VERSION(1, 1)) == t);
}

BOOST_AUTO_TEST_CASE(a_1_2_host_gets_the_1_2_table) {
  Entry entry(kHostPlugin);
  const gpuplug_plugin_v1* t = entry(GPUPLUG_MAKE_VERSION(1, 2));
  BOOST_TEST_REQUIRE(t != nullptr);
  BOOST_TEST(t->abi_version == GPUPLUG_MAKE_VERSION(1, 2));
  BOOST_TEST(t->struct_size == GPUPLUG_PLUGIN_V1_2_SIZE);
  BOOST_TEST(t->ledger_snapshot != nullptr);
  BOOST_TEST(t->copy_peer_async != nullptr);
  BOOST_TEST(t->host_alloc_pinned != nullptr);
  BOOST_TEST(t->host_free_pinned != nullptr);
  BOOST_TEST(t->native_handles != nullptr);
  BOOST_TEST(t->import_stream != nullptr);
  // Nothing of 1.3 is there even for a host that reads past struct_size.
  BOOST_TEST(t->copy_h2d_async_retained == nullptr);
  BOOST_TEST(t->stream_begin_capture == nullptr);
  BOOST_TEST(t->stream_is_capturing == nullptr);
  BOOST_TEST(entry(GPUPLUG_MAKE_VERSION(1, 2)) == t);
}

BOOST_AUTO_TEST_CASE(later_1_x_hosts_get_1_3) {
  Entry entry(kHostPlugin);
  for (const std::uint32_t host :
       {GPUPLUG_MAKE_VERSION(1, 3), GPUPLUG_MAKE_VERSION(1, 99), GPUPLUG_MAKE_VERSION(1, 0xFFFF)}) {
    const gpuplug_plugin_v1* t = entry(host);
    BOOST_TEST_REQUIRE(t != nullptr);
    BOOST_TEST(t->abi_version == GPUPLUG_MAKE_VERSION(1, 3));
    BOOST_TEST(t->struct_size == GPUPLUG_PLUGIN_V1_3_SIZE);
    BOOST_TEST(t->host_free_pinned != nullptr);
    BOOST_TEST(t->copy_h2d_async_retained != nullptr);
    BOOST_TEST(t->stream_begin_capture != nullptr);  // the graphs group, all of it
    BOOST_TEST(t->stream_end_capture != nullptr);
    BOOST_TEST(t->graph_launch != nullptr);
    BOOST_TEST(t->graph_destroy != nullptr);
    BOOST_TEST(t->stream_abort_capture != nullptr);
    BOOST_TEST(t->stream_is_capturing != nullptr);
  }
}

// A plugin older than 1.3 made no promise that copy_h2d_async's source is free when the call
// returns; the core keeps the promise for it by waiting for the stream after the copy.
std::atomic<int> g_stream_syncs{0};
const gpuplug_plugin_v1* g_counted = nullptr;
gpuplug_status_t counting_stream_synchronize(gpuplug_instance_t inst, std::uint64_t stream) {
  ++g_stream_syncs;
  return g_counted->stream_synchronize(inst, stream);
}

int stream_syncs_of_one_async_upload(const gpuplug_plugin_v1& answer) {
  gpuplug_plugin_v1 table = answer;
  g_counted = &answer;
  table.stream_synchronize = &counting_stream_synchronize;
  auto gpu = gpuplug::create_backend_from_table(kHostPlugin, table);
  const gpuplug::DevicePtr p = gpu->alloc(64, "abi_skew");
  const gpuplug::Stream s = gpu->create_stream();
  g_stream_syncs = 0;
  {
    std::vector<unsigned char> temporary(64, 9);
    gpu->copy_h2d_async(p, temporary.data(), 64, s);
  }
  const int syncs = g_stream_syncs.load();
  gpu->synchronize(s);
  std::vector<unsigned char> down(64);
  gpu->copy_d2h(down.data(), p, 64);
  BOOST_TEST(down == std::vector<unsigned char>(64, 9));
  gpu->destroy_stream(s);
  gpu->free(p);
  return syncs;
}

BOOST_AUTO_TEST_CASE(a_1_2_answers_async_upload_is_waited_for_and_a_1_3_ones_is_not) {
  Entry entry(kHostPlugin);
  BOOST_TEST(stream_syncs_of_one_async_upload(*entry(GPUPLUG_MAKE_VERSION(1, 2))) == 1);
  BOOST_TEST(stream_syncs_of_one_async_upload(*entry(GPUPLUG_MAKE_VERSION(1, 3))) == 0);
}

BOOST_AUTO_TEST_CASE(the_1_1_answer_gives_a_partial_snapshot_and_says_why) {
  // ABI-2 for the memory slots: a 1.1 plugin's backend still snapshots (its counters, marked
  // partial), and reset_peak and scopes are unsupported naming both versions.
  Entry entry(kHostPlugin);
  auto gpu = gpuplug::create_backend_from_table(kHostPlugin, *entry(GPUPLUG_MAKE_VERSION(1, 1)));
  const gpuplug::DevicePtr p = gpu->alloc(64, "abi_skew");
  const gpuplug::MemorySnapshot s = gpu->memory_snapshot();
  BOOST_TEST(!s.complete);
  BOOST_TEST(contains(s.partial_reason, "speaks ABI 1.1 (ledger_snapshot is ABI 1.2)"),
             s.partial_reason);
  BOOST_TEST(s.totals.live_bytes == 64u);
  BOOST_TEST(s.allocations.empty());
  const gpuplug::MemorySnapshot back =
      gpuplug::parse_memory_snapshot(gpuplug::to_json(s), "partial");
  BOOST_TEST(!back.complete);
  BOOST_TEST(back.partial_reason == s.partial_reason);
  try {
    gpu->reset_peak();
    BOOST_FAIL("reset_peak on a 1.1 plugin did not throw");
  } catch (const gpuplug::Error& e) {
    BOOST_TEST((e.status() == gpuplug::Status::unsupported));
    BOOST_TEST(contains(e.what(), "(it speaks ABI 1.1, this host " GPUPLUG_TEST_ABI_TEXT ")"), e.what());
  }
  BOOST_CHECK_THROW(gpuplug::MemoryScope(*gpu, "scope"), gpuplug::Error);
  gpu->free(p);
}

BOOST_AUTO_TEST_CASE(the_1_1_answer_has_no_native_handles_and_says_why) {
  // ABI-2 for the interop slots of 1.2: unsupported, naming the operation and both versions.
  Entry entry(kHostPlugin);
  auto gpu = gpuplug::create_backend_from_table(kHostPlugin, *entry(GPUPLUG_MAKE_VERSION(1, 1)));
  std::vector<char> v(16);
  for (const auto& [operation, call] :
       std::vector<std::pair<std::string, std::function<void()>>>{
           {"native", [&] { (void)gpu->native(); }},
           {"native_pointer", [&] { (void)gpu->native_pointer(gpuplug::DevicePtr{1}); }},
           {"import_memory", [&] { (void)gpu->import_memory(v.data(), v.size(), {}); }},
           {"import_stream", [&] { (void)gpu->import_stream(v.data()); }}}) {
    try {
      call();
      BOOST_FAIL(operation + " on a 1.1 plugin did not throw");
    } catch (const gpuplug::Error& e) {
      BOOST_TEST((e.status() == gpuplug::Status::unsupported), e.what());
      BOOST_TEST(contains(e.what(), operation), e.what());
      BOOST_TEST(contains(e.what(), "(it speaks ABI 1.1, this host " GPUPLUG_TEST_ABI_TEXT ")"), e.what());
    }
  }
}

BOOST_AUTO_TEST_CASE(a_2_0_host_gets_a_table_it_refuses) {
  // Documented choice (ABI-5): the plugin answers another major with its own 1.1 table; the host
  // refuses it by its major, naming both versions. Here the 1.1 core plays that host's part.
  Entry entry(kHostPlugin);
  const gpuplug_plugin_v1* t = entry(GPUPLUG_MAKE_VERSION(2, 0));
  BOOST_TEST_REQUIRE(t != nullptr);
  BOOST_TEST(GPUPLUG_ABI_MAJOR(t->abi_version) == 1u);
  gpuplug_plugin_v1 as_2_0 = *t;
  as_2_0.abi_version = GPUPLUG_MAKE_VERSION(2, 0);
  try {
    (void)gpuplug::create_backend_from_table(kHostPlugin, as_2_0);
    BOOST_FAIL("a table of ABI 2.0 was accepted");
  } catch (const gpuplug::Error& e) {
    BOOST_TEST((e.status() == gpuplug::Status::invalid_argument));
    BOOST_TEST(contains(e.what(), "ABI mismatch: plugin speaks ABI 2.0, host speaks " GPUPLUG_TEST_ABI_TEXT),
               e.what());
  }
}

BOOST_AUTO_TEST_CASE(the_1_0_answer_works_under_the_core) {
  Entry entry(kHostPlugin);
  auto gpu = gpuplug::create_backend_from_table(kHostPlugin, *entry(GPUPLUG_MAKE_VERSION(1, 0)));
  const gpuplug::DevicePtr p = gpu->alloc(64, "abi_skew");
  gpu->memset(p, 7, 64);
  std::vector<unsigned char> down(64);
  gpu->copy_d2h(down.data(), p, 64);
  gpu->free(p);
  BOOST_TEST(down == std::vector<unsigned char>(64, 7));
  BOOST_CHECK_THROW((void)gpu->create_event(), gpuplug::Error);
}

BOOST_AUTO_TEST_CASE(from_many_threads) {
  // Negotiation and create_backend_from_table from 8 threads at once: each thread asks for the
  // 1.0 or the 1.1 table, makes its own backend from it and uses it.
  Entry entry(kHostPlugin);
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      try {
        for (int round = 0; round < 10; ++round) {
          const std::uint32_t host = GPUPLUG_MAKE_VERSION(1, (i + round) % 2);
          const gpuplug_plugin_v1* t = entry(host);
          if (t == nullptr || GPUPLUG_ABI_MINOR(t->abi_version) != GPUPLUG_ABI_MINOR(host)) return;
          auto gpu = gpuplug::create_backend_from_table(kHostPlugin, *t);
          const gpuplug::DevicePtr p = gpu->alloc(256, "abi_skew_threads");
          gpu->memset(p, static_cast<std::uint8_t>(i), 256);
          unsigned char back[256];
          gpu->copy_d2h(back, p, sizeof back);
          gpu->free(p);
          if (back[0] != i || back[255] != i) return;
        }
        ok[i] = 1;
      } catch (const std::exception&) {
        // ok[i] stays 0: the check below names the thread
      }
    });
  }
  for (auto& t : threads) t.join();
  BOOST_TEST(ok == std::vector<int>(8, 1), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(create_backend_from_table_refuses)

BOOST_AUTO_TEST_CASE(bad_tables_and_files) {
  Entry entry(kHostPlugin);
  gpuplug_plugin_v1 t = *entry(GPUPLUG_ABI_VERSION);
  t.struct_size = GPUPLUG_PLUGIN_V1_MIN_SIZE - 8;
  try {
    (void)gpuplug::create_backend_from_table(kHostPlugin, t);
    BOOST_FAIL("a table below the smallest size was accepted");
  } catch (const gpuplug::Error& e) {
    BOOST_TEST((e.status() == gpuplug::Status::invalid_argument));
    BOOST_TEST(contains(e.what(), "plugin table too small"), e.what());
    BOOST_TEST(contains(e.what(), kHostPlugin.string()), e.what());
  }
  t = *entry(GPUPLUG_ABI_VERSION);
  t.launch = nullptr;
  try {
    (void)gpuplug::create_backend_from_table(kHostPlugin, t);
    BOOST_FAIL("a table without launch was accepted");
  } catch (const gpuplug::Error& e) {
    BOOST_TEST(contains(e.what(), "required slot 'launch' is null"), e.what());
  }
  t = *entry(GPUPLUG_ABI_VERSION);
  try {
    (void)gpuplug::create_backend_from_table("/nonexistent/libgpuplug-x.so", t);
    BOOST_FAIL("a missing file was accepted");
  } catch (const gpuplug::Error& e) {
    BOOST_TEST((e.status() == gpuplug::Status::unavailable));
    BOOST_TEST(contains(e.what(), "/nonexistent/libgpuplug-x.so"), e.what());
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(the_1_2_answer_has_no_mapped_memory_but_host_address_of_managed_memory) {
  // ABI-2 for the mapped-memory slots of 1.3: unsupported, naming the operation and both
  // versions; host_address, null in a 1.2 table, answers managed memory from the ledger snapshot
  // and still refuses device memory.
  Entry entry(kHostPlugin);
  auto gpu = gpuplug::create_backend_from_table(kHostPlugin, *entry(GPUPLUG_MAKE_VERSION(1, 2)));
  int local = 0;
  for (const auto& [operation, call] :
       std::vector<std::pair<std::string, std::function<void()>>>{
           {"alloc_host_pinned", [&] { (void)gpu->alloc_host_pinned(64); }},
           {"free_host_pinned", [&] { gpu->free_host_pinned(&local); }},
           {"host_ptr_to_device", [&] { (void)gpu->host_ptr_to_device(&local); }}}) {
    try {
      call();
      BOOST_FAIL(operation + " on a 1.2 plugin did not throw");
    } catch (const gpuplug::Error& e) {
      BOOST_TEST((e.status() == gpuplug::Status::unsupported), e.what());
      BOOST_TEST(contains(e.what(), operation), e.what());
      BOOST_TEST(contains(e.what(), "(it speaks ABI 1.2"), e.what());
    }
  }
  const gpuplug::DevicePtr m = gpu->alloc_managed(64);
  BOOST_TEST(gpu->host_address(m + 8) == reinterpret_cast<void*>(static_cast<std::uintptr_t>((m + 8).value)));
  const gpuplug::DevicePtr d = gpu->alloc(64);
  try {
    (void)gpu->host_address(d);
    BOOST_FAIL("host_address of device memory did not throw");
  } catch (const gpuplug::Error& e) {
    BOOST_TEST((e.status() == gpuplug::Status::invalid_argument), e.what());
    BOOST_TEST(contains(e.what(), "device memory has no host address"), e.what());
  }
  gpu->free(d);
  gpu->free(m);
}
