// SPDX-License-Identifier: Apache-2.0
// GuardBands (core-private): the validate layer's guard bands around device and managed
// allocations, the checks that read them back, and the ledger figures in the user's sizes
// (docs/layers.md, "Guard bands").
#pragma once

#include <gpuplug/abi.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "layers/layer_support.hpp"

namespace gpuplug::detail::layers {

/// The guard bands of one backend's validate layer. alloc and alloc_managed ask the level below
/// for `bytes + 2 * kBand` and hand out base + kBand; the kBand bytes on each side hold
/// band_pattern(i) at band offset i, written and read back with the level below's copies on a
/// stream of the layer's own (made on first use, non-blocking where the plugin has stream flags),
/// so that no device pointer is ever dereferenced on the host. When the padded size does not fit
/// (OUT_OF_MEMORY) but the plain one does, the allocation is made without bands.
///
/// Each broken band is reported once (check() and free()); scan() counts every broken band.
/// The level below's ledger sees the padded allocations: ledger_stats, ledger_snapshot and
/// sweep take the bands out again, so that the figures above the layer are the user's.
///
/// Thread-safety: every member may run concurrently with every other; one mutex orders them, and
/// is held across the calls to the level below that allocate, free, read bands or read the
/// ledger, so that the band bytes it subtracts always match what the ledger holds.
class GuardBands {
 public:
  static constexpr std::uint64_t kBand = 256;
  /// The byte at offset i of each band.
  static constexpr std::uint8_t band_pattern(std::size_t i) noexcept {
    return static_cast<std::uint8_t>(0xFDu ^ (i & 0xFFu));
  }

  explicit GuardBands(const LayerBase& layer) : layer_(layer) {}
  /// Destroys the layer's stream, if it made one (the guarded allocations are the plugin's to
  /// sweep).
  ~GuardBands();
  GuardBands(const GuardBands&) = delete;
  GuardBands& operator=(const GuardBands&) = delete;

  /// alloc (or alloc_managed) of `bytes` under `site`, padded; *out is the user's pointer.
  gpuplug_status_t allocate(bool managed, std::uint64_t bytes, const char* site,
                            std::uint64_t* out);
  /// Frees what allocate returned (`bytes` at `site`) without checking its bands (the caller's
  /// record could not grow). Never throws.
  void discard(std::uint64_t ptr, std::uint64_t bytes, const char* site) noexcept;
  /// free of `ptr`, the start of a live allocation of `bytes` made at `site` (the layer's
  /// record): reads its bands back, then frees it (its base when guarded). On success `broken` is
  /// the message for a band found broken that was not reported before (empty when none); on
  /// failure the allocation stays guarded.
  gpuplug_status_t free(std::uint64_t ptr, std::uint64_t bytes, const std::string& site,
                        std::string& broken);
  /// "(allocated by load, 64 bytes)" when `ptr` is a guarded allocation's user pointer.
  std::optional<std::string> describe(std::uint64_t ptr) const;

  /// After a successful synchronize: reads every live band back and logs each newly broken one
  /// (an error); `broken` is the first one's message (naming how many more), empty when none.
  /// A failed read-back is returned with its message set.
  gpuplug_status_t check(std::string& broken);
  /// How many bands are broken now, reported or not (nothing is logged or marked).
  gpuplug_status_t scan(std::size_t& broken);

  /// After a successful import_memory of `bytes` at `site`: live bytes grew, which the peaks
  /// follow.
  void imported(std::uint64_t bytes, const std::string& site) noexcept;
  /// The level below's ledger slots, with the bands taken out (validate_redzones_ledger.cpp).
  gpuplug_status_t ledger_stats(gpuplug_ledger_stats_t* out);
  gpuplug_status_t reset_peak();
  gpuplug_status_t sweep(gpuplug_ledger_stats_t* swept);
  gpuplug_status_t scope_begin(std::uint64_t* scope);
  gpuplug_status_t scope_end(std::uint64_t scope, std::uint64_t* peak_bytes,
                             std::int64_t* net_bytes);
  /// The level below's ledger_snapshot with each guarded allocation at its user pointer and
  /// size, and the totals and sites' live bytes without the bands; truncated to `size` as the
  /// slot says; returns the full length (0 on failure).
  std::size_t snapshot(char* buf, std::size_t size);

 private:
  struct Guard {
    std::uint64_t base = 0;   // what the level below allocated: user pointer - kBand
    std::uint64_t bytes = 0;  // the user's size
    std::string site;
    bool managed = false;
    bool below_reported = false;  // the band before the start was reported broken
    bool above_reported = false;  // the band past the end
  };
  /// One band read back and found broken: its message, and whether it had been reported.
  struct Broken {
    std::string message;
    bool below = false;
  };

  gpuplug_status_t next_alloc(bool managed, std::uint64_t bytes, const char* site,
                              std::uint64_t* out) const;
  // These three return the level below's status and set no message: the caller names what
  // failed (failed()) only when it returns the failure.
  /// The layer's stream, made on first use (lock held).
  gpuplug_status_t stream(std::uint64_t& out);
  /// Writes both bands of `g` and waits for them (lock held).
  gpuplug_status_t write_bands(const Guard& g);
  /// Reads both bands of each guard into `out` (2 * kBand bytes each: below, then above) and
  /// waits for them (lock held).
  gpuplug_status_t read_bands(const std::vector<const Guard*>& guards,
                              std::vector<std::uint8_t>& out);
  /// The broken bands of `g` in its 2 * kBand bytes read back at `bands`.
  static std::vector<Broken> broken_bands(std::uint64_t ptr, const Guard& g,
                                          const std::uint8_t* bands);
  /// Fails with `status` naming what the layer was doing, for a failure of its own copies.
  gpuplug_status_t failed(gpuplug_status_t status, const std::string& doing) const;
  /// The user's live bytes grew or shrank by `bytes` at `site`: the peaks, the sites' and the open
  /// scopes' follow (lock held).
  void grew(std::uint64_t bytes, const std::string& site) noexcept;
  void shrank(std::uint64_t bytes, const std::string& site) noexcept;
  /// Takes the bands out of counters read from the level below (lock held).
  void to_user(gpuplug_ledger_stats_t& s) const noexcept;

  /// One call site's live bytes and peak in the user's sizes; `guarded` once a guarded
  /// allocation was made there (until then the ledger's own peak is the user's).
  struct SiteFigures {
    std::uint64_t live = 0;
    std::uint64_t peak = 0;
    bool guarded = false;
  };
  /// An open ledger scope: the user's live bytes when it began, and the highest since.
  struct ScopeFigures {
    std::uint64_t start = 0;
    std::uint64_t high = 0;
  };

  const LayerBase& layer_;
  mutable std::mutex mutex_;
  std::map<std::uint64_t, Guard> guards_;  // by user pointer
  std::uint64_t band_bytes_ = 0;           // 2 * kBand per live guard
  std::uint64_t band_managed_bytes_ = 0;   // of those, managed
  // The ledger's live bytes in the user's sizes (device, managed and imported memory: every
  // allocation of them passes this layer), and how high they went; by site; per open scope.
  std::uint64_t user_live_ = 0;
  std::uint64_t user_peak_ = 0;
  bool ever_guarded_ = false;  // until then the ledger's own peak is the user's
  bool figures_lost_ = false;  // no memory to follow a site: the sites' peaks are the ledger's
  std::map<std::string, SiteFigures, std::less<>> sites_;
  // The bases and user sizes of the last kRecentFreed guarded allocations freed: their events in
  // the ledger's history are shown at the user's pointer and size too.
  static constexpr std::size_t kRecentFreed = 4096;
  std::deque<std::pair<std::uint64_t, std::uint64_t>> recent_freed_;
  /// Remembers a guarded allocation freed (lock held; without memory it is not remembered).
  void remember_freed(const Guard& g) noexcept;
  std::map<std::uint64_t, ScopeFigures> scopes_;
  std::optional<std::uint64_t> stream_;    // the layer's stream, once made
};

}  // namespace gpuplug::detail::layers
