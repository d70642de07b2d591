// SPDX-License-Identifier: Apache-2.0
// The plugin-backed GpuBackend through the C++ API, on the real host plugin: memory, copies,
// memset, streams, launches (axpy and gemm against a CPU reference), modules and errors.
#define BOOST_TEST_MODULE backend
#include <dlfcn.h>
#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <gpuplug/gpuplug.hpp>
#include <gpuplug/support/files.hpp>
#include <initializer_list>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "contains.hpp"
#include "error_of.hpp"
#include "test_print.hpp"

namespace fs = std::filesystem;
using gpuplug::DevicePtr;
using gpuplug::Error;
using gpuplug::Status;
using gpuplug::test::contains;
using gpuplug::test::error_of;

namespace gpuplug {
inline std::ostream& boost_test_print_type(std::ostream& os, const LogLevel& l) {
  return os << static_cast<int>(l);
}
}  // namespace gpuplug

namespace {

/// The host kernel module file named `module` (whatever extension the host plugin uses).
fs::path host_module_file(const std::string& module) {
  const fs::path dir = fs::path(GPUPLUG_TEST_KERNEL_DIR) / "host";
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().stem() == module) return entry.path();
  }
  BOOST_FAIL("no host kernel module '" << module << "' in " << dir);
  return {};
}

struct Host {
  Host() {
    ::unsetenv("GPUPLUG_BACKEND");
    registry.discover();
    gpu = registry.create("host");
  }
  gpuplug::PluginRegistry registry;
  std::shared_ptr<gpuplug::GpuBackend> gpu;
};

std::vector<float> ramp(std::size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(static_cast<int>(i % 13) - 6) * scale + offset;
  return v;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(host_backend, Host)

BOOST_AUTO_TEST_CASE(identity) {
  BOOST_TEST(gpu->name() == "host:0");
  BOOST_TEST(gpu->plugin_name() == "host");
  BOOST_TEST(gpu->ordinal() == 0u);
  const auto info = gpu->device_info();
  BOOST_TEST(!info.name.empty());
  BOOST_TEST(info.total_memory > 0u);
  const auto mem = gpu->memory_info();
  BOOST_TEST(mem.total_bytes > 0u);
  BOOST_TEST(mem.free_bytes <= mem.total_bytes);
}

BOOST_AUTO_TEST_CASE(alloc_free_and_the_ledger) {
  BOOST_TEST(gpu->live_alloc_count() == 0u);
  const DevicePtr a = gpu->alloc(1000, "test_backend a");
  const DevicePtr b = gpu->alloc(24, "test_backend b");
  BOOST_TEST(static_cast<bool>(a));
  BOOST_TEST(a != b);
  BOOST_TEST(gpu->live_alloc_count() == 2u);
  BOOST_TEST(gpu->live_bytes() == 1024u);
  BOOST_TEST(contains(gpu->alloc_report(10), "test_backend a"), gpu->alloc_report(10));
  const auto stats = gpu->ledger_stats();
  BOOST_TEST(stats.peak_bytes >= 1024u);
  gpu->free(a);
  gpu->free(DevicePtr{});  // null: no-op
  BOOST_TEST(gpu->live_alloc_count() == 1u);
  // Double free: an error naming the backend, never a crash.
  const Error e = error_of([&] { gpu->free(a); });
  BOOST_TEST(e.status() == Status::invalid_argument);
  BOOST_TEST(e.backend() == "host:0");
  BOOST_TEST(std::string(e.what()).starts_with("host:0: free: "), e.what());
  gpu->free(b);
  BOOST_TEST(gpu->live_bytes() == 0u);
}

BOOST_AUTO_TEST_CASE(managed_memory) {
  if (!gpu->device_info().managed_memory) {
    BOOST_TEST(error_of([&] { gpu->alloc_managed(64); }).status() == Status::unsupported);
    return;
  }
  const DevicePtr m = gpu->alloc_managed(64, "managed");
  BOOST_TEST(gpu->ledger_stats().live_managed_bytes == 64u);
  gpu->free(m);
}

BOOST_AUTO_TEST_CASE(copies_and_memset) {
  constexpr std::size_t n = 4096;
  std::vector<std::uint8_t> in(n);
  std::iota(in.begin(), in.end(), std::uint8_t{0});
  const DevicePtr a = gpu->alloc(n);
  const DevicePtr b = gpu->alloc(n);
  gpu->copy_h2d(a, in.data(), n);
  gpu->copy_d2d(b, a, n);
  std::vector<std::uint8_t> out(n);
  gpu->copy_d2h(out.data(), b, n);
  BOOST_TEST(out == in);

  gpu->memset(b + 100, 0xAB, 200);
  gpu->synchronize();
  gpu->copy_d2h(out.data(), b, n);
  for (std::size_t i = 0; i < n; ++i) {
    BOOST_REQUIRE_EQUAL(out[i], (i >= 100 && i < 300) ? 0xAB : in[i]);
  }
  // Out of range: an error, not a write past the allocation.
  BOOST_TEST(error_of([&] { gpu->copy_h2d(a + (n - 10), in.data(), 20); }).backend() == "host:0");
  gpu->free(a);
  gpu->free(b);
}

BOOST_AUTO_TEST_CASE(streams_keep_order) {
  constexpr std::size_t n = 1 << 16;
  const auto s = gpu->create_stream();
  BOOST_TEST(s.value != 0u);
  std::vector<float> in = ramp(n, 1.0f, 0.5f);
  std::vector<float> out(n, 0.0f);
  const DevicePtr a = gpu->alloc(n * sizeof(float));
  const DevicePtr b = gpu->alloc(n * sizeof(float));
  // On one stream: h2d, memset of b, d2d a->b, d2h: the result must be a's contents.
  gpu->copy_h2d_async(a, in.data(), n * sizeof(float), s);
  gpu->memset(b, 0, n * sizeof(float), s);
  gpu->copy_d2d_async(b, a, n * sizeof(float), s);
  gpu->copy_d2h_async(out.data(), b, n * sizeof(float), s);
  gpu->synchronize(s);
  BOOST_TEST(out == in);
  gpu->destroy_stream(s);
  BOOST_TEST(error_of([&] { gpu->destroy_stream(gpuplug::Stream{}); }).status() ==
             Status::invalid_argument);
  gpu->free(a);
  gpu->free(b);
}

BOOST_AUTO_TEST_CASE(axpy_matches_the_reference) {
  constexpr std::uint32_t n = 100000;  // not a multiple of the block
  const auto x = ramp(n, 0.75f, 0.0f);
  const auto y = ramp(n, -1.5f, 2.0f);
  const DevicePtr dx = gpu->alloc(n * sizeof(float));
  const DevicePtr dy = gpu->alloc(n * sizeof(float));
  gpu->copy_h2d(dx, x.data(), n * sizeof(float));
  gpu->copy_h2d(dy, y.data(), n * sizeof(float));
  const auto k = gpu->op_cache().kernel(*gpu, "axpy", "axpy");
  BOOST_TEST(gpu->op_cache().kernel(*gpu, "axpy", "axpy") == k);  // memoized
  gpu->launch_args(k, {(n + 255) / 256, 1, 1}, {256, 1, 1}, 0, {}, n, 3.0f, dx.value, dy.value);
  gpu->synchronize();
  std::vector<float> out(n);
  gpu->copy_d2h(out.data(), dy, n * sizeof(float));
  for (std::uint32_t i = 0; i < n; ++i) {
    BOOST_REQUIRE_CLOSE_FRACTION(out[i], 3.0f * x[i] + y[i], 1e-6f);
  }
  gpu->free(dx);
  gpu->free(dy);
}

// A KernelHandle is only good on the backend that resolved it: another host backend refuses
// it (it would otherwise run code of a module, and name memory, that are the first one's).
BOOST_AUTO_TEST_CASE(a_kernel_handle_of_another_host_backend_is_refused) {
  const std::shared_ptr<gpuplug::GpuBackend> other = registry.create("host");
  const gpuplug::KernelHandle mine = gpu->kernel("axpy", "axpy");
  const gpuplug::KernelHandle theirs = other->kernel("axpy", "axpy");
  const std::uint32_t n = 0;  // nothing to compute: only dispatch matters
  const Error e = error_of([&] {
    other->launch_args(mine, {1, 1, 1}, {1, 1, 1}, 0, {}, n, 1.0f, std::uint64_t{0},
                       std::uint64_t{0});
  });
  BOOST_TEST(e.status() == Status::invalid_argument);
  BOOST_TEST(contains(e.what(), "belongs to another backend instance"), e.what());
  other->launch_args(theirs, {1, 1, 1}, {1, 1, 1}, 0, {}, n, 1.0f, std::uint64_t{0},
                     std::uint64_t{0});
  other->synchronize();
}

// The handle is checked before anything it names is read, so a handle of a backend that no
// longer exists, of an unloaded module, or one never handed out is refused, never a crash (the
// memory it once named is freed).
BOOST_AUTO_TEST_CASE(stale_and_made_up_kernel_handles_are_refused_without_a_crash) {
  const std::uint32_t n = 0;
  const auto launch = [&](gpuplug::GpuBackend& on, gpuplug::KernelHandle k) {
    return error_of([&] {
      on.launch_args(k, {1, 1, 1}, {1, 1, 1}, 0, {}, n, 1.0f, std::uint64_t{0}, std::uint64_t{0});
    });
  };
  gpuplug::KernelHandle stale{};
  {
    const std::shared_ptr<gpuplug::GpuBackend> gone = registry.create("host");
    stale = gone->kernel("axpy", "axpy");
  }
  const std::shared_ptr<gpuplug::GpuBackend> fresh = registry.create("host");
  const Error foreign = launch(*fresh, stale);
  BOOST_TEST(foreign.status() == Status::invalid_argument);
  BOOST_TEST(contains(foreign.what(), "another backend instance"), foreign.what());

  const gpuplug::KernelHandle k = fresh->kernel("axpy", "axpy");
  fresh->unload_module("axpy");
  const Error unloaded = launch(*fresh, k);
  BOOST_TEST(unloaded.status() == Status::invalid_argument);
  BOOST_TEST(contains(unloaded.what(), "module was unloaded"), unloaded.what());

  for (const std::uint64_t made_up : {std::uint64_t{1}, std::uint64_t{0xdeadbeef},
                                      k.value + 1000, ~std::uint64_t{0}}) {
    const Error e = launch(*fresh, gpuplug::KernelHandle{made_up});
    BOOST_TEST(e.status() == Status::invalid_argument, e.what());
  }
  // The module loads again and its kernel runs under a new handle.
  const gpuplug::KernelHandle again = fresh->kernel("axpy", "axpy");
  BOOST_TEST(again != k);
  fresh->launch_args(again, {1, 1, 1}, {1, 1, 1}, 0, {}, n, 1.0f, std::uint64_t{0},
                     std::uint64_t{0});
  fresh->synchronize();
}

BOOST_AUTO_TEST_CASE(gemm_matches_the_reference) {
  constexpr std::uint32_t M = 37, N = 70, K = 29;  // no dimension a multiple of a tile
  const auto A = ramp(M * K, 0.25f, 0.1f);
  const auto B = ramp(K * N, -0.5f, 0.3f);
  const DevicePtr dA = gpu->alloc(A.size() * sizeof(float));
  const DevicePtr dB = gpu->alloc(B.size() * sizeof(float));
  const DevicePtr dC = gpu->alloc(std::size_t{M} * N * sizeof(float));
  gpu->copy_h2d(dA, A.data(), A.size() * sizeof(float));
  gpu->copy_h2d(dB, B.data(), B.size() * sizeof(float));
  const auto k = gpu->op_cache().kernel(*gpu, "gemm", "gemm_f32");
  const auto n_tile = gpu->op_cache().n_tile(k);
  BOOST_REQUIRE(n_tile.has_value());  // published by the module as gemm_f32_n_tile
  BOOST_REQUIRE(*n_tile > 0u);
  const auto sym = gpu->device_symbol("gemm", "gemm_f32_n_tile");
  BOOST_REQUIRE(sym.has_value());
  BOOST_TEST(sym->bytes == 4u);
  gpu->launch_args(k, {(N + *n_tile - 1) / *n_tile, (M + 15) / 16, 1}, {16, 16, 1}, 0, {}, M, N, K,
                   dA.value, dB.value, dC.value);
  gpu->synchronize();
  std::vector<float> C(std::size_t{M} * N);
  gpu->copy_d2h(C.data(), dC, C.size() * sizeof(float));
  for (std::uint32_t r = 0; r < M; ++r) {
    for (std::uint32_t c = 0; c < N; ++c) {
      double ref = 0.0;
      for (std::uint32_t i = 0; i < K; ++i) ref += double(A[r * K + i]) * double(B[i * N + c]);
      BOOST_TEST_CONTEXT("C[" << r << "][" << c << "]") {
        BOOST_REQUIRE_SMALL(std::fabs(C[r * N + c] - ref), 1e-4 * (1.0 + std::fabs(ref)));
      }
    }
  }
  gpu->free(dA);
  gpu->free(dB);
  gpu->free(dC);
}

BOOST_AUTO_TEST_CASE(modules_by_file_and_by_name) {
  BOOST_TEST(gpu->has_module("axpy"));  // loadable from modules_dir
  BOOST_TEST(!gpu->has_module("nosuch_module"));
  gpu->load_module_file("axpy_copy", host_module_file("axpy"));
  BOOST_TEST(gpu->has_module("axpy_copy"));
  BOOST_TEST(gpu->kernel("axpy_copy", "axpy").value != 0u);
  // The name is taken now.
  BOOST_TEST(error_of([&] {
               gpu->load_module_file("axpy_copy", host_module_file("axpy"));
             }).status() == Status::invalid_argument);
  gpu->unload_module("axpy_copy");
  BOOST_TEST(!gpu->has_module("axpy_copy"));
}

BOOST_AUTO_TEST_CASE(load_module_file_names_the_file) {
  const fs::path missing = "/nonexistent/dir/axpy_missing.so";
  const Error e = error_of([&] { gpu->load_module_file("axpy_missing", missing); });
  BOOST_TEST(e.status() == Status::not_found);
  BOOST_TEST(e.backend() == "host:0");
  BOOST_TEST(contains(e.what(), missing.string()), e.what());
  BOOST_TEST(contains(e.what(), "axpy_missing"), e.what());
  BOOST_TEST(contains(e.what(), "no such file"), e.what());

  const Error dir = error_of([&] { gpu->load_module_file("a_dir", fs::temp_directory_path()); });
  BOOST_TEST(contains(dir.what(), "is a directory"), dir.what());

  // Bytes that are no module: invalid_image from the plugin, with its message.
  const fs::path junk =
      fs::temp_directory_path() / ("gpuplug-junk-" + std::to_string(::getpid()) + ".so");
  {
    std::FILE* f = std::fopen(junk.c_str(), "wb");
    BOOST_REQUIRE(f != nullptr);
    std::fputs("not an ELF file", f);
    std::fclose(f);
  }
  const Error bad = error_of([&] { gpu->load_module_file("junk", junk); });
  fs::remove(junk);
  BOOST_TEST(bad.status() == Status::invalid_image);
  BOOST_TEST(
      std::string(bad.what())
          .starts_with("host:0: load_module_file (module junk, file '" + junk.string() + "'): "),
      bad.what());

  // A path that cannot reach the plugin as a C string is refused before it.
  using namespace std::string_literals;
  const Error empty = error_of([&] { gpu->load_module_file("empty_path", fs::path()); });
  BOOST_TEST(empty.status() == Status::invalid_argument);
  BOOST_TEST(contains(empty.what(), "module empty_path: the file path is empty"), empty.what());
  const Error nul = error_of([&] {
    gpu->load_module_file("nul_path", fs::path(host_module_file("axpy").string() + "\0x"s));
  });
  BOOST_TEST(nul.status() == Status::invalid_argument);
  BOOST_TEST(contains(nul.what(), "module nul_path: the file path contains a NUL byte"),
             nul.what());
  BOOST_TEST(!gpu->has_module("nul_path"));

  // A FIFO is refused, not waited on (by the plugin here: the host fills load_module_file).
  const fs::path fifo =
      fs::temp_directory_path() / ("gpuplug-fifo-" + std::to_string(::getpid()) + ".so");
  BOOST_TEST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const Error not_regular = error_of([&] { gpu->load_module_file("fifo", fifo); });
  fs::remove(fifo);
  BOOST_TEST(not_regular.status() == Status::invalid_argument, not_regular.what());
  BOOST_TEST(contains(not_regular.what(), "is a FIFO, not a regular file"), not_regular.what());
  BOOST_TEST(contains(not_regular.what(), "module fifo"), not_regular.what());
}

// ---- load_module_file by path: $ORIGIN, missing dependencies, older plugins ---------
// The cases that need libgpuplug_test_sibling.so absent from the process come first: once it is
// loaded, glibc matches a later DT_NEEDED by its soname, wherever the module lies.

namespace {

const fs::path kOriginKernels = GPUPLUG_TEST_HOST_ORIGIN_DIR;  // test_origin.so + its sibling
constexpr const char* kSibling = "libgpuplug_test_sibling.so";

bool sibling_loaded() {
  void* h = ::dlopen(kSibling, RTLD_LAZY | RTLD_NOLOAD);
  if (h != nullptr) ::dlclose(h);
  return h != nullptr;
}

/// A fresh folder under the temporary directory, removed with everything in it.
struct TempDir {
  explicit TempDir(const std::string& tag) {
    std::string pattern = (fs::temp_directory_path() / ("gpuplug-" + tag + "-XXXXXX")).string();
    BOOST_TEST_REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path path;
};

/// Runs test_origin::sibling_value on `gpu` and returns what it wrote (20260 from the sibling).
std::uint32_t sibling_value(gpuplug::GpuBackend& gpu, const std::string& module) {
  const gpuplug::KernelHandle k = gpu.kernel(module, "sibling_value");
  const DevicePtr out = gpu.alloc(sizeof(std::uint32_t));
  gpu.launch_args(k, {1, 1, 1}, {1, 1, 1}, 0, {}, out.value);
  gpu.synchronize();
  std::uint32_t value = 0;
  gpu.copy_d2h(&value, out, sizeof value);
  gpu.free(out);
  return value;
}

}  // namespace

BOOST_AUTO_TEST_CASE(load_module_file_names_a_missing_dependency_and_the_file) {
  BOOST_TEST_REQUIRE(!sibling_loaded());
  TempDir alone("alone");
  const fs::path file = alone.path / "test_origin.so";
  fs::copy_file(kOriginKernels / "test_origin.so", file);
  const Error e = error_of([&] { gpu->load_module_file("test_origin", file); });
  BOOST_TEST(e.status() == Status::not_found, e.what());
  BOOST_TEST(contains(e.what(), std::string("module test_origin needs ") + kSibling +
                                    ", which was not found"),
             e.what());
  BOOST_TEST(contains(e.what(), "file '" + file.string() + "'"), e.what());
  BOOST_TEST(!gpu->has_module("test_origin"));  // a failed load leaves the name free
}

// A plugin built before load_module_file was appended (its struct_size ends at
// sweep_unreleased) still loads module files: the core reads them and passes the bytes, so
// such a module has no $ORIGIN. The copy of the real table keeps its load_module_file pointer
// past struct_size: were it read, test_origin would find its sibling here.
BOOST_AUTO_TEST_CASE(a_plugin_without_the_slot_loads_module_files_as_bytes) {
  BOOST_TEST_REQUIRE(!sibling_loaded());
  gpuplug::PluginRegistry old_registry;
  const gpuplug::PluginInfo info = old_registry.add_plugin_file(
      GPUPLUG_TEST_OLD_HOST_PLUGIN, {gpuplug::ProbeMode::in_process, std::nullopt});
  BOOST_TEST_REQUIRE(info.state == gpuplug::PluginState::available, info.message);
  auto old = old_registry.create("host_v1_0");
  BOOST_TEST(old->name() == "host_v1_0:0");

  // Its table ends before the ABI 1.1 event slots (the copy holds the real pointers past
  // struct_size): every event member is unsupported, naming the operation and why.
  for (const auto& [operation, call] :
       std::initializer_list<std::pair<const char*, std::function<void()>>>{
           {"create_event", [&] { (void)old->create_event(); }},
           {"record", [&] { old->record(gpuplug::Event{1}, {}); }},
           {"wait", [&] { old->wait({}, gpuplug::Event{1}); }},
           {"synchronize", [&] { old->synchronize(gpuplug::Event{1}); }},
           {"query", [&] { (void)old->query(gpuplug::Event{1}); }},
           {"elapsed_ms", [&] { (void)old->elapsed_ms(gpuplug::Event{1}, gpuplug::Event{2}); }},
           {"destroy_event", [&] { old->destroy_event(gpuplug::Event{1}); }},
       }) {
    const Error unsupported = error_of(call);
    BOOST_TEST(unsupported.status() == Status::unsupported, unsupported.what());
    BOOST_TEST(unsupported.operation() == operation, unsupported.what());
    BOOST_TEST(contains(unsupported.what(), "events are not supported by the host_v1_0 plugin"),
               unsupported.what());
    BOOST_TEST(contains(unsupported.what(), "-byte table ends before the event slots of ABI 1.1"),
               unsupported.what());
  }

  old->load_module_file("axpy_old", host_module_file("axpy"));
  const gpuplug::KernelHandle k = old->kernel("axpy_old", "axpy");
  constexpr std::uint32_t n = 5;
  std::vector<float> x(n, 2.0f), y(n, 1.0f);
  const DevicePtr dx = old->alloc(n * sizeof(float)), dy = old->alloc(n * sizeof(float));
  old->copy_h2d(dx, x.data(), n * sizeof(float));
  old->copy_h2d(dy, y.data(), n * sizeof(float));
  old->launch_args(k, {1, 1, 1}, {256, 1, 1}, 0, {}, n, 3.0f, dx.value, dy.value);
  old->synchronize();
  old->copy_d2h(y.data(), dy, n * sizeof(float));
  for (float v : y) BOOST_TEST(v == 7.0f);
  old->free(dx);
  old->free(dy);
  BOOST_TEST(error_of([&] {
               old->load_module_file("axpy_old", host_module_file("axpy"));
             }).status() == Status::invalid_argument);

  // The core reads regular files only: a FIFO is refused, not waited on.
  TempDir fifo_dir("fifo");
  const fs::path fifo = fifo_dir.path / "axpy.so";
  BOOST_TEST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const Error not_regular = error_of([&] { old->load_module_file("fifo", fifo); });
  BOOST_TEST(not_regular.status() == Status::invalid_argument, not_regular.what());
  BOOST_TEST(contains(not_regular.what(),
                      "load_module_file: module fifo: cannot read '" + fifo.string() + "'"),
             not_regular.what());
  BOOST_TEST(contains(not_regular.what(), "is a FIFO, not a regular file"), not_regular.what());

  const fs::path file = kOriginKernels / "test_origin.so";  // its sibling lies next to it
  const Error e = error_of([&] { old->load_module_file("test_origin", file); });
  BOOST_TEST(e.status() == Status::not_found, e.what());
  BOOST_TEST(contains(e.what(), std::string("module test_origin needs ") + kSibling), e.what());
  BOOST_TEST(contains(e.what(), "file '" + file.string() + "'"), e.what());
}

BOOST_AUTO_TEST_CASE(load_module_file_keeps_the_modules_origin) {
  BOOST_TEST_REQUIRE(!sibling_loaded());
  // A path with "." and ".." reaches the plugin absolute and normalized.
  const fs::path file = kOriginKernels / "." / ".." / kOriginKernels.filename() / "test_origin.so";
  gpu->load_module_file("test_origin", file);
  BOOST_TEST(sibling_value(*gpu, "test_origin") == 20260u);
  // The name is taken now.
  const Error taken = error_of([&] { gpu->load_module_file("test_origin", file); });
  BOOST_TEST(taken.status() == Status::invalid_argument);
  BOOST_TEST(contains(taken.what(), "module test_origin is already loaded"), taken.what());
  // Another instance of the process gets its own copy of the same file, still working.
  auto second = registry.create("host");
  second->load_module_file("origin_again", kOriginKernels / "test_origin.so");
  BOOST_TEST(sibling_value(*second, "origin_again") == 20260u);
  gpu->unload_module("test_origin");
  BOOST_TEST(!gpu->has_module("test_origin"));
}

// A C string would end at the NUL and name another module ("axpy"): refused before the plugin.
BOOST_AUTO_TEST_CASE(names_with_a_nul_byte_are_refused) {
  using namespace std::string_view_literals;
  const Error load = error_of([&] { gpu->load_module("ax\0py"sv, std::span<const std::byte>{}); });
  BOOST_TEST(load.status() == Status::invalid_argument);
  BOOST_TEST(contains(load.what(), "load_module: the module name contains a NUL byte"),
             load.what());
  BOOST_TEST(error_of([&] { gpu->kernel("axpy\0x"sv, "axpy"); }).status() ==
             Status::invalid_argument);
  BOOST_TEST(error_of([&] { gpu->kernel("axpy", "axpy\0"sv); }).status() ==
             Status::invalid_argument);
  BOOST_TEST(error_of([&] { gpu->has_module("axpy\0"sv); }).status() == Status::invalid_argument);
  BOOST_TEST(error_of([&] { gpu->unload_module("axpy\0"sv); }).status() ==
             Status::invalid_argument);
  BOOST_TEST(error_of([&] { gpu->device_symbol("gemm", "gemm_f32_n_tile\0"sv); }).status() ==
             Status::invalid_argument);
  BOOST_TEST(gpu->has_module("axpy"));  // the real module was never touched
}

// A module whose dynamic segment points outside its loaded segments made ld.so read wild memory
// (SIGSEGV inside dlopen); the host plugin validates the ELF structure first.
BOOST_AUTO_TEST_CASE(a_corrupt_module_is_refused_before_dlopen) {
  std::string why;
  auto bytes = gpuplug::support::read_file(host_module_file("axpy"), why);
  BOOST_REQUIRE_MESSAGE(bytes, why);
  std::vector<std::byte>& image = *bytes;
  Elf64_Ehdr eh;
  std::memcpy(&eh, image.data(), sizeof eh);
  bool moved = false;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    const std::size_t at = eh.e_phoff + i * sizeof(Elf64_Phdr);
    Elf64_Phdr ph;
    std::memcpy(&ph, image.data() + at, sizeof ph);
    if (ph.p_type != PT_DYNAMIC) continue;
    ph.p_vaddr = 0x7fff0000;  // far past every PT_LOAD
    std::memcpy(image.data() + at, &ph, sizeof ph);
    moved = true;
  }
  BOOST_REQUIRE(moved);
  const Error e = error_of([&] { gpu->load_module("corrupt_axpy", image); });
  BOOST_TEST(e.status() == Status::invalid_image);
  BOOST_TEST(contains(e.what(), "PT_DYNAMIC"), e.what());
  BOOST_TEST(!gpu->has_module("corrupt_axpy"));
}

BOOST_AUTO_TEST_CASE(unknown_modules_and_functions_are_named) {
  const Error m = error_of([&] { gpu->kernel("nosuch_module", "f"); });
  BOOST_TEST(m.status() == Status::not_found);
  BOOST_TEST(contains(m.what(), "nosuch_module"), m.what());
  const Error f = error_of([&] { gpu->kernel("axpy", "nosuch_function"); });
  BOOST_TEST(f.status() == Status::not_found);
  BOOST_TEST(contains(f.what(), "nosuch_function"), f.what());
  BOOST_TEST(std::string(f.what()).starts_with("host:0: "), f.what());
  BOOST_TEST(!gpu->device_symbol("axpy", "nosuch_symbol").has_value());
  BOOST_TEST(error_of([&] { gpu->device_symbol("nosuch_module", "x"); }).status() ==
             Status::not_found);
}

BOOST_AUTO_TEST_CASE(sweep_frees_what_is_left) {
  gpu->alloc(100, "leak 1");
  gpu->alloc(200, "leak 2");
  const auto swept = gpu->sweep_unreleased();
  BOOST_TEST(swept.live_count == 2u);
  BOOST_TEST(swept.live_bytes == 300u);
  BOOST_TEST(gpu->live_alloc_count() == 0u);
}

BOOST_AUTO_TEST_CASE(scratch_is_released_with_the_backend) {
  // The OpCache's scratch goes back through the ledger when the backend goes.
  const DevicePtr s = gpu->op_cache().scratch(*gpu, "tmp", 4096);
  BOOST_TEST(static_cast<bool>(s));
  BOOST_TEST(gpu->live_alloc_count() == 1u);
  gpu.reset();  // must not throw or crash
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(error_text) {
  const Error e(Status::not_found, "host:0", "kernel gemm::gemm_f16 not found");
  BOOST_TEST(std::string(e.what()) == "host:0: kernel gemm::gemm_f16 not found");
  BOOST_TEST(e.message() == "kernel gemm::gemm_f16 not found");
  BOOST_TEST(std::string(Error(Status::internal, "", "bare").what()) == "bare");
  BOOST_TEST(gpuplug::to_string(Status::out_of_memory) == "out_of_memory");
  BOOST_TEST(gpuplug::to_string(Status::capture_invalidated) == "capture_invalidated");
  BOOST_TEST(static_cast<int>(Status::capture_invalidated) == 10);  // CUDA 901 in the seed
  BOOST_TEST(gpuplug::to_string(static_cast<Status>(99)) == "unknown status 99");
}

BOOST_AUTO_TEST_CASE(log_levels) {
  const auto old = gpuplug::log_level();
  gpuplug::set_log_level(gpuplug::LogLevel::error);
  BOOST_TEST(gpuplug::log_level() == gpuplug::LogLevel::error);
  gpuplug::log(gpuplug::LogLevel::info, "test", "not shown");  // below the level: dropped
  gpuplug::set_log_level(old);
  BOOST_TEST(gpuplug::parse_log_level("warn").value() == gpuplug::LogLevel::warning);
  BOOST_TEST(!gpuplug::parse_log_level("loud").has_value());
}
