// SPDX-License-Identifier: Apache-2.0
// AllocationLedger's reports: the call sites by size, the text report, the sweep and its warning.
#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "gpuplug/support/failures.hpp"
#include "gpuplug/support/text.hpp"
#include "ledger.hpp"

namespace gpuplug::sdk {
namespace {

using support::describe_bytes;
using support::hex;

std::string site_name(const std::string& site) { return site.empty() ? "<no site>" : site; }

// (bytes, site) of each entry, for group_sites.
using SizedSites = std::vector<std::pair<std::uint64_t, std::string_view>>;

// Groups entries by site, largest total first; `top_n` = 0 means all.
std::vector<SiteUsage> group_sites(const SizedSites& entries, std::size_t top_n) {
  std::unordered_map<std::string_view, SiteUsage> by_site;
  for (const auto& [bytes, site] : entries) {
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

// The (bytes, site) of every slot of an exact index.
template <class Table>
SizedSites sized_sites(const Table& table) {
  SizedSites out;
  out.reserve(table.size());
  table.for_each([&](const auto& s) { out.emplace_back(s.bytes, s.site->first); });
  return out;
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

// Every arena of an exact index ({ptr, bytes, kind, site}), largest first.
template <class Table>
std::vector<LedgerEntry> arena_entries(const Table& table) {
  std::vector<LedgerEntry> out;
  table.for_each([&](const auto& s) {
    if (s.kind == alloc_kind_arena) out.push_back({s.ptr, s.bytes, s.kind, s.site->first});
  });
  std::sort(out.begin(), out.end(), [](const LedgerEntry& a, const LedgerEntry& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.ptr < b.ptr;
  });
  return out;
}

std::string format_arenas(const std::vector<LedgerEntry>& arenas) {
  std::string out;
  for (const LedgerEntry& a : arenas) {
    if (!out.empty()) out += ", ";
    out += site_name(a.site) + " (" + describe_bytes(a.bytes) + " at " + hex(a.ptr) + ")";
  }
  return out;
}

}  // namespace

std::vector<SiteUsage> AllocationLedger::top_sites(std::size_t top_n) const {
  std::lock_guard lock(mutex_);
  return group_sites(sized_sites(exact_), top_n);
}

std::string AllocationLedger::report(std::size_t top_n) const {
  LedgerCounters c;
  std::vector<SiteUsage> sites;
  std::vector<LedgerEntry> arenas;
  {
    std::lock_guard lock(mutex_);
    c = counters_;
    sites = group_sites(sized_sites(exact_), top_n);
    if (c.arena_bytes != 0) arenas = arena_entries(exact_);
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
    if (c.live_pinned_bytes != 0)
      out += ", and " + describe_bytes(c.live_pinned_bytes) + " of pinned host memory";
    if (c.arena_bytes != 0) out += ", and " + describe_bytes(c.arena_bytes) + " in arenas";
  }
  out += "; peak " + describe_bytes(c.peak_bytes) + ", " + std::to_string(c.total_allocs) +
         " allocs, " + std::to_string(c.total_frees) + " frees";
  if (limit_) out += "; device_memory_limit " + describe_bytes(*limit_);
  out += '\n';
  for (const SiteUsage& u : sites) {
    out += "  " + std::to_string(u.bytes) + " bytes in " + std::to_string(u.count) +
           (u.count == 1 ? " allocation: " : " allocations: ") + site_name(u.site) + '\n';
  }
  if (!arenas.empty()) out += "  arenas (not in the live bytes): " + format_arenas(arenas) + '\n';
  return out;
}

SweepResult AllocationLedger::sweep(
    const std::function<void(std::uint64_t ptr, gpuplug_alloc_kind_t kind)>& vendor_free,
    std::size_t top_n) noexcept {
  SweepResult result;
  detail::FlatTable<Live, LiveTraits> taken;  // swapped in: allocates nothing under the lock
  bool sites_known = true;
  {
    // Entries leave the ledger before the vendor frees them (the ordering rule). Their sites
    // are read now, under the lock: a commit may prune them once the entries are gone.
    std::lock_guard lock(mutex_);
    taken.swap(exact_);
    index_.clear();
    result.count = taken.size();
    result.bytes = counters_.live_bytes;
    result.managed_bytes = counters_.live_managed_bytes;
    result.pinned_bytes = counters_.live_pinned_bytes;
    result.arena_bytes = counters_.arena_bytes;
    counters_.total_frees += counters_.live_count;
    counters_.live_bytes = 0;
    counters_.live_count = 0;
    counters_.live_managed_bytes = 0;
    counters_.live_pinned_bytes = 0;
    counters_.arena_bytes = 0;
    live_device_bytes_ = 0;
    // Sweeps are not history events: they end the instance's life.
    for (auto& [_, state] : sites_) {
      state.live_bytes = 0;
      state.live_count = 0;
    }
    try {
      if (!taken.empty()) result.top_sites = group_sites(sized_sites(taken), top_n);
      if (result.arena_bytes != 0) result.arenas = arena_entries(taken);
    } catch (...) {
      sites_known = false;  // out of memory while reporting; the sweep goes on
    }
  }
  if (taken.empty()) return result;
  taken.for_each([&](const Live& live) {
    try {
      vendor_free(live.ptr, live.kind);
    } catch (...) {
      ++result.failed;
      note_sweep_failure(live.ptr, std::current_exception());
    }
  });
  try {
    std::string message =
        "swept " + std::to_string(result.count) +
        (result.count == 1 ? " unreleased allocation, " : " unreleased allocations, ") +
        describe_bytes(result.bytes);
    if (result.pinned_bytes != 0)
      message += " and " + describe_bytes(result.pinned_bytes) + " of pinned host memory";
    if (result.arena_bytes != 0) message += " and " + describe_bytes(result.arena_bytes) + " in arenas";
    if (sites_known) message += "; top call sites: " + format_sites(result.top_sites);
    // An arena is a model's weights or the like: each one left is named, never only counted.
    if (sites_known && !result.arenas.empty())
      message += "; arenas never freed with free_arena: " + format_arenas(result.arenas);
    log(GPUPLUG_LOG_WARNING, message);
  } catch (...) {
    log(GPUPLUG_LOG_WARNING, "swept unreleased allocations");  // out of memory while reporting
  }
  return result;
}

void AllocationLedger::note_sweep_failure(std::uint64_t ptr,
                                          const std::exception_ptr& error) const noexcept {
  try {
    std::string why;
    try {
      std::rethrow_exception(error);
    } catch (...) {
      why = support::describe_current_exception();
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
