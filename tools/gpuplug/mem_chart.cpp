// SPDX-License-Identifier: Apache-2.0
// The chart of `gpuplug mem --html`: live bytes per call site and kind, reconstructed over the
// history's window and drawn on a time axis, as inline SVG (no script, nothing fetched).
#include "mem_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gpuplug/support/text.hpp"
#include "mem.hpp"
#include "results.hpp"  // xml_text

namespace gpuplug::tool {

namespace {

using support::short_bytes;

std::string fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

int kind_rank(AllocKind k) { return k == AllocKind::device ? 0 : k == AllocKind::managed ? 1 : 2; }

/// Live bytes per band in each state of the window: state 0 is before the first kept event,
/// state i the one event i - 1 left. Reconstructed backwards from the snapshot's live bytes per
/// site and kind, which the history ends at (both are read under the ledger's one lock).
struct Timeline {
  std::vector<ChartBand> bands;                  // bottom first
  std::vector<std::vector<std::uint64_t>> live;  // [band][state]
  std::vector<std::uint64_t> total;              // [state]
  std::size_t peak_state = 0;
};

Timeline timeline(const MemorySnapshot& s) {
  using Key = std::pair<std::string, int>;  // site, kind
  std::map<Key, std::size_t> index;
  std::vector<Key> keys;
  const auto band_of = [&](const std::string& site, AllocKind kind) {
    const auto [it, fresh] = index.try_emplace(Key{site, static_cast<int>(kind)}, keys.size());
    if (fresh) keys.push_back(it->first);
    return it->second;
  };
  const std::size_t states = s.history.size() + 1;
  std::vector<std::vector<std::uint64_t>> live;
  const auto grow = [&] {
    while (live.size() < keys.size()) live.emplace_back(states, 0);
  };
  for (const auto& [site, k] : live_by_site_and_kind(s)) {
    const std::pair<AllocKind, std::uint64_t> parts[] = {{AllocKind::device, k.device},
                                                         {AllocKind::managed, k.managed},
                                                         {AllocKind::external, k.external}};
    for (const auto& [kind, bytes] : parts) {
      if (bytes == 0) continue;
      const std::size_t b = band_of(site, kind);
      grow();
      live[b][states - 1] = bytes;
    }
  }
  for (const MemoryEvent& e : s.history) band_of(e.site, e.kind);
  grow();
  for (std::size_t i = s.history.size(); i-- > 0;) {
    const MemoryEvent& e = s.history[i];
    for (auto& row : live) row[i] = row[i + 1];
    std::uint64_t& v = live[index[Key{e.site, static_cast<int>(e.kind)}]][i];
    // Undo the event. Clamped: a file edited by hand must not wrap around.
    v = e.is_free ? v + e.bytes : v - std::min(v, e.bytes);
  }
  // Device memory at the bottom (what the limit counts), then managed, then external; within a
  // kind, the band with the highest peak in the window first.
  std::vector<std::uint64_t> peak(keys.size());
  for (std::size_t b = 0; b < keys.size(); ++b)
    peak[b] = *std::max_element(live[b].begin(), live[b].end());
  std::vector<std::size_t> order(keys.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (keys[a].second != keys[b].second)
      return kind_rank(static_cast<AllocKind>(keys[a].second)) <
             kind_rank(static_cast<AllocKind>(keys[b].second));
    return peak[a] > peak[b];
  });
  Timeline t;
  for (const std::size_t i : order) {
    if (peak[i] == 0) continue;  // held nothing in the window: no band
    t.bands.push_back({keys[i].first, static_cast<AllocKind>(keys[i].second), {}});
    t.live.push_back(std::move(live[i]));
  }
  const std::vector<std::string> colours = band_colours(t.bands.size());
  for (std::size_t b = 0; b < t.bands.size(); ++b) t.bands[b].colour = colours[b];
  t.total.assign(states, 0);
  for (const auto& row : t.live)
    for (std::size_t c = 0; c < states; ++c) t.total[c] += row[c];
  t.peak_state =
      static_cast<std::size_t>(std::max_element(t.total.begin(), t.total.end()) - t.total.begin());
  return t;
}

/// The time axis: a step of 1, 2 or 5 times a power of ten that gives at most `most` ticks over
/// `span` nanoseconds, and the unit its labels are written in.
struct TimeTicks {
  double step_ns = 1;
  const char* unit = "ns";
  double unit_ns = 1;
};

TimeTicks time_ticks(double span_ns, int most) {
  TimeTicks t;
  const double rough = std::max(span_ns / most, 1.0);
  const double power = std::pow(10.0, std::floor(std::log10(rough)));
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    t.step_ns = m * power;
    if (t.step_ns >= rough) break;
  }
  // The unit of the span, so that labels stay short ("12.5 ms", not "12500000 ns").
  const std::pair<const char*, double> units[] = {{"s", 1e9}, {"ms", 1e6}, {"µs", 1e3}};
  for (const auto& [name, ns] : units) {
    if (span_ns >= 10 * ns || (span_ns >= ns && t.step_ns >= ns / 10)) {
      t.unit = name;
      t.unit_ns = ns;
      break;
    }
  }
  return t;
}

std::string time_label(double ns, const TimeTicks& t) {
  char buf[32];
  const double v = ns / t.unit_ns;
  // As many decimals as the step needs (steps are 1, 2 or 5 times a power of ten).
  const int decimals =
      std::clamp(static_cast<int>(-std::floor(std::log10(t.step_ns / t.unit_ns) + 1e-9)), 0, 6);
  std::snprintf(buf, sizeof buf, "%.*f %s", decimals, v, t.unit);
  return buf;
}

// The layout, in SVG units: the plot holds the bands and the two markers' lines only; every
// label sits in a margin (the peak's in the lane above, the limit's in the right margin, the
// byte scale in the left one, the time axis below), so no label covers a band or another label.
constexpr double width = 960, height = 360;
constexpr double left = 80, right = 110, top = 36, bottom = 56;
constexpr double char_width = 7.2;  // an upper bound for 12px text, to place labels apart

}  // namespace

const char* kind_name(AllocKind k) {
  return k == AllocKind::managed ? "managed" : k == AllocKind::external ? "external" : "device";
}

std::vector<ChartBand> write_mem_chart(const MemorySnapshot& s, std::ostream& os) {
  const Timeline t = timeline(s);
  const std::size_t states = t.total.size();
  const std::uint64_t highest = *std::max_element(t.total.begin(), t.total.end());
  // The byte scale reaches the limit, so that how close the run came to it shows.
  const std::uint64_t top_bytes =
      std::max<std::uint64_t>({1, highest, s.device_memory_limit.value_or(0)});
  const double plot_w = width - left - right;
  const double y0 = height - bottom;
  const auto y = [&](std::uint64_t b) {
    return top + (y0 - top) * (1.0 - static_cast<double>(b) / static_cast<double>(top_bytes));
  };
  // The time domain: the window's first event to its last, with a little room at each end for
  // the state before the first event and after the last. xs[i] is where state i begins.
  const bool timed = !s.history.empty();
  double t0 = 0, t1 = 1;
  if (timed) {
    const double first = static_cast<double>(s.history.front().time_ns);
    const double last = static_cast<double>(s.history.back().time_ns);
    const double pad = std::max((last - first) / 40, 1.0);
    t0 = std::max(0.0, first - pad);
    t1 = last + pad;
  }
  const auto x_of_time = [&](double ns) { return left + plot_w * (ns - t0) / (t1 - t0); };
  std::vector<double> xs(states + 1);
  xs[0] = left;
  // Kept in order and in the plot: a file edited by hand may have its times out of order.
  for (std::size_t i = 1; i < states; ++i) {
    xs[i] = std::clamp(x_of_time(static_cast<double>(s.history[i - 1].time_ns)), xs[i - 1],
                       left + plot_w);
  }
  xs[states] = left + plot_w;

  os << "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width
     << "\" height=\"" << height << "\" viewBox=\"0 0 " << width << " " << height
     << "\" role=\"img\" aria-label=\"live bytes per call site and kind over time\">\n"
        "<defs><pattern id=\"hatch\" patternUnits=\"userSpaceOnUse\" width=\"6\" height=\"6\">"
        "<path d=\"M0 6L6 0M-1 1L1 -1M5 7L7 5\" stroke=\"#fff\" stroke-width=\"1.6\"/>"
        "</pattern></defs>\n";
  std::vector<std::uint64_t> base(states, 0);
  for (std::size_t b = 0; b < t.bands.size(); ++b) {
    // A step function: each state holds its value from its start to the next one's; the band
    // is the area between the running sum below it and that sum plus this band.
    std::string d;
    for (std::size_t c = 0; c < states; ++c) {
      const std::string yv = fixed(y(base[c] + t.live[b][c]));
      d +=
          (c == 0 ? "M" : "L") + fixed(xs[c]) + " " + yv + " L" + fixed(xs[c + 1]) + " " + yv + " ";
    }
    for (std::size_t c = states; c-- > 0;) {
      const std::string yb = fixed(y(base[c]));
      d += "L" + fixed(xs[c + 1]) + " " + yb + " L" + fixed(xs[c]) + " " + yb + " ";
    }
    d += "Z";
    const ChartBand& band = t.bands[b];
    const std::string label = xml_text(band.site.empty() ? "<no site>" : band.site);
    os << "<path class=\"band\" data-site=\"" << label << "\" data-kind=\"" << kind_name(band.kind)
       << "\" fill=\"" << band.colour << "\" d=\"" << d << "\"><title>" << label << " ("
       << kind_name(band.kind) << ")</title></path>\n";
    // Managed and external memory is hatched: the limit does not count it.
    if (band.kind != AllocKind::device)
      os << "<path class=\"hatch\" fill=\"url(#hatch)\" d=\"" << d << "\"/>\n";
    for (std::size_t c = 0; c < states; ++c) base[c] += t.live[b][c];
  }

  // The byte scale (left margin) and the baseline.
  os << "<line x1=\"" << left << "\" y1=\"" << y0 << "\" x2=\"" << left + plot_w << "\" y2=\"" << y0
     << "\" stroke=\"#444\"/>\n";
  for (const std::uint64_t v : {top_bytes, top_bytes / 2}) {
    os << "<line x1=\"" << left - 4 << "\" y1=\"" << fixed(y(v)) << "\" x2=\"" << left << "\" y2=\""
       << fixed(y(v)) << "\" stroke=\"#444\"/>\n<text class=\"scale\" x=\"" << left - 6 << "\" y=\""
       << fixed(y(v) + 4) << "\" text-anchor=\"end\">" << short_bytes(v) << "</text>\n";
  }
  os << "<text class=\"scale\" x=\"" << left - 6 << "\" y=\"" << y0
     << "\" text-anchor=\"end\">0</text>\n";

  // The time axis (below the plot).
  if (timed) {
    const TimeTicks ticks = time_ticks(t1 - t0, static_cast<int>(plot_w / 110));
    for (double v = std::ceil(t0 / ticks.step_ns) * ticks.step_ns; v <= t1; v += ticks.step_ns) {
      const double x = x_of_time(v);
      os << "<line x1=\"" << fixed(x) << "\" y1=\"" << y0 << "\" x2=\"" << fixed(x) << "\" y2=\""
         << y0 + 4 << "\" stroke=\"#444\"/>\n<text class=\"tick\" x=\"" << fixed(x) << "\" y=\""
         << y0 + 20 << "\" text-anchor=\"middle\">" << time_label(v, ticks) << "</text>\n";
    }
    os << "<text class=\"axis\" x=\"" << left + plot_w / 2 << "\" y=\"" << height - 10
       << "\" text-anchor=\"middle\">time since the backend was made (" << ticks.unit
       << "; one step per alloc or free)</text>\n";
  } else {
    os << "<text class=\"axis\" x=\"" << left + plot_w / 2 << "\" y=\"" << height - 10
       << "\" text-anchor=\"middle\">the snapshot's moment (no history)</text>\n";
  }

  // The limit: a line across the plot, its label in the right margin.
  if (s.device_memory_limit) {
    const double ly = y(*s.device_memory_limit);
    os << "<line id=\"limit\" x1=\"" << left << "\" y1=\"" << fixed(ly) << "\" x2=\""
       << left + plot_w << "\" y2=\"" << fixed(ly) << "\" stroke=\"#000\" stroke-width=\"1.5\"/>\n"
       << "<text id=\"limit-label\" x=\"" << left + plot_w + 6 << "\" y=\"" << fixed(ly + 4)
       << "\">limit " << short_bytes(*s.device_memory_limit)
       << "<title>device_memory_limit (device memory only)</title></text>\n";
  }

  // The peak: a dashed line through its state, the label in the lane above the plot, kept
  // inside the plot's width (it ends at the line when there is no room after it).
  const double px = (xs[t.peak_state] + xs[t.peak_state + 1]) / 2;
  const std::string peak_text = "peak " + short_bytes(t.total[t.peak_state]);
  const double text_w = char_width * static_cast<double>(peak_text.size());
  const bool after = px + 4 + text_w <= left + plot_w;
  os << "<line id=\"peak\" x1=\"" << fixed(px) << "\" y1=\"" << top - 8 << "\" x2=\"" << fixed(px)
     << "\" y2=\"" << y0 << "\" stroke=\"#c00\" stroke-dasharray=\"4 3\"/>\n"
     << "<text id=\"peak-label\" x=\"" << fixed(after ? px + 4 : std::max(left, px - 4))
     << "\" y=\"" << top - 12 << "\" text-anchor=\""
     << (after || px - 4 - text_w < left ? "start" : "end") << "\" fill=\"#c00\">" << peak_text
     << "</text>\n";
  os << "</svg>\n";
  return t.bands;
}

}  // namespace gpuplug::tool
