// SPDX-License-Identifier: Apache-2.0
// Layers (docs/layers.md): how the core stacks layer tables between itself and a plugin,
// with a recording layer written here against <gpuplug/layer.h> the way a third party would.
#define BOOST_TEST_MODULE layers
#include <gpuplug/layer.h>

#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cstring>
#include <gpuplug/gpuplug.hpp>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "contains.hpp"
#include "error_of.hpp"
#include "loader_env.hpp"
#include "log_records.hpp"
#include "scoped_env.hpp"
#include "test_print.hpp"

using gpuplug::Error;
using gpuplug::Options;
using gpuplug::Status;
using namespace gpuplug::test;

BOOST_TEST_GLOBAL_FIXTURE(LoaderEnvironment);

namespace {

// ---- the recording layer: two tables of the same code, "rec_a" and "rec_b" ---------------------

/// What the recording layers saw, in order ("rec_a:alloc"): test state, reset by each case.
struct Journal {
  std::mutex mutex;
  std::vector<std::string> events;
  std::atomic<std::uint64_t> allocs{0};
  void add(std::string event) {
    std::lock_guard lock(mutex);
    events.push_back(std::move(event));
  }
  std::vector<std::string> take() {
    std::lock_guard lock(mutex);
    return std::move(events);
  }
};
Journal journal;
/// The size many_threads_through_a_layer allocates: counted, not journalled.
constexpr std::uint64_t hammer_bytes = 12345;

struct RecInstance {
  gpuplug_layer_next_t next;  // first, as layer.h asks
  const char* name;
  const gpuplug_layer_services_t* services;
  bool fail_alloc;
};

RecInstance& rec(gpuplug_instance_t inst) { return *reinterpret_cast<RecInstance*>(inst); }

gpuplug_status_t rec_alloc(gpuplug_instance_t inst, std::uint64_t bytes, const char* site,
                           std::uint64_t* out) {
  RecInstance& self = rec(inst);
  if (self.fail_alloc) {
    const std::string why = std::string(self.name) + " refused alloc of " + std::to_string(bytes);
    self.services->set_error(self.services->user, why.c_str());
    return GPUPLUG_STATUS_OUT_OF_MEMORY;
  }
  journal.allocs.fetch_add(1, std::memory_order_relaxed);
  if (bytes != hammer_bytes) journal.add(std::string(self.name) + ":alloc");  // counted only
  return self.next.table->alloc(self.next.instance, bytes, site, out);
}

void rec_destroy(gpuplug_instance_t inst) {
  journal.add(std::string(rec(inst).name) + ":destroy");
  delete &rec(inst);
}

template <const char* Name>
gpuplug_status_t rec_create(const gpuplug_layer_next_t* next, const char* plugin, std::uint32_t,
                            const gpuplug_option_t* options, std::uint32_t count,
                            const gpuplug_layer_services_t* services, gpuplug_instance_t* out,
                            char* error, std::size_t error_size) {
  bool fail_alloc = false;
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::string key = options[i].key;
    const std::string value = options[i].value;
    if (key == "rec_fail" && value == "alloc") fail_alloc = true;
    if (key == "rec_fail" && value == "create") {
      std::snprintf(error, error_size, "asked to fail (rec_fail=create)");
      return GPUPLUG_STATUS_INVALID_ARGUMENT;
    }
    journal.add(std::string(Name) + ":option " + key + "=" + value);
  }
  journal.add(std::string(Name) + ":create over " + plugin);
  *out = reinterpret_cast<gpuplug_instance_t>(new RecInstance{*next, Name, services, fail_alloc});
  return GPUPLUG_STATUS_SUCCESS;
}

gpuplug_plugin_v1 rec_table() {
  gpuplug_plugin_v1 t{};
  t.struct_size = sizeof t;
  t.abi_version = GPUPLUG_ABI_VERSION;
  t.destroy = &rec_destroy;
  t.alloc = &rec_alloc;
  return t;
}
const gpuplug_plugin_v1 rec_slots = rec_table();
const char* const rec_keys[] = {"rec_fail", "rec_note", nullptr};
constexpr char rec_a_name[] = "rec_a";
constexpr char rec_b_name[] = "rec_b";

gpuplug_layer_v1 make_layer(const char* name, decltype(gpuplug_layer_v1::create) create) {
  return gpuplug_layer_v1{sizeof(gpuplug_layer_v1), GPUPLUG_LAYER_VERSION, name, "records calls",
                          rec_keys, create, &rec_slots};
}
const gpuplug_layer_v1 rec_a = make_layer(rec_a_name, &rec_create<rec_a_name>);
const gpuplug_layer_v1 rec_b = make_layer(rec_b_name, &rec_create<rec_b_name>);

/// A registry of this build tree's plugins that knows both recording layers.
struct Layered {
  gpuplug::PluginRegistry registry;
  Layered() {
    journal.take();
    registry.discover();
    registry.add_layer(rec_a);
    registry.add_layer(rec_b);
  }
  std::shared_ptr<gpuplug::GpuBackend> host(const Options& options) {
    return registry.create("host!", options);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(stacking)

BOOST_AUTO_TEST_CASE(the_first_layer_named_sees_each_call_first_and_is_destroyed_first) {
  Layered l;
  {
    auto gpu = l.host({{"layers", "rec_a,rec_b"}});
    journal.take();
    const gpuplug::DevicePtr p = gpu->alloc(64);
    // The slots the layers leave null reach the plugin through the core's forwarders.
    const std::vector<std::uint8_t> in(64, 7);
    std::vector<std::uint8_t> out(64, 0);
    gpu->copy_h2d(p, in.data(), in.size());
    gpu->copy_d2h(out.data(), p, out.size());
    BOOST_TEST(out == in);
    gpu->free(p);
    BOOST_TEST(gpu->live_alloc_count() == 0u);
    BOOST_TEST(journal.take() == (std::vector<std::string>{"rec_a:alloc", "rec_b:alloc"}));
  }
  BOOST_TEST(journal.take() == (std::vector<std::string>{"rec_a:destroy", "rec_b:destroy"}));
}

BOOST_AUTO_TEST_CASE(layers_are_created_from_the_plugin_up) {
  Layered l;
  auto gpu = l.host({{"layers", "rec_a,rec_b"}});
  BOOST_TEST(journal.take() ==
             (std::vector<std::string>{"rec_b:create over host", "rec_a:create over host"}));
}

BOOST_AUTO_TEST_CASE(no_layer_unless_enabled) {
  ScopedEnv env("GPUPLUG_LAYERS", std::nullopt);
  Layered l;
  auto gpu = l.host({});
  gpu->free(gpu->alloc(16));
  BOOST_TEST(journal.take().empty());
}

BOOST_AUTO_TEST_CASE(gpuplug_layers_enables_them_and_an_empty_option_turns_them_off) {
  ScopedEnv env("GPUPLUG_LAYERS", "rec_b");
  Layered l;
  {
    auto gpu = l.host({});
    journal.take();
    gpu->free(gpu->alloc(16));
    BOOST_TEST(journal.take() == (std::vector<std::string>{"rec_b:alloc"}));
  }
  journal.take();
  {
    auto gpu = l.host({{"layers", ""}});  // present but empty: no layer, whatever the variable says
    gpu->free(gpu->alloc(16));
    BOOST_TEST(journal.take().empty());
  }
}

BOOST_AUTO_TEST_CASE(the_option_and_gpuplug_layers_merge_each_layer_once_the_option_first) {
  // The environment names rec_b then rec_a, the option rec_a: rec_a (the option's) on top, then
  // rec_b (the environment's, not yet named); rec_a named by both is enabled once.
  ScopedEnv env("GPUPLUG_LAYERS", "rec_b,rec_a");
  Layered l;
  auto gpu = l.host({{"layers", "rec_a"}});
  journal.take();
  gpu->free(gpu->alloc(16));
  BOOST_TEST(journal.take() == (std::vector<std::string>{"rec_a:alloc", "rec_b:alloc"}));
}

BOOST_AUTO_TEST_CASE(a_name_repeated_within_one_source_is_still_refused) {
  ScopedEnv env("GPUPLUG_LAYERS", "rec_b,rec_b");
  Layered l;
  const Error e = error_of([&] { l.host({{"layers", "rec_a"}}); }, Status::invalid_argument);
  BOOST_TEST(contains(e.what(), "GPUPLUG_LAYERS='rec_b,rec_b': layer 'rec_b' is named twice"),
             e.what());
}

BOOST_AUTO_TEST_CASE(many_threads_through_a_layer) {
  Layered l;
  auto gpu = l.host({{"layers", "rec_a"}});
  journal.allocs = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) gpu->free(gpu->alloc(hammer_bytes));
    });
  }
  for (auto& t : threads) t.join();
  BOOST_TEST(journal.allocs.load() == 4000u);
  BOOST_TEST(gpu->live_alloc_count() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(options)

BOOST_AUTO_TEST_CASE(a_layer_gets_its_keys_and_the_plugin_never_sees_them) {
  Layered l;
  // The host plugin refuses an unknown option: creating at all shows the keys were taken out.
  auto gpu = l.host({{"layers", "rec_a"}, {"rec_note", "hello"}, {"device_memory_limit", "1048576"}});
  const auto events = journal.take();
  BOOST_TEST(events == (std::vector<std::string>{"rec_a:option rec_note=hello",
                                                 "rec_a:create over host"}));
  // The plugin still got its own option.
  BOOST_TEST(error_of([&] { gpu->alloc(2u << 20); }, Status::out_of_memory).status() ==
             Status::out_of_memory);
}

BOOST_AUTO_TEST_CASE(a_missing_key_is_read_from_gpuplug_key) {
  ScopedEnv env("GPUPLUG_REC_NOTE", "from the environment");
  Layered l;
  auto gpu = l.host({{"layers", "rec_a"}});
  BOOST_TEST(journal.take().front() == "rec_a:option rec_note=from the environment");
}

BOOST_AUTO_TEST_CASE(an_unknown_option_lists_every_key_the_create_accepts) {
  // The plugin's keys, the core's `layers` and every layer's keys, with the nearest one.
  Layered l;
  const Error e = error_of([&] { l.host({{"layer", "trace"}}); }, Status::invalid_argument);
  BOOST_TEST(e.operation() == "create");
  BOOST_TEST(contains(e.what(),
                      "unknown option 'layer' (known options: device_memory_limit, faults, layers, "
                      "memory_history, modules_dir, rec_fail, rec_note, threads, trace_buffer, "
                      "trace_file); did you mean layers?"),
             e.what());
  const Error far = error_of([&] { l.host({{"zzzzzzzz", "1"}}); }, Status::invalid_argument);
  BOOST_TEST(contains(far.what(), "(known options: device_memory_limit, faults, layers, "), far.what());
  BOOST_TEST(!contains(far.what(), "did you mean"), far.what());
}

BOOST_AUTO_TEST_CASE(a_key_of_a_layer_not_enabled_is_dropped_with_a_warning) {
  Layered l;
  LogRecords logs;
  gpuplug::set_log_level(gpuplug::LogLevel::warning);
  auto gpu = l.host({{"rec_note", "x"}});
  bool warned = false;
  for (const auto& r : logs.take()) {
    warned |= r.level == gpuplug::LogLevel::warning && r.channel == "host:0" &&
              contains(r.message, "option 'rec_note' is for layer 'rec_a'") &&
              contains(r.message, "does not enable");
  }
  BOOST_TEST(warned);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(errors)

BOOST_AUTO_TEST_CASE(a_failure_the_layer_makes_carries_its_message_once) {
  Layered l;
  auto gpu = l.host({{"layers", "rec_a,rec_b"}, {"rec_fail", "alloc"}});
  const Error e = error_of([&] { gpu->alloc(77); }, Status::out_of_memory);
  BOOST_TEST(e.operation() == "alloc");
  BOOST_TEST(e.backend() == "host:0");
  // The layer's message, inside the out-of-memory report (docs/memory.md).
  BOOST_TEST(contains(e.message(), ": rec_a refused alloc of 77; "), e.what());
  // The next failure is the plugin's own, not the layer's message again.
  const Error next = error_of([&] { gpu->free(gpuplug::DevicePtr{0x1234}); },
                              Status::invalid_argument);
  BOOST_TEST(!contains(next.message(), "refused alloc"), next.what());
}

BOOST_AUTO_TEST_CASE(a_layer_that_refuses_to_be_created_names_itself) {
  Layered l;
  const Error e = error_of([&] { l.host({{"layers", "rec_a"}, {"rec_fail", "create"}}); },
                           Status::invalid_argument);
  BOOST_TEST(contains(e.what(), "layer 'rec_a': asked to fail (rec_fail=create)"), e.what());
  BOOST_TEST(contains(e.what(), "bad option for selector 'host!'"), e.what());
}

BOOST_AUTO_TEST_CASE(bad_layers_options_name_the_item) {
  Layered l;
  const Error unknown = error_of([&] { l.host({{"layers", "rec_a,nope"}}); },
                                 Status::invalid_argument);
  BOOST_TEST(contains(unknown.what(), "layers='rec_a,nope': unknown layer 'nope'"),
             unknown.what());
  BOOST_TEST(contains(unknown.what(), "rec_a, rec_b)"), unknown.what());
  const Error empty = error_of([&] { l.host({{"layers", "rec_a,,rec_b"}}); },
                               Status::invalid_argument);
  BOOST_TEST(contains(empty.what(), "an empty layer name"), empty.what());
  const Error twice = error_of([&] { l.host({{"layers", "rec_a, rec_a"}}); },
                               Status::invalid_argument);
  BOOST_TEST(contains(twice.what(), "layer 'rec_a' is named twice"), twice.what());
  ScopedEnv env("GPUPLUG_LAYERS", "missing");
  const Error from_env = error_of([&] { l.host({}); }, Status::invalid_argument);
  BOOST_TEST(contains(from_env.what(), "GPUPLUG_LAYERS='missing': unknown layer 'missing'"),
             from_env.what());
}

BOOST_AUTO_TEST_CASE(an_unknown_layer_suggests_the_nearest_name) {
  ScopedEnv env("GPUPLUG_LAYERS", "tracee");
  Layered l;
  const Error e = error_of([&] { l.host({}); }, Status::invalid_argument);
  BOOST_TEST(contains(e.what(), "unknown layer 'tracee' (known layers: validate, trace, faults, "
                                "sync, rec_a, rec_b); did you mean trace?"),
             e.what());
  const Error far = error_of([&] { l.host({{"layers", "zzzzzzzz"}}); }, Status::invalid_argument);
  BOOST_TEST(!contains(far.what(), "did you mean"), far.what());
}

BOOST_AUTO_TEST_CASE(add_layer_refuses_what_breaks_layer_h) {
  gpuplug::PluginRegistry registry;
  auto refused = [&](gpuplug_layer_v1 layer, const std::string& why) {
    const Error e = error_of([&] { registry.add_layer(layer); }, Status::invalid_argument);
    BOOST_TEST(e.operation() == "add_layer");
    BOOST_TEST(contains(e.what(), why), e.what());
  };
  gpuplug_layer_v1 bad = rec_a;
  bad.name = "Rec-A";
  refused(bad, "the name 'Rec-A' is not [a-z0-9_]+");
  bad = rec_a;
  bad.create = nullptr;
  refused(bad, "create is null");
  bad = rec_a;
  bad.table = nullptr;
  refused(bad, "table is null");
  bad = rec_a;
  bad.layer_version = 2;
  refused(bad, "layer_version 2");
  bad = rec_a;
  bad.struct_size = 8;
  refused(bad, "struct_size 8");
  gpuplug_plugin_v1 no_destroy = rec_slots;
  no_destroy.destroy = nullptr;
  bad = rec_a;
  bad.table = &no_destroy;
  refused(bad, "destroy is null");
  const char* const bad_keys[] = {"layers", nullptr};
  bad = rec_a;
  bad.option_keys = bad_keys;
  refused(bad, "option key 'layers' is the core's");
  registry.add_layer(rec_a);
  refused(rec_a, "the name is taken by the layer from the application");
  BOOST_TEST(registry.layers().back().name == "rec_a");
  BOOST_TEST(registry.layers().back().option_keys ==
             (std::vector<std::string>{"rec_fail", "rec_note"}));
}

BOOST_AUTO_TEST_SUITE_END()
