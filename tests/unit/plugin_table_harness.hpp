// SPDX-License-Identifier: Apache-2.0
// The unit tests' harness for one plugin's C table: dlopen the file, call its entry point, and
// drive instances slot by slot, with no core in between.
#pragma once

// A test that includes this header drives exactly one plugin file, which it names by defining
// gpuplug::test::plugin_under_test(). table(), probe(), needs_device() and Instance all use it.
// Checks are Boost.Test assertions: a slot that must succeed and does not ends the test case
// with the status and the plugin's last_error.

#include <dlfcn.h>
#include <gpuplug/abi.h>

#include <boost/test/unit_test.hpp>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "contains.hpp"
#include "gpuplug/support/files.hpp"

namespace gpuplug::test {

/// The plugin file this test program drives. Each test program defines it.
std::filesystem::path plugin_under_test();

/// The table of plugin_under_test(), loaded on first use and kept loaded until the process exits
/// (as the loader keeps a plugin while anything it made may be alive). Fails the test case when
/// the file cannot be loaded or its entry point returns null.
inline const gpuplug_plugin_v1& table() {
  static const gpuplug_plugin_v1* const loaded = [] {
    const std::filesystem::path file = plugin_under_test();
    void* library = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) BOOST_FAIL("dlopen " << file << ": " << ::dlerror());
    auto entry =
        reinterpret_cast<gpuplug_plugin_entry_fn>(::dlsym(library, GPUPLUG_PLUGIN_ENTRY_SYMBOL));
    BOOST_TEST_REQUIRE(entry != nullptr, file << " exports no " GPUPLUG_PLUGIN_ENTRY_SYMBOL);
    const gpuplug_plugin_v1* t = entry(GPUPLUG_ABI_VERSION);
    BOOST_TEST_REQUIRE(t != nullptr,
                       GPUPLUG_PLUGIN_ENTRY_SYMBOL " of " << file << " returned null");
    return t;
  }();
  return *loaded;
}

/// probe(), which must succeed (the reason says whether a device is usable).
inline gpuplug_probe_result_t probe() {
  gpuplug_probe_result_t r{};
  r.struct_size = sizeof r;
  BOOST_TEST_REQUIRE(table().probe(&r) == GPUPLUG_STATUS_SUCCESS);
  return r;
}

/// Whether a device is available, with the probe's message as the reason when it is not.
inline boost::test_tools::assertion_result device_ready(boost::unit_test::test_unit_id) {
  gpuplug_probe_result_t r{};
  r.struct_size = sizeof r;
  const bool probed = table().probe(&r) == GPUPLUG_STATUS_SUCCESS;
  boost::test_tools::assertion_result ready(probed && r.reason == GPUPLUG_PROBE_AVAILABLE);
  ready.message() << (probed ? r.message : "probe failed");
  return ready;
}

/// Precondition of the cases that need a device: without one Boost.Test reports the case as
/// skipped, with the probe's message as the reason. (A function, not a lambda: GCC 12 warns
/// about boost::function copying an empty closure.)
inline boost::unit_test::precondition needs_device() {
  return boost::unit_test::precondition(&device_ready);
}

using OptionList = std::vector<std::pair<std::string, std::string>>;

/// create() as it is, for the cases that expect it to fail: the status, with *inst and *error
/// (the caller's buffer, "unset" when the plugin wrote nothing) filled in.
inline gpuplug_status_t try_create(const OptionList& options, gpuplug_instance_t* inst,
                                   std::string* error,
                                   const gpuplug_host_services_t* services = nullptr,
                                   std::uint32_t ordinal = 0) {
  std::vector<gpuplug_option_t> raw;
  for (const auto& [key, value] : options) raw.push_back({key.c_str(), value.c_str()});
  char buf[1024] = "unset";
  const gpuplug_status_t s = table().create(
      ordinal, raw.data(), static_cast<std::uint32_t>(raw.size()), services, inst, buf, sizeof buf);
  if (error != nullptr) *error = buf;
  return s;
}

/// The host services of an instance: collects every line the plugin logs. Thread-safe.
struct LogCapture {
  std::mutex mutex;
  std::vector<std::pair<gpuplug_log_level_t, std::string>> lines;
  gpuplug_host_services_t services{sizeof(gpuplug_host_services_t), this, &LogCapture::log};

  static void log(void* user, gpuplug_log_level_t level, const char* message) {
    auto* self = static_cast<LogCapture*>(user);
    std::lock_guard lock(self->mutex);
    self->lines.emplace_back(level, message);
  }
  /// Every line as "<level>: <text>\n".
  std::string all() {
    std::lock_guard lock(mutex);
    std::string out;
    for (const auto& [level, text] : lines) out += std::to_string(level) + ": " + text + "\n";
    return out;
  }
  /// How many lines at `level` contain `part`.
  std::size_t count(gpuplug_log_level_t level, std::string_view part) {
    std::lock_guard lock(mutex);
    std::size_t n = 0;
    for (const auto& [l, text] : lines) n += (l == level && text.find(part) != std::string::npos);
    return n;
  }
};

/// One instance of the plugin for a test case, created with a LogCapture as its host services
/// and destroyed at the end of the case. Not copyable: the plugin holds &log.services.
struct Instance {
  const gpuplug_plugin_v1& t = table();
  LogCapture log;
  gpuplug_instance_t inst = nullptr;

  explicit Instance(std::uint32_t ordinal = 0) : Instance(OptionList{}, ordinal) {}
  explicit Instance(const OptionList& options, std::uint32_t ordinal = 0) {
    std::string error;
    const gpuplug_status_t s = try_create(options, &inst, &error, &log.services, ordinal);
    BOOST_TEST_REQUIRE(s == GPUPLUG_STATUS_SUCCESS,
                       "create(" << ordinal << ") failed with status " << s << ": " << error);
    BOOST_TEST_REQUIRE(inst != nullptr);
  }
  ~Instance() {
    if (inst != nullptr) t.destroy(inst);
  }
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  /// The calling thread's last error message.
  std::string last_error() const {
    char buf[2048] = {};
    t.last_error(inst, buf, sizeof buf);
    return buf;
  }
  /// Requires success; otherwise ends the case naming `what`, the status and the message.
  void ok(gpuplug_status_t s, const std::string& what) const {
    BOOST_TEST_REQUIRE(s == GPUPLUG_STATUS_SUCCESS,
                       what << ": status " << s << ": " << last_error());
  }
  /// Checks that `s` is `expected`; returns the message (last_error) either way.
  std::string expect(gpuplug_status_t s, gpuplug_status_t expected, const std::string& what) const {
    const std::string message = last_error();
    BOOST_TEST(s == expected,
               what << ": status " << s << ", expected " << expected << " (" << message << ")");
    return message;
  }

  std::uint64_t alloc(std::uint64_t bytes, const char* site = "test") const {
    std::uint64_t p = 0;
    ok(t.alloc(inst, bytes, site, &p), "alloc");
    BOOST_TEST_REQUIRE(p != 0u);
    return p;
  }
  std::uint64_t alloc_managed(std::uint64_t bytes, const char* site = "test") const {
    std::uint64_t p = 0;
    ok(t.alloc_managed(inst, bytes, site, &p), "alloc_managed");
    BOOST_TEST_REQUIRE(p != 0u);
    return p;
  }
  void free(std::uint64_t p) const { ok(t.free(inst, p), "free"); }
  std::uint64_t stream() const {
    std::uint64_t s = 0;
    ok(t.stream_create(inst, &s), "stream_create");
    return s;
  }
  gpuplug_ledger_stats_t stats() const {
    gpuplug_ledger_stats_t st{};
    st.struct_size = sizeof st;
    ok(t.ledger_stats(inst, &st), "ledger_stats");
    return st;
  }

  /// Copies `host` to `dst`.
  template <class T>
  void upload(std::uint64_t dst, const std::vector<T>& host) const {
    ok(t.copy_h2d(inst, dst, host.data(), host.size() * sizeof(T)), "copy_h2d");
  }
  /// Allocates device memory for `host` and copies it there.
  template <class T>
  std::uint64_t upload(const std::vector<T>& host) const {
    const std::uint64_t p = alloc(host.size() * sizeof(T));
    upload(p, host);
    return p;
  }
  template <class T>
  std::vector<T> download(std::uint64_t src, std::size_t n) const {
    std::vector<T> host(n);
    ok(t.copy_d2h(inst, host.data(), src, n * sizeof(T)), "copy_d2h");
    return host;
  }

  std::uint64_t function(const char* module, const char* func) const {
    std::uint64_t f = 0;
    ok(t.get_function(inst, module, func, &f), std::string(module) + "::" + func);
    BOOST_TEST_REQUIRE(f != 0u);
    return f;
  }
  /// A module global: its address and size.
  std::pair<std::uint64_t, std::uint64_t> global(const char* module,
                                                 const std::string& symbol) const {
    std::uint64_t address = 0, size = 0;
    ok(t.get_global(inst, module, symbol.c_str(), &address, &size), symbol);
    return {address, size};
  }
  /// A published 4-byte symbol, read back from the device.
  std::uint32_t published(const char* module, const std::string& symbol) const {
    const auto [address, size] = global(module, symbol);
    BOOST_TEST_REQUIRE(size == 4u, symbol << " has " << size << " bytes");
    std::uint32_t value = 0;
    ok(t.copy_d2h(inst, &value, address, sizeof value), symbol);
    return value;
  }
  void launch(std::uint64_t f, gpuplug_dim3_t grid, gpuplug_dim3_t block, void** params,
              const char* what, std::uint64_t stream = 0) const {
    ok(t.launch(inst, f, grid, block, 0, stream, params), what);
  }
};

// ---- small helpers --------------------------------------------------------------------------

inline gpuplug_dim3_t dim(std::uint32_t x, std::uint32_t y = 1, std::uint32_t z = 1) {
  return {x, y, z};
}

/// ceil(n / per_block): the grid of the kernel launch rules.
inline std::uint32_t blocks_of(std::uint64_t n, std::uint64_t per_block) {
  return static_cast<std::uint32_t>((n + per_block - 1) / per_block);
}

/// `n` uniform values in [lo, hi), reproducible from `seed`.
inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float lo = -2.0f,
                                        float hi = 2.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

/// The bytes of a file the test needs (a kernel image); ends the case, with the reason, when it
/// cannot be read.
inline std::vector<std::byte> read_file_or_fail(const std::filesystem::path& file) {
  std::string why;
  auto bytes = gpuplug::support::read_file(file, why);
  BOOST_TEST_REQUIRE(bytes.has_value(), "cannot read " << file << ": " << why);
  return std::move(*bytes);
}

}  // namespace gpuplug::test
