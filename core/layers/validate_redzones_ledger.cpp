// SPDX-License-Identifier: Apache-2.0
// GuardBands: the ledger figures above the validate layer in the user's sizes. The level below
// records each guarded allocation at its base with 2 * kBand more bytes; these take the bands
// out of the counters, the snapshot's allocations, sites and totals, and what a sweep reports.
// The peaks (the backend's, each site's, each scope's) are followed here in the user's sizes,
// from every allocation and free of device, managed and imported memory, all of which pass the
// layer.
#include <gpuplug/memory.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "layers/validate_redzones.hpp"

namespace gpuplug::detail::layers {

namespace {

using P = gpuplug_plugin_v1;

std::uint64_t minus(std::uint64_t a, std::uint64_t b) noexcept { return a > b ? a - b : 0; }

}  // namespace

void GuardBands::to_user(gpuplug_ledger_stats_t& s) const noexcept {
  s.live_bytes = minus(s.live_bytes, band_bytes_);
  s.live_managed_bytes = minus(s.live_managed_bytes, band_managed_bytes_);
  if (ever_guarded_) s.peak_bytes = std::max(user_peak_, s.live_bytes);
}

void GuardBands::grew(std::uint64_t bytes, const std::string& site) noexcept {
  user_live_ += bytes;
  user_peak_ = std::max(user_peak_, user_live_);
  for (auto& [id, scope] : scopes_) scope.high = std::max(scope.high, user_live_);
  try {
    SiteFigures& f = sites_[site];
    f.live += bytes;
    f.peak = std::max(f.peak, f.live);
  } catch (...) {  // no memory for the site's name: its figures are the ledger's from now
    figures_lost_ = true;
  }
}

void GuardBands::shrank(std::uint64_t bytes, const std::string& site) noexcept {
  user_live_ = minus(user_live_, bytes);
  auto it = sites_.find(site);
  if (it == sites_.end()) return;
  it->second.live = minus(it->second.live, bytes);
}

void GuardBands::remember_freed(const Guard& g) noexcept {
  try {
    recent_freed_.emplace_back(g.base, g.bytes);
  } catch (...) {
  }
  while (recent_freed_.size() > kRecentFreed) recent_freed_.pop_front();
}

void GuardBands::imported(std::uint64_t bytes, const std::string& site) noexcept {
  std::lock_guard lock(mutex_);
  grew(bytes, site);
}

gpuplug_status_t GuardBands::ledger_stats(gpuplug_ledger_stats_t* out) {
  std::lock_guard lock(mutex_);
  const gpuplug_status_t st = layer_.call_next<&P::ledger_stats>(out);
  if (st == GPUPLUG_STATUS_SUCCESS && out != nullptr) to_user(*out);
  return st;
}

gpuplug_status_t GuardBands::reset_peak() {
  std::lock_guard lock(mutex_);
  const gpuplug_status_t st = layer_.call_next<&P::ledger_reset_peak>();
  if (st != GPUPLUG_STATUS_SUCCESS) return st;
  user_peak_ = user_live_;
  for (auto& [site, f] : sites_) f.peak = f.live;
  return st;
}

gpuplug_status_t GuardBands::scope_begin(std::uint64_t* scope) {
  std::lock_guard lock(mutex_);
  const gpuplug_status_t st = layer_.call_next<&P::ledger_scope_begin>(scope);
  if (st != GPUPLUG_STATUS_SUCCESS || scope == nullptr) return st;
  try {
    scopes_.insert_or_assign(*scope, ScopeFigures{user_live_, user_live_});
  } catch (...) {  // without its figures the scope reports the ledger's
  }
  return st;
}

gpuplug_status_t GuardBands::scope_end(std::uint64_t scope, std::uint64_t* peak_bytes,
                                       std::int64_t* net_bytes) {
  std::lock_guard lock(mutex_);
  const gpuplug_status_t st = layer_.call_next<&P::ledger_scope_end>(scope, peak_bytes, net_bytes);
  auto it = scopes_.find(scope);
  if (it == scopes_.end()) return st;
  const ScopeFigures f = it->second;
  scopes_.erase(it);
  if (st != GPUPLUG_STATUS_SUCCESS || !ever_guarded_) return st;
  if (peak_bytes != nullptr) *peak_bytes = f.high - f.start;
  if (net_bytes != nullptr)
    *net_bytes = static_cast<std::int64_t>(user_live_) - static_cast<std::int64_t>(f.start);
  return st;
}

gpuplug_status_t GuardBands::sweep(gpuplug_ledger_stats_t* swept) {
  std::lock_guard lock(mutex_);
  const gpuplug_status_t st = layer_.call_next<&P::sweep_unreleased>(swept);
  if (st != GPUPLUG_STATUS_SUCCESS) return st;
  if (swept != nullptr) {
    // live_* of the result describe what was swept: every guarded allocation among it.
    swept->live_bytes = minus(swept->live_bytes, band_bytes_);
    swept->live_managed_bytes = minus(swept->live_managed_bytes, band_managed_bytes_);
  }
  for (const auto& [ptr, g] : guards_) remember_freed(g);
  guards_.clear();
  band_bytes_ = 0;
  band_managed_bytes_ = 0;
  user_live_ = 0;
  for (auto& [site, f] : sites_) f.live = 0;
  return st;
}

std::size_t GuardBands::snapshot(char* buf, std::size_t size) {
  std::string text;
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> by_base;  // user ptr, bytes
  std::map<std::string, std::uint64_t, std::less<>> site_peaks;  // of the guarded sites
  std::map<std::uint64_t, std::vector<std::uint64_t>> freed_by_base;  // user sizes
  gpuplug_ledger_stats_t totals{};
  totals.struct_size = sizeof totals;
  {
    // The text, the guards and the counters of one moment: no allocation or free in between.
    std::lock_guard lock(mutex_);
    text.assign(64 * 1024, '\0');
    for (int attempt = 0;; ++attempt) {
      const std::size_t length = layer_.call_next<&P::ledger_snapshot>(text.data(), text.size());
      if (length == 0) return 0;
      if (length < text.size()) {
        text.resize(::strnlen(text.c_str(), length));
        break;
      }
      if (length >= max_plugin_snapshot_bytes || attempt == 4) return 0;
      text.assign(length + 1 + length / 4, '\0');
    }
    if (!guards_.empty() || !recent_freed_.empty()) {
      for (const auto& [ptr, g] : guards_) by_base.emplace(g.base, std::make_pair(ptr, g.bytes));
      for (const auto& [base, bytes] : recent_freed_) freed_by_base[base].push_back(bytes);
      if (!figures_lost_)
        for (const auto& [site, f] : sites_)
          if (f.guarded) site_peaks.emplace(site, f.peak);
      if (layer_.call_next<&P::ledger_stats>(&totals) != GPUPLUG_STATUS_SUCCESS) return 0;
      to_user(totals);
    }
  }
  if (!by_base.empty() || !freed_by_base.empty()) {
    // Text the core cannot read is passed on as it came: the core's parse names what is wrong.
    try {
      MemorySnapshot s = parse_memory_snapshot(text, "the plugin's ledger_snapshot");
      s.totals.live_bytes = totals.live_bytes;
      s.totals.live_managed_bytes = totals.live_managed_bytes;
      s.totals.peak_bytes = totals.peak_bytes;
      std::map<std::string, std::uint64_t> site_bands;
      constexpr std::uint64_t pad = 2 * kBand;
      for (LiveAllocation& a : s.allocations) {
        auto it = by_base.find(a.ptr.value);
        if (it == by_base.end() || a.bytes != it->second.second + pad) continue;
        if (a.kind != AllocKind::device && a.kind != AllocKind::managed) continue;
        a.ptr = DevicePtr{it->second.first};
        a.bytes = it->second.second;
        site_bands[a.site] += pad;
      }
      for (SiteMemory& site : s.sites) {
        if (auto it = site_bands.find(site.site); it != site_bands.end())
          site.live_bytes = minus(site.live_bytes, it->second);
        if (auto it = site_peaks.find(site.site); it != site_peaks.end())
          site.peak_bytes = std::max(it->second, site.live_bytes);
      }
      std::stable_sort(s.sites.begin(), s.sites.end(),
                       [](const SiteMemory& a, const SiteMemory& b) {
                         return a.live_bytes > b.live_bytes;
                       });
      // An event at a base a guarded allocation had, of its padded size, was that allocation
      // (or one of the same size there: the same user pointer and size).
      for (MemoryEvent& e : s.history) {
        if (e.bytes < pad) continue;
        bool guarded = false;
        if (auto it = by_base.find(e.ptr.value); it != by_base.end())
          guarded = e.bytes == it->second.second + pad;
        if (auto it = freed_by_base.find(e.ptr.value); !guarded && it != freed_by_base.end())
          guarded = std::find(it->second.begin(), it->second.end(), e.bytes - pad) !=
                    it->second.end();
        if (!guarded) continue;
        e.ptr = DevicePtr{e.ptr.value + kBand};
        e.bytes -= pad;
      }
      text = to_json(s);
    } catch (const BadSnapshot&) {
    }
  }
  if (size != 0) {
    const std::size_t n = std::min(text.size(), size - 1);
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  return text.size();
}

}  // namespace gpuplug::detail::layers
