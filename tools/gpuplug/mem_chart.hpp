// SPDX-License-Identifier: Apache-2.0
// The chart of `gpuplug mem --html`: live bytes per call site and kind over time, as inline SVG,
// and the colours of its bands (mem_chart.cpp, mem_colours.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <gpuplug/memory.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace gpuplug::tool {

/// One band of the chart: a call site's memory of one kind.
struct ChartBand {
  std::string site;
  AllocKind kind = AllocKind::device;
  std::string colour;  // "#0072B2"
};

/// "device", "managed" or "external".
const char* kind_name(AllocKind k);

/// Writes the chart of `s` (an <svg id="timeline">): one band per site and kind that held memory
/// in the history's window (device bands at the bottom, then managed, then external, hatched,
/// since device_memory_limit counts device memory only), stacked over a time axis read from the
/// events' time_ns, the peak and the limit marked, every label outside the plot. Returns the
/// bands, bottom first, for the legend.
std::vector<ChartBand> write_mem_chart(const MemorySnapshot& s, std::ostream& os);

/// `n` colours as "#RRGGBB", pairwise distinct for any n: the Okabe-Ito palette (colour-blind
/// friendly) first, then golden-angle hues in OKLCH at three lightnesses, each kept only if it
/// lies at least a threshold from every colour chosen before in OKLab (0.08 for the first 20
/// colours; lowered only when no hue is that far, and never to a colour already chosen).
std::vector<std::string> band_colours(std::size_t n);

}  // namespace gpuplug::tool
