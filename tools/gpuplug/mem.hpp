// SPDX-License-Identifier: Apache-2.0
// `gpuplug mem`: a memory snapshot's summary table, the diff of two snapshots, and its page.
#pragma once

#include <gpuplug/memory.hpp>
#include <map>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

namespace gpuplug::tool {

/// Each site's live bytes by kind, from the snapshot's allocations. A site whose allocations add
/// up to less than its live bytes (a partial snapshot has none) has the rest counted as device.
std::map<std::string, MemoryKinds> live_by_site_and_kind(const MemorySnapshot& s);

/// "device", "managed" or "external" when one kind holds it all, "device 1.0 MiB + managed
/// 512.0 KiB" when several do, "-" when nothing is live.
std::string kinds_text(const MemoryKinds& k);

/// "3.4 MiB (2.4 MiB device, 1.0 MiB managed": the live total and its kinds, external only when
/// some is; the caller closes the parenthesis (the summary adds the peak).
std::string live_text(const MemorySnapshot& s);

/// `gpuplug mem SNAPSHOT.json [--html OUT.html]`, `gpuplug mem diff A.json B.json`. Exit 0;
/// 2 for a usage error or a file that is not a snapshot (named, with the reason).
int run_mem(std::span<const std::string_view> args);

/// The summary table: totals (device, managed and external apart), then the sites by live
/// bytes with peak, count and kind, the OpCache scratch of every cache, and the history kept.
void print_mem_summary(const MemorySnapshot& s, std::ostream& os);

/// Which sites grew or shrank from `a` to `b` (live bytes and counts), largest change first.
void print_mem_diff(const MemorySnapshot& a, const MemorySnapshot& b, std::ostream& os);

/// One self-contained HTML page (inline SVG and CSS, no script, nothing fetched): the chart of
/// live bytes per site and kind over time (mem_chart.hpp), its legend, the OpCache scratch of
/// every cache and the live allocations (mem_page.cpp).
void write_mem_page(const MemorySnapshot& s, std::string_view source, std::ostream& os);

}  // namespace gpuplug::tool
