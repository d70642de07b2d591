// SPDX-License-Identifier: Apache-2.0
// CountingBackend: a GpuBackend decorator for tests that counts (and can fail) calls it forwards.
#pragma once

#include <gpuplug/backend.hpp>

#include <atomic>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace gpuplug::test {

/// Forwards every member to a wrapped backend (which must outlive it) and counts the calls
/// of kernel, device_symbol, alloc, alloc_managed and free; kernel calls are also counted per
/// "module::func". It remembers which pointers it handed out and has not freed, and can be told
/// to make chosen frees fail (fail_free) or every copy_d2h fail (fail_copy_d2h). It has its own
/// OpCache (every GpuBackend does), released through itself on destruction, as the GpuBackend
/// contract asks.
/// Thread-safety: as the wrapped backend; the counters are atomics, the maps have a mutex.
class CountingBackend final : public GpuBackend {
 public:
  explicit CountingBackend(GpuBackend& inner) : inner_(inner) {}
  ~CountingBackend() override {
    try {
      op_cache().release(*this);
    } catch (...) {
      // A test that made frees fail cleans up itself; a destructor must not throw.
    }
  }

  GpuBackend& inner() noexcept { return inner_; }

  // ---- counters
  std::atomic<std::size_t> kernel_calls{0};
  std::atomic<std::size_t> device_symbol_calls{0};
  std::atomic<std::size_t> alloc_calls{0};
  std::atomic<std::size_t> alloc_managed_calls{0};
  std::atomic<std::size_t> free_calls{0};
  /// When set, copy_d2h throws Error(device_error) instead of copying.
  std::atomic<bool> fail_copy_d2h{false};

  /// How many times kernel(module, func) reached this backend.
  std::size_t kernel_calls_for(std::string_view module, std::string_view func) const {
    std::lock_guard lock(mutex_);
    const auto it = per_kernel_.find(std::string(module) + "::" + std::string(func));
    return it == per_kernel_.end() ? 0 : it->second;
  }
  std::map<std::string, std::size_t> kernel_calls_by_key() const {
    std::lock_guard lock(mutex_);
    return per_kernel_;
  }
  /// True when p came from alloc/alloc_managed here and has not been freed here since.
  bool handed_out(DevicePtr p) const {
    std::lock_guard lock(mutex_);
    return live_.count(p.value) != 0;
  }
  std::size_t handed_out_count() const {
    std::lock_guard lock(mutex_);
    return live_.size();
  }
  /// The next free(p) throws Error(device_error) without freeing p (once per call of this).
  void fail_free(DevicePtr p) {
    std::lock_guard lock(mutex_);
    fail_frees_.insert(p.value);
  }

  // ---- identity
  std::string_view name() const noexcept override { return inner_.name(); }
  std::string_view plugin_name() const noexcept override { return inner_.plugin_name(); }
  std::uint32_t ordinal() const noexcept override { return inner_.ordinal(); }

  // ---- memory
  DevicePtr alloc(std::size_t bytes, const char* site = GPUPLUG_CALLER_FUNCTION) override {
    ++alloc_calls;
    const DevicePtr p = inner_.alloc(bytes, site);
    remember(p);
    return p;
  }
  DevicePtr alloc_managed(std::size_t bytes, const char* site = GPUPLUG_CALLER_FUNCTION) override {
    ++alloc_managed_calls;
    const DevicePtr p = inner_.alloc_managed(bytes, site);
    remember(p);
    return p;
  }
  void free(DevicePtr p) override {
    ++free_calls;
    {
      std::lock_guard lock(mutex_);
      if (fail_frees_.erase(p.value) != 0) {
        throw Error(Status::device_error, std::string(name()),
                    "injected failure freeing " + std::to_string(p.value));
      }
    }
    inner_.free(p);
    std::lock_guard lock(mutex_);
    live_.erase(p.value);
  }
  void copy_h2d(DevicePtr dst, const void* src, std::size_t bytes) override {
    inner_.copy_h2d(dst, src, bytes);
  }
  void copy_d2h(void* dst, DevicePtr src, std::size_t bytes) override {
    if (fail_copy_d2h) {
      throw Error(Status::device_error, std::string(name()), "injected copy_d2h failure");
    }
    inner_.copy_d2h(dst, src, bytes);
  }
  void copy_d2d(DevicePtr dst, DevicePtr src, std::size_t bytes) override {
    inner_.copy_d2d(dst, src, bytes);
  }
  void copy_h2d_async(DevicePtr dst, const void* src, std::size_t bytes, Stream stream) override {
    inner_.copy_h2d_async(dst, src, bytes, stream);
  }
  void copy_d2h_async(void* dst, DevicePtr src, std::size_t bytes, Stream stream) override {
    inner_.copy_d2h_async(dst, src, bytes, stream);
  }
  void copy_d2d_async(DevicePtr dst, DevicePtr src, std::size_t bytes, Stream stream) override {
    inner_.copy_d2d_async(dst, src, bytes, stream);
  }
  void memset(DevicePtr dst, std::uint8_t value, std::size_t bytes, Stream stream = {}) override {
    inner_.memset(dst, value, bytes, stream);
  }

  // ---- streams
  Stream create_stream() override { return inner_.create_stream(); }
  void destroy_stream(Stream stream) override { inner_.destroy_stream(stream); }
  void synchronize(Stream stream) override { inner_.synchronize(stream); }
  void synchronize() override { inner_.synchronize(); }
  Event create_event() override { return inner_.create_event(); }
  void destroy_event(Event e) override { inner_.destroy_event(e); }
  void record(Event e, Stream stream) override { inner_.record(e, stream); }
  void wait(Stream stream, Event e) override { inner_.wait(stream, e); }
  void synchronize(Event e) override { inner_.synchronize(e); }
  bool query(Event e) override { return inner_.query(e); }
  float elapsed_ms(Event start, Event end) override { return inner_.elapsed_ms(start, end); }

  // ---- modules
  void load_module(std::string_view name, std::span<const std::byte> image) override {
    inner_.load_module(name, image);
  }
  void unload_module(std::string_view name) override { inner_.unload_module(name); }

 protected:
  // A module file goes to the inner backend as a path, so it keeps what the path gives it.
  void load_module_path(std::string_view name, const std::filesystem::path& file) override {
    inner_.load_module_file(name, file);
  }

 public:
  bool has_module(std::string_view name) override { return inner_.has_module(name); }
  KernelHandle kernel(std::string_view module, std::string_view func) override {
    ++kernel_calls;
    {
      std::lock_guard lock(mutex_);
      ++per_kernel_[std::string(module) + "::" + std::string(func)];
    }
    return inner_.kernel(module, func);
  }
  std::optional<DeviceSymbol> device_symbol(std::string_view module,
                                            std::string_view symbol) override {
    ++device_symbol_calls;
    return inner_.device_symbol(module, symbol);
  }

  // ---- work
  void launch(KernelHandle f, Dim3 grid, Dim3 block, std::uint32_t shared_bytes, Stream stream,
              void** params) override {
    inner_.launch(f, grid, block, shared_bytes, stream, params);
  }

  // ---- queries and the ledger
  MemoryInfo memory_info() override { return inner_.memory_info(); }
  DeviceInfo device_info() override { return inner_.device_info(); }
  LedgerStats ledger_stats() override { return inner_.ledger_stats(); }
  std::string alloc_report(std::size_t top_n) override { return inner_.alloc_report(top_n); }
  LedgerStats sweep_unreleased() override { return inner_.sweep_unreleased(); }

 private:
  void remember(DevicePtr p) {
    std::lock_guard lock(mutex_);
    live_.insert(p.value);
  }

  GpuBackend& inner_;
  mutable std::mutex mutex_;
  std::map<std::string, std::size_t> per_kernel_;
  std::set<std::uint64_t> live_;
  std::set<std::uint64_t> fail_frees_;
};

}  // namespace gpuplug::test
