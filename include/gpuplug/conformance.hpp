// SPDX-License-Identifier: Apache-2.0
// Conformance cases of your own: the checks, the Context and the differential helpers that
// gpuplug's built-in suite uses, for cases that an application or a kernel library writes in a
// shared library of its own and runs with `gpuplug check --cases libmycases.so` on every backend
// (docs/test-matrix.md, "Your own cases"; examples/conformance_cases). Link gpuplug::conformance.
//
// A case is a function `void(Context&)`: it drives ctx.backend() (a fresh backend of the device
// under test) through the public API, compares with ctx.reference() (the host backend) or a CPU
// computation, and throws through the GPUPLUG_CHECK* macros, fail() or skip(). The runner
// catches everything, fails a case that leaves allocations behind, and applies the known-failure
// file (`--known-failures`). One library lists its cases with GPUPLUG_CONFORMANCE_CASES.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <gpuplug/gpuplug.hpp>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gpuplug::conformance {

// ---- failures and skips ---------------------------------------------------------------------

/// A broken contract, with the file and line of the check that saw it.
class CheckFailure : public std::runtime_error {
 public:
  CheckFailure(const std::string& message, std::source_location where);
  const char* file() const noexcept { return file_; }
  std::uint32_t line() const noexcept { return line_; }
  /// The message without the location.
  const std::string& message() const noexcept { return message_; }

 private:
  std::string message_;
  const char* file_;
  std::uint32_t line_;
};

/// The case does not apply to this backend; the reason is reported.
class Skip : public std::runtime_error {
 public:
  explicit Skip(const std::string& reason) : std::runtime_error(reason) {}
};

[[noreturn]] void fail(const std::string& message,
                       std::source_location where = std::source_location::current());
[[noreturn]] void skip(const std::string& reason);

namespace detail {
std::string describe(const gpuplug::Error& e);
template <class T>
std::string show(const T& value) {
  std::ostringstream os;
  if constexpr (std::is_same_v<T, std::uint8_t>) {
    os << static_cast<unsigned>(value);
  } else if constexpr (requires { os << value; }) {
    os << value;
  } else if constexpr (requires { value.value; }) {
    os << "0x" << std::hex << value.value;
  } else {
    os << "<value>";
  }
  return os.str();
}
}  // namespace detail

/// Throws CheckFailure naming the expression when `cond` is false.
#define GPUPLUG_CHECK(cond)                                            \
  do {                                                                 \
    if (!(cond)) ::gpuplug::conformance::fail("check failed: " #cond); \
  } while (false)

/// As GPUPLUG_CHECK, with a message built by `<<` from the arguments.
#define GPUPLUG_CHECK_MSG(cond, ...)                         \
  do {                                                       \
    if (!(cond)) {                                           \
      std::ostringstream gpuplug_check_os_;                  \
      gpuplug_check_os_ << __VA_ARGS__;                      \
      ::gpuplug::conformance::fail(gpuplug_check_os_.str()); \
    }                                                        \
  } while (false)

/// a == b, printing both values on failure. Both are copied first: a reference into a
/// temporary (`f()[0]`) would dangle.
#define GPUPLUG_CHECK_EQ(a, b)                                                                 \
  do {                                                                                         \
    const auto gpuplug_a_ = (a);                                                               \
    const auto gpuplug_b_ = (b);                                                               \
    if (!(gpuplug_a_ == gpuplug_b_)) {                                                         \
      ::gpuplug::conformance::fail("check failed: " #a " == " #b " (" +                        \
                                   ::gpuplug::conformance::detail::show(gpuplug_a_) + " vs " + \
                                   ::gpuplug::conformance::detail::show(gpuplug_b_) + ")");    \
    }                                                                                          \
  } while (false)

/// Runs `expr`, which must throw gpuplug::Error with `status`; evaluates to the Error so that
/// the message can be checked. Any other outcome is a CheckFailure saying what happened.
#define GPUPLUG_CHECK_THROWS(expr, expected_status)                                             \
  ::gpuplug::conformance::detail::expect_error([&] { (void)(expr); }, (expected_status), #expr, \
                                               std::source_location::current())

/// As GPUPLUG_CHECK_THROWS, accepting any Status.
#define GPUPLUG_CHECK_THROWS_ANY(expr)                                                     \
  ::gpuplug::conformance::detail::expect_error([&] { (void)(expr); }, std::nullopt, #expr, \
                                               std::source_location::current())

namespace detail {
gpuplug::Error expect_error(const std::function<void()>& run, std::optional<Status> expected,
                            const char* expr, std::source_location where);
}  // namespace detail

/// True when the message contains `needle` (used to check that errors name the thing).
bool contains(std::string_view haystack, std::string_view needle) noexcept;

// ---- the context of a case -------------------------------------------------------------------

struct Target;  // what is under test: the runner's business

/// Everything a case may touch. One Context per case run: the backend under test is fresh for
/// every case (created on first use), so cases never see each other's modules, scratch or latches.
/// Not thread-safe itself: call its members from the case's own thread (hand the GpuBackend&
/// to worker threads, which is thread-safe).
class Context {
 public:
  explicit Context(const Target& target);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Target& target() const noexcept { return target_; }
  /// The backend under test, created on first use with no options.
  GpuBackend& backend();
  /// A new backend of the same plugin and device with `options` (create/destroy cycles,
  /// per-backend latches, device_memory_limit). Owned by the caller.
  std::shared_ptr<GpuBackend> make_backend(const Options& options = {});
  /// The host backend used as the reference in differential cases; Skip when none is available.
  /// When the backend under test is that same host device, the case's row carries the note
  /// "reference is the backend itself (host:0)": such a comparison checks nothing independent.
  GpuBackend& reference();
  /// The bytes of the plugin's kernel image for `module` (any extension); Skip when absent.
  std::vector<std::byte> module_image(std::string_view module) const;
  /// Loads kernel module `module` into `gpu` (the backend under test, the reference, or one from
  /// make_backend), unless gpu.has_module(module) already (so do not name your modules like the
  /// sample ones: axpy, gemm, e4m3, activation), from the image for gpu's plugin:
  /// `<modules folder>/<plugin>/<module>.*` when the run has a modules folder (`gpuplug check
  /// --modules DIR`), else the plugin's own kernel folder. Skip when neither holds one, naming
  /// where it looked; a load error propagates (the case fails with it).
  void load_module(GpuBackend& gpu, std::string_view module);
  /// The ABI version the plugin under test answered this core with (its table's abi_version;
  /// GPUPLUG_MAKE_VERSION(major, minor)).
  std::uint32_t plugin_abi_version() const;
  /// Skips, naming `convention` and both versions, when the plugin declares an ABI older than
  /// 1.<minor>: a convention introduced with 1.<minor> (the `<func>_args` sizes of 1.1, say) does
  /// not bind a plugin built before it.
  void require_abi_minor(std::uint32_t minor, std::string_view convention) const;
  /// Adds a remark shown with the result (e.g. "RSS not checked under ThreadSanitizer").
  void note(std::string text);
  const std::vector<std::string>& notes() const noexcept { return notes_; }

  /// Called by run_case after the case body: releases the op cache of the backend under test,
  /// waits for its streams, and fails when the case left allocations on its ledger.
  void finish();

 private:
  const Target& target_;
  std::shared_ptr<GpuBackend> backend_;
  std::shared_ptr<GpuBackend> reference_;
  std::vector<std::string> notes_;
};

// ---- cases -----------------------------------------------------------------------------------

struct Case {
  std::string_view name;     // unique, snake_case; the Boost test case and `check` row name
  std::string_view summary;  // one line: the contract it checks
  void (*run)(Context&);
};

// ---- device memory and differential checks ---------------------------------------------------

/// Device (or managed) memory of one backend, freed when it goes out of scope. The destructor
/// swallows errors: a case that wants to see a free fail calls gpu.free itself.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(GpuBackend& gpu, std::size_t bytes, const char* site = "conformance");
  static DeviceBuffer managed(GpuBackend& gpu, std::size_t bytes, const char* site = "conformance");
  /// Takes ownership of memory allocated elsewhere (e.g. alloc_with_fallback).
  static DeviceBuffer adopt(GpuBackend& gpu, DevicePtr ptr, std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  DevicePtr ptr() const noexcept { return ptr_; }
  std::size_t bytes() const noexcept { return bytes_; }
  /// Frees now (errors propagate) and forgets the pointer.
  void free();
  /// Gives up ownership without freeing.
  DevicePtr release() noexcept;

  template <class T>
  void upload(std::span<const T> data) {
    gpu_->copy_h2d(ptr_, data.data(), data.size_bytes());
  }
  template <class T>
  std::vector<T> download(std::size_t count) const {
    std::vector<T> out(count);
    gpu_->copy_d2h(out.data(), ptr_, count * sizeof(T));
    return out;
  }

 private:
  GpuBackend* gpu_ = nullptr;
  DevicePtr ptr_{};
  std::size_t bytes_ = 0;
};

template <class T>
DeviceBuffer to_device(GpuBackend& gpu, const std::vector<T>& data) {
  DeviceBuffer b(gpu, data.size() * sizeof(T));
  b.upload(std::span<const T>(data));
  return b;
}

/// Describes the inputs that produced element i of a result ("x = 1.5, y = 2"), so that a failure
/// message says what went in as well as what came out: the kit installs no test sources, so a
/// message must stand on its own.
using InputText = std::function<std::string(std::size_t)>;

/// Checks every element of `got` within `max_ulps` of `want`; the message names the first
/// mismatch, its index, both values and, when `input` is given, the inputs.
void check_within_ulps(const std::vector<float>& got, const std::vector<float>& want,
                       std::uint64_t max_ulps, std::string_view what, const InputText& input = {},
                       std::source_location where = std::source_location::current());
/// Bitwise equality, naming the first mismatch (value and bits) and its inputs.
void check_bits_equal(const std::vector<float>& got, const std::vector<float>& want,
                      std::string_view what, const InputText& input = {},
                      std::source_location where = std::source_location::current());
void check_bytes_equal(const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want,
                       std::string_view what, const InputText& input = {},
                       std::source_location where = std::source_location::current());
/// "1.0625 (0x3f880000)": a float with its bits, as failure messages print inputs and results.
std::string float_text(float f);

/// How close a result must be to its reference: an element passes when it is within `abs` of
/// it, or within `rel` times its magnitude, or within `ulps` units in the last place (any one
/// suffices; all zero means exact). NaN matches NaN only.
struct Tolerance {
  double abs = 0;
  double rel = 0;
  std::uint64_t ulps = 0;
};

/// Checks `got` against `want` element by element within `tol`. On failure the message names the
/// worst element (the one furthest outside its tolerance): its index, both values with their
/// bits, the error, the tolerance and, when `input` is given, its inputs; and how many elements
/// failed in all.
void check_close(std::span<const float> got, std::span<const float> want, Tolerance tol,
                 std::string_view what, const InputText& input = {},
                 std::source_location where = std::source_location::current());

}  // namespace gpuplug::conformance

// ---- listing a library's cases ---------------------------------------------------------------

/// The version of the case-list entry point below; `gpuplug check --cases` refuses a library of
/// another version, naming both. Bumped when Case, Context or the entry point change.
#define GPUPLUG_CONFORMANCE_CASES_VERSION 1u
#define GPUPLUG_CONFORMANCE_CASES_SYMBOL "gpuplug_conformance_cases"

/// The entry point a case library exports: its cases, or null with *count 0 when it does not
/// speak `version`.
using gpuplug_conformance_cases_fn = const gpuplug::conformance::Case* (*)(std::uint32_t version,
                                                                            std::size_t* count);

/// Lists the cases of a case library, once, in one source file of it:
///
///   GPUPLUG_CONFORMANCE_CASES(
///       {"scale_matches_host", "scale(a, x) within 1 ulp of the host backend", scale_matches_host},
///       {"scale_empty", "scale with n = 0 writes nothing", scale_empty})
///
/// Names are snake_case and must not repeat a built-in case (`gpuplug check --list`). The list is
/// a constant: nothing runs when the library is loaded and nothing is destroyed at unload.
#define GPUPLUG_CONFORMANCE_CASES(...)                                                      \
  extern "C" __attribute__((visibility("default"))) const ::gpuplug::conformance::Case*    \
  gpuplug_conformance_cases(std::uint32_t version, std::size_t* count) {                    \
    static constexpr ::gpuplug::conformance::Case gpuplug_cases_[] = {__VA_ARGS__};         \
    if (version != GPUPLUG_CONFORMANCE_CASES_VERSION) {                                     \
      *count = 0;                                                                           \
      return nullptr;                                                                       \
    }                                                                                       \
    *count = sizeof gpuplug_cases_ / sizeof gpuplug_cases_[0];                              \
    return gpuplug_cases_;                                                                  \
  }
