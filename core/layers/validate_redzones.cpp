// SPDX-License-Identifier: Apache-2.0
// GuardBands: padding allocations with guard bands, writing and reading the bands back through
// the level below, and the messages for a broken band.
#include "layers/validate_redzones.hpp"

#include <array>
#include <cstring>
#include <gpuplug/support/text.hpp>
#include <gpuplug/types.hpp>
#include <limits>
#include <new>
#include <utility>

#include "layers/validate_memory.hpp"

namespace gpuplug::detail::layers {

namespace {

using P = gpuplug_plugin_v1;
using support::hex;

/// What every band holds, written from here (host memory that outlives every queued copy).
constexpr std::array<std::uint8_t, GuardBands::kBand> make_pattern() noexcept {
  std::array<std::uint8_t, GuardBands::kBand> p{};
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = GuardBands::band_pattern(i);
  return p;
}
constexpr std::array<std::uint8_t, GuardBands::kBand> kPattern = make_pattern();

std::string bytes_word(std::uint64_t n) { return n == 1 ? " byte" : " bytes"; }

}  // namespace

GuardBands::~GuardBands() {
  if (stream_) layer_.call_next<&P::stream_destroy>(*stream_);
}

gpuplug_status_t GuardBands::next_alloc(bool managed, std::uint64_t bytes, const char* site,
                                        std::uint64_t* out) const {
  return managed ? layer_.call_next<&P::alloc_managed>(bytes, site, out)
                 : layer_.call_next<&P::alloc>(bytes, site, out);
}

gpuplug_status_t GuardBands::failed(gpuplug_status_t status, const std::string& doing) const {
  std::string why = to_string(static_cast<Status>(status));
  if (layer_.next_has<&P::last_error>()) {
    // The level below's own message for the call that failed, when it has one.
    std::array<char, 1024> text{};
    const std::size_t n = layer_.call_next<&P::last_error>(text.data(), text.size());
    if (n != 0) why += ": " + std::string(text.data(), ::strnlen(text.data(), text.size()));
  }
  return layer_.fail(status, "validate: " + doing + " failed (" + why + ")");
}

gpuplug_status_t GuardBands::stream(std::uint64_t& out) {
  if (stream_) {
    out = *stream_;
    return GPUPLUG_STATUS_SUCCESS;
  }
  std::uint64_t s = 0;
  // Non-blocking where the plugin has flags: the bands' copies then neither wait for the work on
  // stream 0 nor hold it up.
  const gpuplug_status_t st =
      layer_.next_has<&P::stream_create_with_flags>()
          ? layer_.call_next<&P::stream_create_with_flags>(GPUPLUG_STREAM_NON_BLOCKING, &s)
          : layer_.call_next<&P::stream_create>(&s);
  if (st != GPUPLUG_STATUS_SUCCESS) return st;
  stream_ = s;
  out = s;
  return st;
}

gpuplug_status_t GuardBands::write_bands(const Guard& g) {
  std::uint64_t s = 0;
  if (const gpuplug_status_t st = stream(s); st != GPUPLUG_STATUS_SUCCESS) return st;
  const std::uint64_t above = g.base + kBand + g.bytes;
  const bool queued = layer_.next_has<&P::copy_h2d_async>();
  for (const std::uint64_t band : {g.base, above}) {
    const gpuplug_status_t st =
        queued ? layer_.call_next<&P::copy_h2d_async>(band, kPattern.data(), kBand, s)
               : layer_.call_next<&P::copy_h2d>(band, kPattern.data(), kBand);
    if (st != GPUPLUG_STATUS_SUCCESS) return st;
  }
  return layer_.call_next<&P::stream_synchronize>(s);
}

gpuplug_status_t GuardBands::read_bands(const std::vector<const Guard*>& guards,
                                        std::vector<std::uint8_t>& out) {
  out.assign(guards.size() * 2 * kBand, 0);
  if (guards.empty()) return GPUPLUG_STATUS_SUCCESS;
  std::uint64_t s = 0;
  if (const gpuplug_status_t st = stream(s); st != GPUPLUG_STATUS_SUCCESS) return st;
  const bool queued = layer_.next_has<&P::copy_d2h_async>();
  for (std::size_t i = 0; i < guards.size(); ++i) {
    const Guard& g = *guards[i];
    std::uint8_t* dst = out.data() + i * 2 * kBand;
    const std::uint64_t bands[2] = {g.base, g.base + kBand + g.bytes};
    for (int b = 0; b < 2; ++b) {
      const gpuplug_status_t st =
          queued ? layer_.call_next<&P::copy_d2h_async>(dst + b * kBand, bands[b], kBand, s)
                 : layer_.call_next<&P::copy_d2h>(dst + b * kBand, bands[b], kBand);
      if (st != GPUPLUG_STATUS_SUCCESS) {
        // What was queued must land before `out` goes away.
        if (queued) layer_.call_next<&P::stream_synchronize>(s);
        return st;
      }
    }
  }
  return layer_.call_next<&P::stream_synchronize>(s);
}

std::vector<GuardBands::Broken> GuardBands::broken_bands(std::uint64_t ptr, const Guard& g,
                                                         const std::uint8_t* bands) {
  std::vector<Broken> out;
  // The first bad byte in address order, in each band.
  std::size_t below = kBand, above = kBand;
  for (std::size_t i = 0; i < kBand && below == kBand; ++i)
    if (bands[i] != kPattern[i]) below = i;
  for (std::size_t i = 0; i < kBand && above == kBand; ++i)
    if (bands[kBand + i] != kPattern[i]) above = i;
  if (below == kBand && above == kBand) return out;
  const std::string head =
      "guard band broken: " + hex(ptr) + " " +
      describe_allocation(MemoryRecord::Allocation{g.bytes, g.site, g.managed}) +
      ": first bad byte at ";
  if (below != kBand) {
    const std::uint64_t n = kBand - below;
    out.push_back({head + "-" + std::to_string(n) + " (" + std::to_string(n) + bytes_word(n) +
                       " before the start)",
                   true});
  }
  if (above != kBand) {
    const std::uint64_t n = above + 1;
    out.push_back({head + "+" + std::to_string(g.bytes + above) + " (" + std::to_string(n) +
                       bytes_word(n) + " past the end)",
                   false});
  }
  return out;
}

gpuplug_status_t GuardBands::allocate(bool managed, std::uint64_t bytes, const char* site,
                                      std::uint64_t* out) {
  std::lock_guard lock(mutex_);
  constexpr std::uint64_t pad = 2 * kBand;
  std::uint64_t base = 0;
  gpuplug_status_t st = GPUPLUG_STATUS_OUT_OF_MEMORY;
  if (bytes <= std::numeric_limits<std::uint64_t>::max() - pad)
    st = next_alloc(managed, bytes + pad, site, &base);
  if (st == GPUPLUG_STATUS_OUT_OF_MEMORY) {
    // No room for the bands: the allocation the program asked for, unguarded.
    st = next_alloc(managed, bytes, site, out);
    if (st == GPUPLUG_STATUS_SUCCESS) {
      grew(bytes, site != nullptr ? site : "an unnamed site");
      layer_.log(GPUPLUG_LOG_DEBUG,
                 "validate: no room for the guard bands of " + std::to_string(bytes) +
                     " bytes by " + (site != nullptr ? site : "an unnamed site") +
                     ": allocated without them");
    }
    return st;
  }
  if (st != GPUPLUG_STATUS_SUCCESS) return st;
  std::string site_name = site != nullptr ? site : "an unnamed site";
  try {
    Guard g{base, bytes, site_name, managed};
    st = write_bands(g);
    if (st == GPUPLUG_STATUS_SUCCESS) guards_.emplace(base + kBand, std::move(g));
  } catch (...) {
    layer_.call_next<&P::free>(base);
    throw;
  }
  if (st != GPUPLUG_STATUS_SUCCESS) {
    layer_.call_next<&P::free>(base);
    return failed(st, "writing the guard bands of " + std::to_string(bytes) + " bytes by " +
                          site_name);
  }
  band_bytes_ += pad;
  if (managed) band_managed_bytes_ += pad;
  ever_guarded_ = true;
  grew(bytes, site_name);
  if (auto it = sites_.find(site_name); it != sites_.end()) it->second.guarded = true;
  *out = base + kBand;
  return st;
}

void GuardBands::discard(std::uint64_t ptr, std::uint64_t bytes, const char* site) noexcept {
  std::lock_guard lock(mutex_);
  auto it = guards_.find(ptr);
  if (it == guards_.end()) {
    if (layer_.call_next<&P::free>(ptr) == GPUPLUG_STATUS_SUCCESS) {
      try {
        shrank(bytes, site != nullptr ? site : "an unnamed site");
      } catch (...) {  // no memory for the site's name: its figures are the ledger's from now
        figures_lost_ = true;
      }
    }
    return;
  }
  if (layer_.call_next<&P::free>(it->second.base) != GPUPLUG_STATUS_SUCCESS) return;
  shrank(it->second.bytes, it->second.site);
  remember_freed(it->second);
  band_bytes_ -= 2 * kBand;
  if (it->second.managed) band_managed_bytes_ -= 2 * kBand;
  guards_.erase(it);
}

gpuplug_status_t GuardBands::free(std::uint64_t ptr, std::uint64_t bytes, const std::string& site,
                                  std::string& broken) {
  std::lock_guard lock(mutex_);
  auto it = guards_.find(ptr);
  if (it == guards_.end()) {
    const gpuplug_status_t st = layer_.call_next<&P::free>(ptr);
    if (st == GPUPLUG_STATUS_SUCCESS) shrank(bytes, site);
    return st;
  }
  const Guard& g = it->second;
  std::vector<std::uint8_t> bands;
  std::string found;
  if (read_bands({&g}, bands) == GPUPLUG_STATUS_SUCCESS) {
    for (Broken& b : broken_bands(ptr, g, bands.data())) {
      if (b.below ? g.below_reported : g.above_reported) continue;
      if (found.empty()) found = std::move(b.message);
    }
  } else {
    layer_.log(GPUPLUG_LOG_WARNING, "validate: the guard bands of " + hex(ptr) +
                                        " could not be read back before free: not checked");
  }
  const gpuplug_status_t st = layer_.call_next<&P::free>(g.base);
  if (st != GPUPLUG_STATUS_SUCCESS) return st;
  shrank(g.bytes, g.site);
  remember_freed(g);
  band_bytes_ -= 2 * kBand;
  if (g.managed) band_managed_bytes_ -= 2 * kBand;
  guards_.erase(it);
  if (!found.empty()) layer_.log(GPUPLUG_LOG_ERROR, found + " (the allocation was freed)");
  broken = std::move(found);
  return st;
}

std::optional<std::string> GuardBands::describe(std::uint64_t ptr) const {
  std::lock_guard lock(mutex_);
  auto it = guards_.find(ptr);
  if (it == guards_.end()) return std::nullopt;
  const Guard& g = it->second;
  return describe_allocation(MemoryRecord::Allocation{g.bytes, g.site, g.managed});
}

gpuplug_status_t GuardBands::check(std::string& broken) {
  std::lock_guard lock(mutex_);
  if (guards_.empty()) return GPUPLUG_STATUS_SUCCESS;
  std::vector<const Guard*> all;
  all.reserve(guards_.size());
  for (const auto& [ptr, g] : guards_) all.push_back(&g);
  std::vector<std::uint8_t> bands;
  if (const gpuplug_status_t st = read_bands(all, bands); st != GPUPLUG_STATUS_SUCCESS)
    return failed(st, "reading the guard bands back");
  std::size_t fresh = 0;
  std::size_t i = 0;
  for (auto& [ptr, g] : guards_) {
    for (Broken& b : broken_bands(ptr, g, bands.data() + i * 2 * kBand)) {
      bool& reported = b.below ? g.below_reported : g.above_reported;
      if (reported) continue;
      reported = true;
      layer_.log(GPUPLUG_LOG_ERROR, b.message);
      if (fresh++ == 0) broken = std::move(b.message);
    }
    ++i;
  }
  if (fresh > 1)
    broken += " (and " + std::to_string(fresh - 1) + " more guard" + (fresh == 2 ? " band" : " bands") +
              " broken: see the log)";
  return GPUPLUG_STATUS_SUCCESS;
}

gpuplug_status_t GuardBands::scan(std::size_t& broken) {
  std::lock_guard lock(mutex_);
  broken = 0;
  if (guards_.empty()) return GPUPLUG_STATUS_SUCCESS;
  std::vector<const Guard*> all;
  all.reserve(guards_.size());
  for (const auto& [ptr, g] : guards_) all.push_back(&g);
  std::vector<std::uint8_t> bands;
  if (const gpuplug_status_t st = read_bands(all, bands); st != GPUPLUG_STATUS_SUCCESS)
    return failed(st, "reading the guard bands back");
  std::size_t i = 0;
  for (const auto& [ptr, g] : guards_)
    broken += broken_bands(ptr, g, bands.data() + 2 * kBand * i++).size();
  return GPUPLUG_STATUS_SUCCESS;
}

}  // namespace gpuplug::detail::layers
