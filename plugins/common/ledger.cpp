// SPDX-License-Identifier: Apache-2.0
// AllocationLedger: accounting, device_memory_limit, unknown-free detection, reports and sweep.
#include "ledger.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <new>
#include <unordered_map>
#include <utility>

#include "plugin_sdk.hpp"

namespace gpuplug::sdk {
namespace {

std::string hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

std::string site_name(const std::string& site) { return site.empty() ? "<no site>" : site; }

// Groups entries by site, largest total first; `top_n` = 0 means all.
template <class It, class Get>
std::vector<SiteUsage> group_sites(It first, It last, Get get, std::size_t top_n) {
  std::unordered_map<std::string_view, SiteUsage> by_site;
  for (It it = first; it != last; ++it) {
    const auto& [bytes, site] = get(*it);
    SiteUsage& u = by_site[site];
    if (u.count == 0) u.site = site;
    ++u.count;
    u.bytes += bytes;
  }
  std::vector<SiteUsage> sites;
  sites.reserve(by_site.size());
  for (auto& [_, u] : by_site) sites.push_back(std::move(u));
  std::sort(sites.begin(), sites.end(), [](const SiteUsage& a, const SiteUsage& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    if (a.count != b.count) return a.count > b.count;
    return a.site < b.site;
  });
  if (top_n != 0 && sites.size() > top_n) sites.resize(top_n);
  return sites;
}

std::string format_sites(const std::vector<SiteUsage>& sites) {
  std::string out;
  for (const SiteUsage& u : sites) {
    if (!out.empty()) out += ", ";
    out += site_name(u.site) + " (" + std::to_string(u.bytes) + " bytes in " +
           std::to_string(u.count) + (u.count == 1 ? " allocation)" : " allocations)");
  }
  return out;
}

}  // namespace

std::string describe_bytes(std::uint64_t bytes) {
  static constexpr const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  std::string out = std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
  if (bytes < 1024) return out;
  double v = static_cast<double>(bytes);
  int unit = -1;
  while (v >= 1024.0 && unit < 5) {
    v /= 1024.0;
    ++unit;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, " (%.1f %s)", v, units[unit]);
  return out + buf;
}

// ---- NodePool ------------------------------------------------------------------------------

AllocationLedger::NodePool::~NodePool() {
  while (free_ != nullptr) ::operator delete(std::exchange(free_, free_->next));
}

void* AllocationLedger::NodePool::allocate(std::size_t bytes) {
  if (node_bytes_ == 0 && bytes >= sizeof(Free)) node_bytes_ = bytes;  // the map's node size
  if (bytes == node_bytes_ && free_ != nullptr) return std::exchange(free_, free_->next);
  return ::operator new(bytes);
}

void AllocationLedger::NodePool::deallocate(void* p, std::size_t bytes) noexcept {
  if (bytes != node_bytes_) {
    ::operator delete(p);
    return;
  }
  free_ = ::new (p) Free{free_};
}

// ---- Reservation ---------------------------------------------------------------------------

AllocationLedger::Reservation::Reservation(Reservation&& other) noexcept
    : ledger_(std::exchange(other.ledger_, nullptr)), bytes_(other.bytes_), kind_(other.kind_) {}

AllocationLedger::Reservation::~Reservation() {
  if (ledger_ != nullptr) ledger_->unreserve(bytes_, kind_);
}

// ---- AllocationLedger ----------------------------------------------------------------------

AllocationLedger::AllocationLedger(std::string owner,
                                   std::optional<std::uint64_t> device_memory_limit, LogSink log)
    : owner_(std::move(owner)), limit_(device_memory_limit), log_(std::move(log)) {}

AllocationLedger::~AllocationLedger() = default;

AllocationLedger::Reservation AllocationLedger::reserve(std::uint64_t bytes,
                                                        gpuplug_alloc_kind_t kind) {
  if (kind != GPUPLUG_ALLOC_DEVICE && kind != GPUPLUG_ALLOC_MANAGED)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "unknown allocation kind " + std::to_string(kind));
  if (kind == GPUPLUG_ALLOC_DEVICE && limit_) {
    std::unique_lock lock(mutex_);
    const std::uint64_t in_use = live_device_bytes_ + reserved_device_bytes_;
    if (bytes > *limit_ || in_use > *limit_ - bytes) {
      lock.unlock();
      fail(GPUPLUG_STATUS_OUT_OF_MEMORY, "device_memory_limit of " + describe_bytes(*limit_) +
                                             " reached: " + describe_bytes(in_use) + " live, " +
                                             describe_bytes(bytes) + " requested");
    }
    reserved_device_bytes_ += bytes;
  }
  return Reservation(this, bytes, kind);
}

void AllocationLedger::unreserve(std::uint64_t bytes, gpuplug_alloc_kind_t kind) noexcept {
  if (kind != GPUPLUG_ALLOC_DEVICE || !limit_) return;
  std::unique_lock lock(mutex_);
  reserved_device_bytes_ -= bytes;
}

AllocationLedger::Sites::value_type* AllocationLedger::intern(std::string_view site) {
  // Allocations come in runs from one call site: compare with the last one before hashing.
  if (last_site_ != nullptr && last_site_->first == site) return last_site_;
  if (auto it = sites_.find(site); it != sites_.end()) return last_site_ = &*it;
  if (sites_.size() >= prune_at_) {
    // Forget the sites no entry points at; grow the threshold so pruning stays amortised O(1).
    last_site_ = nullptr;
    std::erase_if(sites_, [](const auto& kv) { return kv.second == 0; });
    prune_at_ = std::max<std::size_t>(1024, 2 * sites_.size());
  }
  return last_site_ = &*sites_.try_emplace(std::string(site), 0).first;
}

void AllocationLedger::commit(Reservation&& reservation, std::uint64_t ptr, std::string_view site) {
  Reservation r(std::move(reservation));  // gives the bytes back if we throw
  std::unique_lock lock(mutex_);
  // Both may throw bad_alloc; nothing is recorded then (an unused interned site is harmless).
  Sites::value_type* interned = intern(site);
  auto [it, inserted] = entries_.try_emplace(ptr, Live{r.bytes_, r.kind_, interned});
  if (!inserted) {
    const std::uint64_t old_bytes = it->second.bytes;
    lock.unlock();
    fail(GPUPLUG_STATUS_INTERNAL, "the vendor returned " + hex(ptr) + ", which " + owner_ +
                                      " still records as live (" + describe_bytes(old_bytes) + ")");
  }
  interned->second += 1;
  const bool device = r.kind_ == GPUPLUG_ALLOC_DEVICE;
  if (device) {
    if (limit_) reserved_device_bytes_ -= r.bytes_;
    live_device_bytes_ += r.bytes_;
  } else {
    counters_.live_managed_bytes += r.bytes_;
  }
  r.ledger_ = nullptr;  // committed: nothing to give back
  counters_.live_bytes += r.bytes_;
  counters_.live_count += 1;
  counters_.total_allocs += 1;
  counters_.peak_bytes = std::max(counters_.peak_bytes, counters_.live_bytes);
}

AllocationLedger::Live AllocationLedger::remove(std::uint64_t ptr,
                                                std::unique_lock<std::shared_mutex>& lock) {
  auto it = entries_.find(ptr);
  if (it == entries_.end()) {
    lock.unlock();
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
         "free of " + hex(ptr) + ": not allocated by " + owner_ + " (or already freed)");
  }
  const Live live = it->second;
  entries_.erase(it);
  if (live.kind == GPUPLUG_ALLOC_DEVICE)
    live_device_bytes_ -= live.bytes;
  else
    counters_.live_managed_bytes -= live.bytes;
  counters_.live_bytes -= live.bytes;
  counters_.live_count -= 1;
  counters_.total_frees += 1;
  return live;
}

LedgerEntry AllocationLedger::release(std::uint64_t ptr) {
  std::unique_lock lock(mutex_);
  // The site is copied before anything changes, so a bad_alloc leaves the entry in place.
  std::string site;
  if (auto it = entries_.find(ptr); it != entries_.end()) site = it->second.site->first;
  const Live live = remove(ptr, lock);
  live.site->second -= 1;
  return LedgerEntry{ptr, live.bytes, live.kind, std::move(site)};
}

gpuplug_alloc_kind_t AllocationLedger::release_kind(std::uint64_t ptr) {
  std::unique_lock lock(mutex_);
  const Live live = remove(ptr, lock);
  live.site->second -= 1;
  return live.kind;
}

std::optional<LedgerEntry> AllocationLedger::find(std::uint64_t address) const {
  std::shared_lock lock(mutex_);
  auto it = entries_.upper_bound(address);  // first entry starting after address
  if (it == entries_.begin()) return std::nullopt;
  --it;
  const std::uint64_t base = it->first;
  const std::uint64_t extent = std::max<std::uint64_t>(it->second.bytes, 1);
  if (address - base >= extent) return std::nullopt;
  return LedgerEntry{base, it->second.bytes, it->second.kind, {}};
}

LedgerCounters AllocationLedger::counters() const {
  std::shared_lock lock(mutex_);
  return counters_;
}

std::uint64_t AllocationLedger::live_device_bytes() const {
  std::shared_lock lock(mutex_);
  return live_device_bytes_;
}

std::vector<SiteUsage> AllocationLedger::top_sites(std::size_t top_n) const {
  std::shared_lock lock(mutex_);
  return group_sites(
      entries_.begin(), entries_.end(),
      [](const auto& kv) {
        return std::pair<std::uint64_t, std::string_view>(kv.second.bytes, kv.second.site->first);
      },
      top_n);
}

std::string AllocationLedger::report(std::size_t top_n) const {
  LedgerCounters c;
  std::vector<SiteUsage> sites;
  {
    std::shared_lock lock(mutex_);
    c = counters_;
    sites = group_sites(
        entries_.begin(), entries_.end(),
        [](const auto& kv) {
          return std::pair<std::uint64_t, std::string_view>(kv.second.bytes, kv.second.site->first);
        },
        top_n);
  }
  std::string out = owner_ + ": ";
  if (c.live_count == 0) {
    out += "no live allocations";
  } else {
    out += std::to_string(c.live_count) +
           (c.live_count == 1 ? " live allocation, " : " live allocations, ") +
           describe_bytes(c.live_bytes);
    if (c.live_managed_bytes != 0)
      out += ", of which " + describe_bytes(c.live_managed_bytes) + " managed";
  }
  out += "; peak " + describe_bytes(c.peak_bytes) + ", " + std::to_string(c.total_allocs) +
         " allocs, " + std::to_string(c.total_frees) + " frees";
  if (limit_) out += "; device_memory_limit " + describe_bytes(*limit_);
  out += '\n';
  for (const SiteUsage& u : sites) {
    out += "  " + std::to_string(u.bytes) + " bytes in " + std::to_string(u.count) +
           (u.count == 1 ? " allocation: " : " allocations: ") + site_name(u.site) + '\n';
  }
  return out;
}

SweepResult AllocationLedger::sweep(
    const std::function<void(std::uint64_t ptr, gpuplug_alloc_kind_t kind)>& vendor_free,
    std::size_t top_n) noexcept {
  SweepResult result;
  Entries taken{Entries::allocator_type(&pool_)};  // same pool: the swap below moves no node
  {
    // Entries leave the ledger before the vendor frees them (the ordering rule).
    std::unique_lock lock(mutex_);
    taken.swap(entries_);
    result.count = taken.size();
    result.bytes = counters_.live_bytes;
    result.managed_bytes = counters_.live_managed_bytes;
    counters_.total_frees += counters_.live_count;
    counters_.live_bytes = 0;
    counters_.live_count = 0;
    counters_.live_managed_bytes = 0;
    live_device_bytes_ = 0;
  }
  if (taken.empty()) return result;
  for (const auto& [ptr, live] : taken) {
    try {
      vendor_free(ptr, live.kind);
    } catch (...) {
      ++result.failed;
      note_sweep_failure(ptr, std::current_exception());
    }
  }
  try {
    result.top_sites = group_sites(
        taken.begin(), taken.end(),
        [](const auto& kv) {
          return std::pair<std::uint64_t, std::string_view>(kv.second.bytes, kv.second.site->first);
        },
        top_n);
    log(GPUPLUG_LOG_WARNING,
        "swept " + std::to_string(result.count) +
            (result.count == 1 ? " unreleased allocation, " : " unreleased allocations, ") +
            describe_bytes(result.bytes) + "; top call sites: " + format_sites(result.top_sites));
  } catch (...) {
    log(GPUPLUG_LOG_WARNING, "swept unreleased allocations");  // out of memory while reporting
  }
  // The nodes go back to the pool, and the sites lose their entries, under the lock: both are
  // shared with concurrent commits. Until here the counts kept the sites read above alive.
  std::unique_lock lock(mutex_);
  for (const auto& [ptr, live] : taken) live.site->second -= 1;
  taken.clear();
  return result;
}

void AllocationLedger::note_sweep_failure(std::uint64_t ptr,
                                          const std::exception_ptr& error) const noexcept {
  try {
    std::string why = "unknown exception";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      why = e.what();
    } catch (...) {
    }
    log(GPUPLUG_LOG_ERROR, "sweep: freeing " + hex(ptr) + " failed: " + why);
  } catch (...) {  // out of memory while reporting: SweepResult::failed still counts it
  }
}

void AllocationLedger::log(gpuplug_log_level_t level, std::string_view message) const noexcept {
  if (!log_) return;
  try {
    log_(level, message);
  } catch (...) {
    // A log sink must not throw; if it does, the message is dropped.
  }
}

}  // namespace gpuplug::sdk
