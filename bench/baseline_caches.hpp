// SPDX-License-Identifier: Apache-2.0
// The baselines OpCache hits are measured against: the seed's locked string maps, a lower bound.
//
// Each baseline offers the members the benchmarks call, with OpCache's signatures, so one
// benchmark template runs them all:
//   kernel(gpu, module, func), scratch(gpu, tag, bytes), first_shape(name, m, n, k), once(key),
//   first_n(key, n), n_tile(h), record_n_tile(h, n).
// Members are [[gnu::noinline]]: OpCache lives in libgpuplug.so and is reached through a call, so
// the baselines are too; otherwise the compiler could hoist the hashing of the benchmark's
// constant keys out of the timed loop, which no real caller gets.
#pragma once

#include <gpuplug/backend.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "opcache/hash.hpp"  // core/hash.hpp: the hash OpCache uses

namespace gpuplug::bench {

// ---------------------------------------------------------------------------------------------
// (a) and (b): the seed's design, ported literally. One lock and one std::unordered_map per kind
// of key, keys are std::string, and every call builds its key as a std::string before looking it
// up (kernels: module + "::" + func). (a) takes a std::shared_mutex (shared for lookups, exclusive
// to insert), (b) a plain std::mutex for both. Nothing else differs.
//
// Choices that favour the baselines, so the ratios are conservative:
//  - first_shape's key is the name followed by the three integers' raw bytes (one append of 24
//    bytes) rather than text formatting;
//  - once(key) has a set of its own keyed by the plain key (no shape suffix), so a short key
//    stays in the small-string buffer;
//  - first_n looks at its count under the read lock first and only takes the exclusive lock
//    while the count is below n, so its hit is a lookup like the others.
template <class Mutex, template <class> class ReadLock>
class LockedStringCache {
 public:
  [[gnu::noinline]] KernelHandle kernel(GpuBackend& gpu, std::string_view module,
                                        std::string_view func) {
    std::string key = std::string(module) + "::" + std::string(func);
    {
      ReadLock<Mutex> lock(kernels_mutex_);
      if (auto it = kernels_.find(key); it != kernels_.end()) return it->second;
    }
    const KernelHandle h = gpu.kernel(module, func);
    std::unique_lock lock(kernels_mutex_);
    kernels_.emplace(std::move(key), h);
    return h;
  }

  [[gnu::noinline]] DevicePtr scratch(GpuBackend& gpu, std::string_view tag, std::size_t bytes) {
    std::string key(tag);
    {
      ReadLock<Mutex> lock(scratch_mutex_);
      if (auto it = scratch_.find(key); it != scratch_.end() && it->second.bytes >= bytes)
        return it->second.ptr;
    }
    std::unique_lock lock(scratch_mutex_);
    Buffer& b = scratch_[std::move(key)];
    if (b.bytes >= bytes && b.ptr) return b.ptr;
    if (b.ptr) retired_.push_back(b.ptr);
    b = Buffer{gpu.alloc(bytes, "bench baseline scratch"), bytes};
    return b.ptr;
  }

  [[gnu::noinline]] bool first_shape(std::string_view name, std::uint64_t m, std::uint64_t n,
                                     std::uint64_t k) {
    std::string key(name);
    const std::uint64_t shape[3] = {m, n, k};
    key.append(reinterpret_cast<const char*>(shape), sizeof shape);
    {
      ReadLock<Mutex> lock(gates_mutex_);
      if (gates_.contains(key)) return false;
    }
    std::unique_lock lock(gates_mutex_);
    return gates_.insert(std::move(key)).second;
  }

  [[gnu::noinline]] bool once(std::string_view key_view) {
    std::string key(key_view);
    {
      ReadLock<Mutex> lock(once_mutex_);
      if (once_.contains(key)) return false;
    }
    std::unique_lock lock(once_mutex_);
    return once_.insert(std::move(key)).second;
  }

  [[gnu::noinline]] bool first_n(std::string_view key_view, std::uint64_t n) {
    std::string key(key_view);
    {
      ReadLock<Mutex> lock(counters_mutex_);
      if (auto it = counters_.find(key); it != counters_.end() && it->second >= n) return false;
    }
    std::unique_lock lock(counters_mutex_);
    std::uint64_t& c = counters_[std::move(key)];
    if (c >= n) return false;
    ++c;
    return true;
  }

  [[gnu::noinline]] std::optional<std::uint32_t> n_tile(KernelHandle h) const {
    ReadLock<Mutex> lock(records_mutex_);
    if (auto it = n_tiles_.find(h.value); it != n_tiles_.end()) return it->second;
    return std::nullopt;
  }

  void record_n_tile(KernelHandle h, std::uint32_t n) {
    std::unique_lock lock(records_mutex_);
    n_tiles_[h.value] = n;
  }

  /// Frees the scratch buffers (the benchmark's teardown).
  void release(GpuBackend& gpu) {
    for (auto& [tag, b] : scratch_) gpu.free(b.ptr);
    for (DevicePtr p : retired_) gpu.free(p);
    scratch_.clear();
    retired_.clear();
  }

 private:
  struct Buffer {
    DevicePtr ptr;
    std::size_t bytes = 0;
  };
  mutable Mutex kernels_mutex_, scratch_mutex_, gates_mutex_, once_mutex_, counters_mutex_,
      records_mutex_;
  std::unordered_map<std::string, KernelHandle> kernels_;
  std::unordered_map<std::string, Buffer> scratch_;
  std::vector<DevicePtr> retired_;
  std::unordered_set<std::string> gates_;
  std::unordered_set<std::string> once_;
  std::unordered_map<std::string, std::uint64_t> counters_;
  std::unordered_map<std::uint64_t, std::uint32_t> n_tiles_;
};

/// (a) The seed's design: std::shared_mutex, shared for lookups.
using SeedSharedMutexCache = LockedStringCache<std::shared_mutex, std::shared_lock>;
/// (b) The same maps and keys behind a plain std::mutex.
using PlainMutexCache = LockedStringCache<std::mutex, std::unique_lock>;

// ---------------------------------------------------------------------------------------------
// (c) The lower bound: the same lookups as OpCache (same hash, same key comparison, open
// addressing with linear probing, load factor <= 1/2, keys stored and compared the same way) in
// an unsynchronized table whose entries sit inline in the slot array: no atomics, no entry
// pointer to follow, no Impl pointer, no sequence lock, no PLT. It is safe to read from several
// threads only because the benchmarks insert before they time.
// A key stored as OpCache stores it: up to 32 bytes inline, compared at a fixed offset chosen
// by the caller's key length; longer keys on the heap.
class FlatKey {
 public:
  static constexpr std::size_t kInline = 32;
  FlatKey() = default;
  FlatKey(std::string_view a, std::string_view b = {}) : size_(a.size() + b.size()) {
    if (size_ > kInline) heap_ = std::make_unique<char[]>(size_);
    char* d = size_ <= kInline ? inline_ : heap_.get();
    if (!a.empty()) std::memcpy(d, a.data(), a.size());
    if (!b.empty()) std::memcpy(d + a.size(), b.data(), b.size());
  }
  std::size_t size() const noexcept { return size_; }
  bool part_equal(std::size_t total, std::size_t offset, std::string_view part) const noexcept {
    const char* d = total <= kInline ? inline_ : heap_.get();
    return detail::bytes_equal(d + offset, part.data(), part.size());
  }
  bool equals(std::string_view key) const noexcept {
    return size_ == key.size() && part_equal(key.size(), 0, key);
  }

 private:
  std::size_t size_ = 0;
  char inline_[kInline] = {};
  std::unique_ptr<char[]> heap_;
};

template <class Value>
class FlatTable {
 public:
  struct Slot {
    std::uint64_t hash = 0;
    bool used = false;
    FlatKey key;
    Value value{};
  };

  FlatTable() : slots_(16) {}

  template <class Match>
  const Slot* find(std::uint64_t hash, const Match& match) const noexcept {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = static_cast<std::size_t>(hash) & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.hash == hash && match(s)) return &s;
    }
  }

  Slot& insert(std::uint64_t hash, FlatKey key, Value value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    Slot& s = place(hash);
    s = Slot{hash, true, std::move(key), std::move(value)};
    ++size_;
    return s;
  }

  Slot* find_mutable(std::uint64_t hash, std::string_view key) {
    return const_cast<Slot*>(find(hash, [&](const Slot& s) { return s.key.equals(key); }));
  }

  template <class F>
  void for_each(F&& f) {
    for (Slot& s : slots_)
      if (s.used) f(s);
  }

 private:
  Slot& place(std::uint64_t hash) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = static_cast<std::size_t>(hash) & mask;
    while (slots_[i].used) i = (i + 1) & mask;
    return slots_[i];
  }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (Slot& s : old)
      if (s.used) place(s.hash) = std::move(s);
  }
  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

class UnsyncFlatCache {
 public:
  [[gnu::noinline]] KernelHandle kernel(GpuBackend& gpu, std::string_view module,
                                        std::string_view func) {
    // As OpCache: the pair's hash, and the stored key is module then func.
    const std::uint64_t hash = detail::hash_pair(module, func);
    const auto match = [&](const KernelSlot& s) {
      return s.value.module_len == module.size() &&
             s.key.size() == module.size() + func.size() &&
             s.key.part_equal(module.size() + func.size(), 0, module) &&
             s.key.part_equal(module.size() + func.size(), module.size(), func);
    };
    if (const KernelSlot* s = kernels_.find(hash, match)) return s->value.handle;
    return kernel_miss(gpu, module, func, hash);
  }

  [[gnu::noinline]] DevicePtr scratch(GpuBackend& gpu, std::string_view tag, std::size_t bytes) {
    const std::uint64_t hash = detail::hash_string(tag);
    const auto match = [&](const auto& s) { return s.key.equals(tag); };
    if (const auto* s = scratch_.find(hash, match); s != nullptr && s->value.bytes >= bytes)
      return s->value.ptr;
    return scratch_miss(gpu, tag, bytes, hash);
  }

  [[gnu::noinline]] bool first_shape(std::string_view name, std::uint64_t m, std::uint64_t n,
                                     std::uint64_t k) {
    return gate(name, m, n, k);
  }

  // As OpCache, once(key) is first_shape(key, 0, 0, 0) with the zeros folded into the hash.
  [[gnu::noinline]] bool once(std::string_view key) { return gate(key, 0, 0, 0); }

  [[gnu::noinline]] bool first_n(std::string_view key, std::uint64_t n) {
    if (n == 0) return false;
    const std::uint64_t hash = detail::hash_string(key);
    const auto match = [&](const auto& s) { return s.key.equals(key); };
    if (const auto* s = counters_.find(hash, match); s != nullptr && s->value >= n) return false;
    return first_n_miss(key, n, hash);
  }

  [[gnu::noinline]] std::optional<std::uint32_t> n_tile(KernelHandle h) const {
    const std::uint64_t hash = detail::hash_u64(h.value);
    const auto match = [&](const RecordSlot& s) { return s.value.handle == h.value; };
    // Returned as OpCache returns it (see detail::unpack_optional_u32).
    if (const RecordSlot* s = records_.find(hash, match))
      return detail::unpack_optional_u32((std::uint64_t{1} << 32) | s->value.n_tile);
    return std::nullopt;
  }

  void record_n_tile(KernelHandle h, std::uint32_t n) {
    records_.insert(detail::hash_u64(h.value), {}, {h.value, n});
  }

  void release(GpuBackend& gpu) {
    scratch_.for_each([&](auto& s) { gpu.free(s.value.ptr); });
    for (DevicePtr p : retired_) gpu.free(p);
    retired_.clear();
  }

 private:
  // Inlined into first_shape and once, as OpCache's is.
  bool gate(std::string_view name, std::uint64_t m, std::uint64_t n, std::uint64_t k) {
    // OpCache's gate hash: the name's hash, mixed with the shape when there is one.
    std::uint64_t hash = detail::hash_string(name);
    if ((m | n | k) != 0) {
      hash ^= detail::hash_mum(m ^ ((k << 32) | (k >> 32)) ^ detail::kHashSecret0,
                               n ^ detail::kHashSecret1);
    }
    const auto match = [&](const GateSlot& s) {
      return s.value.m == m && s.value.n == n && s.value.k == k && s.key.equals(name);
    };
    if (gates_.find(hash, match) != nullptr) return false;
    return gate_miss(name, m, n, k, hash);
  }

  // The misses, out of line as OpCache's are, so the hits are small leaf code.
  [[gnu::noinline]] KernelHandle kernel_miss(GpuBackend& gpu, std::string_view module,
                                             std::string_view func, std::uint64_t hash) {
    const KernelHandle h = gpu.kernel(module, func);
    kernels_.insert(hash, FlatKey(module, func), {module.size(), h});
    return h;
  }
  [[gnu::noinline]] DevicePtr scratch_miss(GpuBackend& gpu, std::string_view tag,
                                           std::size_t bytes, std::uint64_t hash) {
    auto* s = scratch_.find_mutable(hash, tag);
    if (s == nullptr) s = &scratch_.insert(hash, FlatKey(tag), {});
    if (s->value.ptr) retired_.push_back(s->value.ptr);
    s->value = Buffer{gpu.alloc(bytes, "bench baseline scratch"), bytes};
    return s->value.ptr;
  }
  [[gnu::noinline]] bool first_n_miss(std::string_view key, std::uint64_t n, std::uint64_t hash) {
    auto* s = counters_.find_mutable(hash, key);
    if (s == nullptr) s = &counters_.insert(hash, FlatKey(key), 0);
    if (s->value >= n) return false;
    ++s->value;
    return true;
  }
  [[gnu::noinline]] bool gate_miss(std::string_view name, std::uint64_t m, std::uint64_t n,
                                   std::uint64_t k, std::uint64_t hash) {
    gates_.insert(hash, FlatKey(name), {m, n, k});
    return true;
  }

  struct KernelValue {
    std::size_t module_len;
    KernelHandle handle;
  };
  struct Buffer {
    DevicePtr ptr;
    std::size_t bytes = 0;
  };
  struct Shape {
    std::uint64_t m, n, k;
  };
  struct Record {
    std::uint64_t handle;
    std::uint32_t n_tile;
  };
  using KernelSlot = FlatTable<KernelValue>::Slot;
  using GateSlot = FlatTable<Shape>::Slot;
  using RecordSlot = FlatTable<Record>::Slot;
  FlatTable<KernelValue> kernels_;
  FlatTable<Buffer> scratch_;
  std::vector<DevicePtr> retired_;
  FlatTable<Shape> gates_;
  FlatTable<std::uint64_t> counters_;
  FlatTable<Record> records_;
};

}  // namespace gpuplug::bench
