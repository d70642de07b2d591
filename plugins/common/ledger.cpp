// SPDX-License-Identifier: Apache-2.0
// AllocationLedger: accounting, device_memory_limit, unknown-free detection, snapshots, scopes.
#include "ledger.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <utility>

#include "failure.hpp"
#include "gpuplug/support/failures.hpp"
#include "gpuplug/support/text.hpp"

namespace gpuplug::sdk {

using support::describe_bytes;
using support::hex;

// ---- AllocationLedger ----------------------------------------------------------------------

AllocationLedger::AllocationLedger(std::string owner,
                                   std::optional<std::uint64_t> device_memory_limit, LogSink log,
                                   std::size_t history_capacity)
    : owner_(std::move(owner)),
      limit_(device_memory_limit),
      log_(std::move(log)),
      history_(history_capacity, Event{0, 0, 0, 0, nullptr, GPUPLUG_ALLOC_DEVICE, 0}) {}

AllocationLedger::~AllocationLedger() = default;

void AllocationLedger::fail_unknown_kind(gpuplug_alloc_kind_t kind) {
  fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "unknown allocation kind " + std::to_string(kind));
}

AllocationLedger::Reservation AllocationLedger::reserve_against_limit(std::uint64_t bytes,
                                                                     gpuplug_alloc_kind_t kind) {
  std::unique_lock lock(mutex_);
  const std::uint64_t in_use = live_device_bytes_ + reserved_device_bytes_;
  if (bytes > *limit_ || in_use > *limit_ - bytes) {
    lock.unlock();
    fail(GPUPLUG_STATUS_OUT_OF_MEMORY, "device_memory_limit of " + describe_bytes(*limit_) +
                                           " reached: " + describe_bytes(in_use) + " live, " +
                                           describe_bytes(bytes) + " requested");
  }
  reserved_device_bytes_ += bytes;
  return Reservation(this, bytes, kind);
}

void AllocationLedger::unreserve(std::uint64_t bytes) noexcept {
  std::lock_guard lock(mutex_);
  reserved_device_bytes_ -= bytes;
}

AllocationLedger::Site* AllocationLedger::intern(const char* site) {
  const std::string_view name = site != nullptr ? std::string_view(site) : std::string_view();
  if (auto it = sites_.find(name); it != sites_.end()) return last_site_ = &*it;
  if (sites_.size() >= prune_at_) {
    // Forget the sites no entry and no history event points at (their peaks go with them); grow
    // the threshold so pruning stays amortised O(1).
    last_site_ = nullptr;
    std::erase_if(sites_, [](const auto& kv) {
      return kv.second.live_count == 0 && kv.second.history_refs == 0;
    });
    prune_at_ = std::max<std::size_t>(1024, 2 * sites_.size());
  }
  return last_site_ = &*sites_.try_emplace(std::string(name)).first;
}

namespace {

// Whether an interned site is `site` (null meaning ""): one pass, no strlen first.
bool same_site(const std::string& interned, const char* site) noexcept {
  return site != nullptr ? std::strcmp(interned.c_str(), site) == 0 : interned.empty();
}

}  // namespace

void AllocationLedger::commit(Reservation&& reservation, std::uint64_t ptr, const char* site) {
  Reservation r(std::move(reservation));  // gives the bytes back if we throw
  if (ptr == 0) fail(GPUPLUG_STATUS_INTERNAL, "the vendor returned a null pointer");
  const std::uint64_t bytes = r.bytes_;
  std::uint64_t duplicate_bytes = 0;
  {
    std::lock_guard lock(mutex_);
    // Everything that may throw bad_alloc comes first, so a failure records nothing (an
    // interned site no entry points at is harmless: it is pruned later). Allocations come in
    // runs from one call site, so the last site is tried before the table.
    Site* interned =
        last_site_ != nullptr && same_site(last_site_->first, site) ? last_site_ : intern(site);
    exact_.reserve_one();
    index_.reserve_note([this](std::uint64_t p) { return live(p); });
    const bool history = !history_.empty();
    const Live* existing = exact_.insert_unique(
        Live{ptr, bytes, interned, r.kind_, 0, sequence_ + 1, history ? now_ns() : 0},
        [&](const Live& s) { return s.ptr == ptr; });
    if (existing == nullptr) {
      index_.note(ptr);  // room reserved above: cannot throw
      // Pinned memory is host memory, an arena the device's long-lived memory: both in the
      // counts and their own bytes, never in the bytes the peaks, scopes and sites measure (the
      // budget for transient memory). An arena is device memory for device_memory_limit.
      const std::uint64_t budget =
          r.kind_ == alloc_kind_pinned || r.kind_ == alloc_kind_arena ? 0 : bytes;
      if (r.kind_ == GPUPLUG_ALLOC_DEVICE || r.kind_ == alloc_kind_arena) {
        if (r.ledger_ != nullptr) reserved_device_bytes_ -= bytes;
        live_device_bytes_ += bytes;
        if (r.kind_ == alloc_kind_arena) counters_.arena_bytes += bytes;
      } else if (r.kind_ == GPUPLUG_ALLOC_MANAGED) {
        counters_.live_managed_bytes += bytes;
      } else if (r.kind_ == alloc_kind_pinned) {
        counters_.live_pinned_bytes += bytes;
      }  // external: in live_bytes only
      r.ledger_ = nullptr;  // committed: nothing to give back
      counters_.live_bytes += budget;
      counters_.live_count += 1;
      counters_.total_allocs += 1;
      counters_.peak_bytes = std::max(counters_.peak_bytes, counters_.live_bytes);
      ++sequence_;
      SiteState& site_state = interned->second;
      site_state.live_bytes += budget;
      site_state.live_count += 1;
      site_state.peak_bytes = std::max(site_state.peak_bytes, site_state.live_bytes);
      for (OpenScope& scope : scopes_) scope.high = std::max(scope.high, counters_.live_bytes);
      if (history) [[unlikely]]
        record_event(Live{ptr, bytes, interned, r.kind_, 0, sequence_, 0}, false);
      return;
    }
    duplicate_bytes = existing->bytes;
  }
  fail(GPUPLUG_STATUS_INTERNAL, "the vendor returned " + hex(ptr) + ", which " + owner_ +
                                    " still records as live (" + describe_bytes(duplicate_bytes) +
                                    ")");
}

// Inlined into release and release_kind: the free path is one call deep.
// Removes only an entry that the free `by` frees (mapped host memory and arenas leave the ledger
// through their own frees, never through free of their device address).
[[gnu::always_inline]] inline bool AllocationLedger::remove(std::uint64_t ptr, Live& live,
                                                            FreeBy by) noexcept {
  if (!exact_.erase(
          detail::mix(ptr), [&](const Live& s) { return s.ptr == ptr && free_by(s.kind) == by; },
          live))
    return false;
  if (live.filed != 0) index_.erase(ptr, live.bytes);
  const std::uint64_t budget =
      live.kind == alloc_kind_pinned || live.kind == alloc_kind_arena ? 0 : live.bytes;
  if (live.kind == GPUPLUG_ALLOC_DEVICE) {
    live_device_bytes_ -= live.bytes;
  } else if (live.kind == alloc_kind_arena) {
    live_device_bytes_ -= live.bytes;
    counters_.arena_bytes -= live.bytes;
  } else if (live.kind == GPUPLUG_ALLOC_MANAGED)
    counters_.live_managed_bytes -= live.bytes;
  else if (live.kind == alloc_kind_pinned)
    counters_.live_pinned_bytes -= live.bytes;
  counters_.live_bytes -= budget;
  counters_.live_count -= 1;
  counters_.total_frees += 1;
  ++sequence_;
  live.site->second.live_bytes -= budget;
  live.site->second.live_count -= 1;
  if (!history_.empty()) [[unlikely]]
    record_event(live, true);
  return true;
}

void AllocationLedger::fail_not_live(std::uint64_t ptr) const {
  FreeBy by = FreeBy::free;
  {
    std::lock_guard lock(mutex_);
    if (const Live* s = live(ptr)) by = free_by(s->kind);
  }
  if (by == FreeBy::pinned)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
         "free of " + hex(ptr) + ": it is the device address of mapped host memory of " + owner_ +
             "; free it by its host pointer (free_host_pinned)");
  if (by == FreeBy::arena)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
         "free of " + hex(ptr) + ": it is an arena of " + owner_ + "; free it with free_arena");
  fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
       "free of " + hex(ptr) + ": not allocated by " + owner_ + " (or already freed)");
}

LedgerEntry AllocationLedger::release(std::uint64_t ptr) {
  LedgerEntry entry{ptr, 0, GPUPLUG_ALLOC_DEVICE, {}};
  {
    std::lock_guard lock(mutex_);
    // The site is copied before anything changes, so a bad_alloc leaves the entry in place.
    if (const Live* s = live(ptr)) entry.site = s->site->first;
    Live live;
    if (remove(ptr, live, FreeBy::free)) {
      entry.bytes = live.bytes;
      entry.kind = live.kind;
      return entry;
    }
  }
  fail_not_live(ptr);
}

gpuplug_alloc_kind_t AllocationLedger::release_kind(std::uint64_t ptr) {
  {
    std::lock_guard lock(mutex_);
    Live live;
    if (remove(ptr, live, FreeBy::free)) return live.kind;
  }
  fail_not_live(ptr);
}

std::uint64_t AllocationLedger::release_pinned(std::uint64_t ptr) {
  {
    std::lock_guard lock(mutex_);
    Live live;
    if (remove(ptr, live, FreeBy::pinned)) return live.bytes;
  }
  fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
       "free of mapped memory at " + hex(ptr) + ": not on the ledger of " + owner_);
}

void AllocationLedger::release_arena(std::uint64_t ptr) {
  std::optional<FreeBy> other;  // how the live allocation at ptr is freed, when it is no arena
  {
    std::lock_guard lock(mutex_);
    if (const Live* s = live(ptr)) other = free_by(s->kind);
    Live removed;
    if (remove(ptr, removed, FreeBy::arena)) return;
  }
  fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
       "free_arena of " + hex(ptr) + ": " +
           (!other ? "not an arena of " + owner_ + " (or already freed)"
            : *other == FreeBy::pinned
                ? "it is the device address of mapped host memory of " + owner_ +
                      "; free it by its host pointer (free_host_pinned)"
                : "it is an allocation of " + owner_ + " made by alloc, not alloc_arena; free it with free"));
}

AllocationLedger::Live* AllocationLedger::live(std::uint64_t ptr) const noexcept {
  return exact_.find(detail::mix(ptr), [&](const Live& s) { return s.ptr == ptr; });
}

std::optional<LedgerEntry> AllocationLedger::find(std::uint64_t address) const {
  std::lock_guard lock(mutex_);
  // Most lookups name an allocation's own pointer: one probe of the exact index.
  if (const Live* s = live(address)) return LedgerEntry{s->ptr, s->bytes, s->kind, {}};
  if (index_.size() != exact_.size()) {
    index_.file_pending(
        exact_.size(), [this](auto&& file) { exact_.for_each(file); },
        [this](std::uint64_t p) { return live(p); });
  }
  if (const auto hit = index_.find(address))
    return LedgerEntry{hit->ptr, hit->bytes, hit->kind, {}};
  return std::nullopt;
}

LedgerCounters AllocationLedger::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

std::uint64_t AllocationLedger::live_device_bytes() const {
  std::lock_guard lock(mutex_);
  return live_device_bytes_;
}

std::uint64_t AllocationLedger::now_ns() const noexcept {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now() - epoch_)
                                        .count());
}

void AllocationLedger::record_event(const Live& live, bool is_free) noexcept {
  Event& slot = history_[history_next_];
  if (slot.site != nullptr) slot.site->second.history_refs -= 1;
  // A free's event carries the free's own number and time; an allocation's, the allocation's.
  const bool now = is_free || live.time_ns == 0;
  slot = Event{is_free ? sequence_ : live.sequence,
               now ? now_ns() : live.time_ns,
               live.ptr,
               live.bytes,
               live.site,
               live.kind,
               is_free ? 1u : 0u};
  live.site->second.history_refs += 1;
  history_next_ = history_next_ + 1 == history_.size() ? 0 : history_next_ + 1;
  history_written_ += 1;
}

LedgerSnapshot AllocationLedger::snapshot() const {
  LedgerSnapshot out;
  out.owner = owner_;
  out.device_memory_limit = limit_;
  out.history_capacity = history_.size();
  std::unique_lock lock(mutex_);
  out.counters = counters_;
  out.sites.reserve(sites_.size());
  for (const auto& [name, state] : sites_) {
    if (state.live_count == 0 && state.peak_bytes == 0) continue;
    out.sites.push_back({name, state.live_bytes, state.live_count, state.peak_bytes});
  }
  out.allocations.reserve(exact_.size());
  exact_.for_each([&](const Live& l) {
    out.allocations.push_back({l.ptr, l.bytes, l.kind, l.site->first, l.sequence, l.time_ns});
  });
  const std::size_t kept =
      static_cast<std::size_t>(std::min<std::uint64_t>(history_written_, history_.size()));
  out.history_dropped = history_written_ - kept;
  out.history.reserve(kept);
  // The oldest kept event is `kept` slots behind the next one to write.
  for (std::size_t i = 0; i < kept; ++i) {
    const Event& e = history_[(history_next_ + history_.size() - kept + i) % history_.size()];
    out.history.push_back(
        {e.sequence, e.time_ns, e.ptr, e.bytes, e.kind, e.is_free != 0, e.site->first});
  }
  lock.unlock();  // the copies are consistent; sorting them needs no lock
  std::sort(out.sites.begin(), out.sites.end(), [](const SiteTotals& a, const SiteTotals& b) {
    if (a.live_bytes != b.live_bytes) return a.live_bytes > b.live_bytes;
    if (a.peak_bytes != b.peak_bytes) return a.peak_bytes > b.peak_bytes;
    return a.site < b.site;
  });
  std::sort(out.allocations.begin(), out.allocations.end(),
            [](const auto& a, const auto& b) { return a.sequence < b.sequence; });
  return out;
}

void AllocationLedger::reset_peak() {
  std::lock_guard lock(mutex_);
  counters_.peak_bytes = counters_.live_bytes;
  for (auto& [_, state] : sites_) state.peak_bytes = state.live_bytes;
}

std::uint64_t AllocationLedger::begin_scope() {
  std::lock_guard lock(mutex_);
  scopes_.reserve(scopes_.size() + 1);  // may throw: before anything changes
  const std::uint64_t id = ++next_scope_id_;
  scopes_.push_back({id, counters_.live_bytes, counters_.live_bytes});
  return id;
}

ScopeResult AllocationLedger::end_scope(std::uint64_t id) {
  {
    std::lock_guard lock(mutex_);
    const auto it = std::find_if(scopes_.begin(), scopes_.end(),
                                 [&](const OpenScope& s) { return s.id == id; });
    if (it != scopes_.end()) {
      const ScopeResult result{
          it->high - it->base,
          static_cast<std::int64_t>(counters_.live_bytes) - static_cast<std::int64_t>(it->base)};
      scopes_.erase(it);
      return result;
    }
  }
  fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
       "memory scope " + std::to_string(id) + " of " + owner_ + " is not open");
}

}  // namespace gpuplug::sdk
