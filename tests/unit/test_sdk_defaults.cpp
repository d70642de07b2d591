// SPDX-License-Identifier: Apache-2.0
// The plugin SDK's defaults for what the ABI leaves optional, through a real table: the async
// copies a vendor does not override (stream first, then the synchronous copy), options under the
// reserved "gpuplug." prefix (ignored, every other unknown key still refused), and the ledger and
// module registry a hook may ask (Device::ledger, Device::modules).
#define BOOST_TEST_MODULE sdk_defaults
#include <array>
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "contains.hpp"
#include "ledger.hpp"
#include "module_registry.hpp"
#include "plugin_sdk.hpp"

using gpuplug::test::contains;
namespace sdk = gpuplug::sdk;

namespace {

/// A device of host memory that overrides only the hooks the SDK requires, and records the
/// order of the calls the async-copy defaults make.
class MinimalDevice final : public sdk::Device {
 public:
  explicit MinimalDevice(const sdk::DeviceConfig& config) : Device(config) {}
  ~MinimalDevice() override { shutdown(); }

  std::vector<std::string> calls() {
    std::lock_guard lock(mutex_);
    return calls_;
  }

  std::uint64_t vendor_alloc(std::uint64_t bytes) override {
    return reinterpret_cast<std::uintptr_t>(new std::byte[bytes]);
  }
  void vendor_free(std::uint64_t ptr, gpuplug_alloc_kind_t) override {
    delete[] reinterpret_cast<std::byte*>(ptr);
  }
  void vendor_memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) override {
    free_bytes = total_bytes = 1 << 20;
  }
  void vendor_device_info(gpuplug_device_info_t& out) override { out.ordinal = 0; }
  void vendor_copy_h2d(std::uint64_t dst, const void* src, std::uint64_t bytes) override {
    record("copy_h2d");
    std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  }
  void vendor_copy_d2h(void* dst, std::uint64_t src, std::uint64_t bytes) override {
    record("copy_d2h");
    std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  }
  void vendor_copy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes) override {
    record("copy_d2d");
    std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  }
  void vendor_memset_d8(std::uint64_t dst, std::uint8_t value, std::uint64_t bytes,
                        std::uint64_t) override {
    std::memset(reinterpret_cast<void*>(dst), value, bytes);
  }
  std::uint64_t vendor_stream_create() override { return ++last_stream_; }
  void vendor_stream_destroy(std::uint64_t) override {}
  void vendor_stream_synchronize(std::uint64_t stream) override {
    record("stream_synchronize(" + std::to_string(stream) + ")");
  }
  void vendor_synchronize() override {}
  sdk::VendorModule vendor_load_module(std::string_view, std::span<const std::byte>) override {
    return 1;
  }
  void vendor_unload_module(sdk::VendorModule) noexcept override {}
  std::uint64_t vendor_get_function(sdk::VendorModule, const std::string& func) override {
    return func == "k" ? 0x4000 : 0;
  }
  std::vector<std::string> vendor_list_functions(sdk::VendorModule) override { return {"k"}; }
  std::optional<sdk::VendorGlobal> vendor_get_global(sdk::VendorModule,
                                                     const std::string&) override {
    return std::nullopt;
  }
  std::vector<std::string> vendor_module_file_extensions() const override { return extensions; }
  std::vector<std::string> extensions{".bin"};  // set before modules are looked up
  void vendor_launch(std::uint64_t, gpuplug_dim3_t, gpuplug_dim3_t, std::uint32_t, std::uint64_t,
                     void**) override {}

 private:
  void record(std::string call) {
    std::lock_guard lock(mutex_);
    calls_.push_back(std::move(call));
  }
  std::mutex mutex_;
  std::vector<std::string> calls_;
  std::uint64_t last_stream_ = 0;
};

struct MinimalPlugin {
  static constexpr const char* name = "minimal";
  static constexpr const char* vendor = "test";
  static constexpr const char* version = "1";
  static constexpr std::array<std::string_view, 1> extra_options{"gpuplug.known"};
  static void probe(gpuplug_probe_result_t& out) {
    sdk::fill_probe(out, GPUPLUG_PROBE_AVAILABLE, 1, "one");
  }
  static void describe_device(std::uint32_t, gpuplug_device_info_t&) {}
  static std::unique_ptr<sdk::Device> create(const sdk::DeviceConfig& config) {
    return std::make_unique<MinimalDevice>(config);
  }
};

const gpuplug_plugin_v1& table() {
  static const gpuplug_plugin_v1 t = sdk::detail::make_table<MinimalPlugin>();
  return t;
}

/// One instance of the minimal plugin, destroyed at scope exit.
struct Instance {
  gpuplug_instance_t inst = nullptr;
  Instance() {
    char error[256] = {};
    BOOST_TEST_REQUIRE(table().create(0, nullptr, 0, nullptr, &inst, error, sizeof error) ==
                           GPUPLUG_STATUS_SUCCESS,
                       error);
  }
  ~Instance() { table().destroy(inst); }
  MinimalDevice& device() { return *reinterpret_cast<MinimalDevice*>(inst); }
  std::string last_error() {
    char buf[512] = {};
    table().last_error(inst, buf, sizeof buf);
    return buf;
  }
};

/// parse_config on `options`, the extra key "gpuplug.known" allowed; the Failure's message, or
/// "" when it succeeded (then `out` holds the config).
std::string parse(std::vector<gpuplug_option_t> options, sdk::DeviceConfig* out = nullptr) {
  try {
    sdk::DeviceConfig config =
        sdk::parse_config(0, options.data(), static_cast<std::uint32_t>(options.size()), nullptr,
                          MinimalPlugin::extra_options);
    if (out != nullptr) *out = std::move(config);
    return "";
  } catch (const sdk::Failure& f) {
    return f.what();
  }
}

}  // namespace

// The ABI marks the async copies optional with "sync stream + synchronous copy" as the default;
// a device that does not override them gets that default, in that order, with the stream passed.
BOOST_AUTO_TEST_CASE(async_copies_default_to_stream_then_synchronous_copy) {
  Instance d;
  std::uint64_t stream = 0;
  BOOST_TEST_REQUIRE(table().stream_create(d.inst, &stream) == GPUPLUG_STATUS_SUCCESS);
  std::uint64_t a = 0, b = 0;
  BOOST_TEST_REQUIRE(table().alloc(d.inst, 16, "a", &a) == GPUPLUG_STATUS_SUCCESS);
  BOOST_TEST_REQUIRE(table().alloc(d.inst, 16, "b", &b) == GPUPLUG_STATUS_SUCCESS);
  const std::array<std::uint8_t, 16> in{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  std::array<std::uint8_t, 16> out{};
  BOOST_TEST(
      table().copy_h2d_async(d.inst, a, in.data(), in.size(), stream) == GPUPLUG_STATUS_SUCCESS,
      d.last_error());
  BOOST_TEST(table().copy_d2d_async(d.inst, b, a, in.size(), 0) == GPUPLUG_STATUS_SUCCESS,
             d.last_error());
  BOOST_TEST(
      table().copy_d2h_async(d.inst, out.data(), b, out.size(), stream) == GPUPLUG_STATUS_SUCCESS,
      d.last_error());
  BOOST_TEST(out == in);
  const std::string s = std::to_string(stream);
  const std::vector<std::string> expected{"stream_synchronize(" + s + ")", "copy_h2d",
                                          "stream_synchronize(0)",         "copy_d2d",
                                          "stream_synchronize(" + s + ")", "copy_d2h"};
  BOOST_TEST(d.device().calls() == expected, boost::test_tools::per_element());
  // The SDK's checks still run before the default: an unknown stream never reaches a hook.
  BOOST_TEST(table().copy_h2d_async(d.inst, a, in.data(), in.size(), stream + 100) ==
             GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(d.device().calls().size() == expected.size());
  BOOST_TEST(table().free(d.inst, a) == GPUPLUG_STATUS_SUCCESS);
  BOOST_TEST(table().free(d.inst, b) == GPUPLUG_STATUS_SUCCESS);
}

BOOST_AUTO_TEST_CASE(options_under_the_gpuplug_prefix_are_ignored_others_refused) {
  sdk::DeviceConfig config;
  BOOST_TEST(parse({{"gpuplug.future_option", "1"}, {"device_memory_limit", "1K"}}, &config) == "");
  BOOST_TEST(config.options.at("gpuplug.future_option") == "1");  // recorded, not interpreted
  BOOST_TEST(config.device_memory_limit.value() == 1024u);
  // A plugin that knows a gpuplug.* option lists it, and it is kept like any other.
  BOOST_TEST(parse({{"gpuplug.known", "x"}}, &config) == "");
  BOOST_TEST(config.options.at("gpuplug.known") == "x");
  // Only the exact prefix is reserved: these are unknown options of this plugin.
  for (const char* key : {"gpuplugfuture", "gpuplug", "GPUPLUG.future", "x.gpuplug.future"}) {
    const std::string error = parse({{key, "1"}});
    BOOST_TEST(contains(error, std::string("unknown option '") + key + "'"), error);
    BOOST_TEST(contains(error, "known options: device_memory_limit, gpuplug.known, memory_history, "
                               "modules_dir"),
               error);
  }
  // Ignored is not unchecked: given twice is still an error naming it.
  const std::string twice = parse({{"gpuplug.future_option", "1"}, {"gpuplug.future_option", "2"}});
  BOOST_TEST(twice == "option gpuplug.future_option given more than once");
}

// Through create: a host that passes a future common option does not break this plugin.
BOOST_AUTO_TEST_CASE(create_accepts_a_future_common_option) {
  const gpuplug_option_t options[] = {{"gpuplug.future_option", "on"}};
  gpuplug_instance_t inst = nullptr;
  char error[256] = {};
  BOOST_TEST(
      table().create(0, options, 1, nullptr, &inst, error, sizeof error) == GPUPLUG_STATUS_SUCCESS,
      error);
  BOOST_TEST(inst != nullptr);
  if (inst != nullptr) table().destroy(inst);
  const gpuplug_option_t unknown[] = {{"future_option", "on"}};
  inst = nullptr;
  BOOST_TEST(table().create(0, unknown, 1, nullptr, &inst, error, sizeof error) ==
             GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(contains(error, "unknown option 'future_option'"), error);
  BOOST_TEST(inst == nullptr);
}

// What a hook may ask the SDK instead of keeping its own allocation map or module table.
BOOST_AUTO_TEST_CASE(a_device_looks_up_its_ledger_and_modules) {
  Instance d;
  std::uint64_t a = 0;
  BOOST_TEST_REQUIRE(table().alloc(d.inst, 100, "weights", &a) == GPUPLUG_STATUS_SUCCESS);
  const sdk::Device& device = d.device();
  const std::optional<sdk::LedgerEntry> hit = device.ledger().find(a + 99);
  BOOST_TEST_REQUIRE(hit.has_value());
  BOOST_TEST(hit->ptr == a);
  BOOST_TEST(hit->bytes == 100u);
  BOOST_TEST(hit->kind == GPUPLUG_ALLOC_DEVICE);
  BOOST_TEST(!device.ledger().find(a + 100).has_value());
  BOOST_TEST(device.ledger().live_device_bytes() == 100u);

  const std::byte image[4] = {};
  BOOST_TEST(table().load_module(d.inst, "mod", image, sizeof image) == GPUPLUG_STATUS_SUCCESS);
  sdk::ModuleRegistry& modules = d.device().modules();
  BOOST_TEST(modules.names() == std::vector<std::string>{"mod"}, boost::test_tools::per_element());
  BOOST_TEST(modules.has("mod"));
  BOOST_TEST(modules.get_function("mod", "k") == 0x4000u);
  try {
    modules.get_function("mod", "nope");
    BOOST_ERROR("an unknown function was found");
  } catch (const sdk::Failure& f) {
    BOOST_TEST(contains(f.what(), "module mod has: k"), f.what());
  }
  BOOST_TEST(table().free(d.inst, a) == GPUPLUG_STATUS_SUCCESS);
  BOOST_TEST(!device.ledger().find(a).has_value());
}

// A module that is not loaded and not found names the folders and the files it looked for; a
// plugin naming no file extensions says that it reads no module files, instead of an empty list.
BOOST_AUTO_TEST_CASE(a_module_not_found_says_where_it_was_looked_for) {
  const std::string folder = std::filesystem::temp_directory_path().string();
  const gpuplug_option_t options[] = {{"modules_dir", folder.c_str()}};
  gpuplug_instance_t inst = nullptr;
  char error[256] = {};
  BOOST_TEST_REQUIRE(table().create(0, options, 1, nullptr, &inst, error, sizeof error) ==
                         GPUPLUG_STATUS_SUCCESS,
                     error);
  auto& device = *reinterpret_cast<MinimalDevice*>(inst);
  const auto message = [&] {
    try {
      device.modules().get("gpuplug_absent_module");
    } catch (const sdk::Failure& f) {
      BOOST_TEST(f.status() == GPUPLUG_STATUS_NOT_FOUND);
      return std::string(f.what());
    }
    BOOST_ERROR("an absent module was found");
    return std::string();
  };
  const std::string with_ext = message();
  BOOST_TEST(contains(with_ext, "no gpuplug_absent_module.bin in the module folders"), with_ext);
  BOOST_TEST(contains(with_ext, folder), with_ext);
  device.extensions.clear();
  const std::string without = message();
  BOOST_TEST(!contains(without, "no  in"), without);
  BOOST_TEST(contains(without, "names no module file extensions"), without);
  BOOST_TEST(contains(without, folder), without);
  table().destroy(inst);
}

#if GPUPLUG_ABI_VERSION_MINOR >= 3
// ABI 1.3 pitched 2D copies: a device without 2D hooks gets one vendor async copy per row (each
// here the async default: stream, then the synchronous copy), after the SDK's checks: the pitches,
// each device side's whole span, the stream; a width or height of 0 reaches no hook.
BOOST_AUTO_TEST_CASE(pitched_copies_default_to_one_async_copy_per_row_after_the_checks) {
  Instance d;
  std::uint64_t stream = 0;
  BOOST_TEST_REQUIRE(table().stream_create(d.inst, &stream) == GPUPLUG_STATUS_SUCCESS);
  constexpr std::uint64_t pitch = 8, width = 5, rows = 3;
  std::uint64_t a = 0, b = 0;
  BOOST_TEST_REQUIRE(table().alloc(d.inst, pitch * rows, "a", &a) == GPUPLUG_STATUS_SUCCESS);
  BOOST_TEST_REQUIRE(table().alloc(d.inst, pitch * rows, "b", &b) == GPUPLUG_STATUS_SUCCESS);
  std::array<std::uint8_t, pitch * rows> in{}, out{};
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint8_t>(i + 1);
  BOOST_TEST(table().memset_d8(d.inst, b, 0, pitch * rows, 0) == GPUPLUG_STATUS_SUCCESS);
  BOOST_TEST(table().copy_h2d_2d_async(d.inst, a, pitch, in.data(), pitch, width, rows, stream) ==
                 GPUPLUG_STATUS_SUCCESS,
             d.last_error());
  BOOST_TEST(table().copy_d2d_2d_async(d.inst, b, pitch, a, pitch, width, rows, stream) ==
                 GPUPLUG_STATUS_SUCCESS,
             d.last_error());
  BOOST_TEST(table().copy_d2h_2d_async(d.inst, out.data(), pitch, b, pitch, pitch, rows, stream) ==
                 GPUPLUG_STATUS_SUCCESS,
             d.last_error());
  for (std::size_t i = 0; i < out.size(); ++i)
    BOOST_TEST(out[i] == (i % pitch < width ? in[i] : 0), "byte " << i);
  const std::string s = "stream_synchronize(" + std::to_string(stream) + ")";
  std::vector<std::string> expected;
  for (const char* copy : {"copy_h2d", "copy_d2d", "copy_d2h"})
    for (std::uint64_t r = 0; r < rows; ++r) expected.insert(expected.end(), {s, copy});
  BOOST_TEST(d.device().calls() == expected, boost::test_tools::per_element());

  // Refused before any hook runs: a pitch below the width (naming the side), a last row past
  // the allocation, a span that wraps, an unknown stream. Width or height 0: nothing at all.
  BOOST_TEST(table().copy_d2d_2d_async(d.inst, b, width - 1, a, pitch, width, rows, stream) ==
             GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(contains(d.last_error(), "destination pitch 4 is below width 5"), d.last_error());
  BOOST_TEST(table().copy_d2d_2d_async(d.inst, b, pitch, a, width - 1, width, rows, stream) ==
             GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(contains(d.last_error(), "source pitch 4 is below width 5"), d.last_error());
  BOOST_TEST(table().copy_h2d_2d_async(d.inst, a + 1, pitch, in.data(), pitch, pitch, rows,
                                       stream) == GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(contains(d.last_error(), "copy_h2d_2d_async"), d.last_error());
  BOOST_TEST(table().copy_d2h_2d_async(d.inst, out.data(), pitch, a, UINT64_MAX / 2, width, rows,
                                       stream) == GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(contains(d.last_error(), "wraps"), d.last_error());
  BOOST_TEST(table().copy_d2d_2d_async(d.inst, b, pitch, a, pitch, width, rows, stream + 100) ==
             GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(table().copy_h2d_2d_async(d.inst, a, 0, nullptr, 0, 0, rows, stream + 100) ==
             GPUPLUG_STATUS_SUCCESS);
  BOOST_TEST(table().copy_d2d_2d_async(d.inst, b, pitch, a, pitch, width, 0, stream) ==
             GPUPLUG_STATUS_SUCCESS);
  BOOST_TEST(d.device().calls().size() == expected.size(), "a refused or empty 2D copy ran a hook");
  BOOST_TEST(table().free(d.inst, a) == GPUPLUG_STATUS_SUCCESS);
  BOOST_TEST(table().free(d.inst, b) == GPUPLUG_STATUS_SUCCESS);
  BOOST_TEST(table().stream_destroy(d.inst, stream) == GPUPLUG_STATUS_SUCCESS);
}
#endif
