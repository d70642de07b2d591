// SPDX-License-Identifier: Apache-2.0
// `gpuplug mem`: a memory snapshot's summary table, the diff of two snapshots, and its page.
#pragma once

#include <gpuplug/memory.hpp>
#include <ostream>
#include <span>
#include <string_view>

namespace gpuplug::tool {

/// `gpuplug mem SNAPSHOT.json [--html OUT.html]`, `gpuplug mem diff A.json B.json`. Exit 0;
/// 2 for a usage error or a file that is not a snapshot (named, with the reason).
int run_mem(std::span<const std::string_view> args);

/// The summary table: totals, then the sites by live bytes with peak and count, the OpCache
/// scratch, and the history kept.
void print_mem_summary(const MemorySnapshot& s, std::ostream& os);

/// Which sites grew or shrank from `a` to `b` (live bytes and counts), largest change first.
void print_mem_diff(const MemorySnapshot& a, const MemorySnapshot& b, std::ostream& os);

/// One self-contained HTML page (inline SVG and CSS, no script, nothing fetched): a stacked
/// timeline of live bytes per site over the history, the peak marked, and the live allocations
/// (mem_page.cpp).
void write_mem_page(const MemorySnapshot& s, std::string_view source, std::ostream& os);

}  // namespace gpuplug::tool
