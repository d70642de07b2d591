// SPDX-License-Identifier: Apache-2.0
// The page of `gpuplug mem SNAPSHOT --html OUT`: one self-contained file (inline SVG and CSS, no
// script, nothing fetched), the vendor-neutral counterpart of PyTorch's memory viewer.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
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

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string site_label(const std::string& site) { return site.empty() ? "<no site>" : site; }

/// Live bytes per site after each history event (column i: after event i), reconstructed
/// backwards from the snapshot's per-site live bytes, which the history ends at (both are read
/// under the ledger's one lock). Column 0 is the state before the first kept event.
struct Timeline {
  std::vector<std::string> sites;                // bands, bottom first: largest peak first
  std::vector<std::vector<std::uint64_t>> live;  // [site][column]
  std::vector<std::uint64_t> total;              // [column]
  std::size_t peak_column = 0;
};

Timeline timeline(const MemorySnapshot& s) {
  std::map<std::string, std::size_t> index;
  Timeline t;
  const auto site_index = [&](const std::string& site) {
    const auto [it, fresh] = index.try_emplace(site, t.sites.size());
    if (fresh) t.sites.push_back(site);
    return it->second;
  };
  for (const SiteMemory& m : s.sites) site_index(m.site);
  for (const MemoryEvent& e : s.history) site_index(e.site);
  const std::size_t columns = s.history.size() + 1;
  t.live.assign(t.sites.size(), std::vector<std::uint64_t>(columns, 0));
  for (const SiteMemory& m : s.sites) t.live[index[m.site]][columns - 1] = m.live_bytes;
  for (std::size_t i = s.history.size(); i-- > 0;) {
    const MemoryEvent& e = s.history[i];
    for (auto& row : t.live) row[i] = row[i + 1];
    std::uint64_t& v = t.live[index[e.site]][i];
    // Undo the event. Clamped: a file edited by hand must not wrap around.
    v = e.is_free ? v + e.bytes : v - std::min(v, e.bytes);
  }
  // Bottom band first: the site with the highest peak in the window.
  std::vector<std::size_t> order(t.sites.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto peak = [&](std::size_t i) {
    return *std::max_element(t.live[i].begin(), t.live[i].end());
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return peak(a) > peak(b); });
  Timeline sorted;
  for (const std::size_t i : order) {
    if (peak(i) == 0) continue;  // a site that never held anything in the window has no band
    sorted.sites.push_back(t.sites[i]);
    sorted.live.push_back(t.live[i]);
  }
  sorted.total.assign(columns, 0);
  for (const auto& row : sorted.live)
    for (std::size_t c = 0; c < columns; ++c) sorted.total[c] += row[c];
  sorted.peak_column = static_cast<std::size_t>(
      std::max_element(sorted.total.begin(), sorted.total.end()) - sorted.total.begin());
  return sorted;
}

// A qualitative palette (colour-blind friendly, Okabe-Ito), repeated for many sites.
constexpr const char* palette[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7",
                                   "#56B4E9", "#D55E00", "#F0E442", "#999999"};

void write_svg(const Timeline& t, std::ostream& os) {
  constexpr double width = 960, height = 320, left = 70, right = 10, top = 20, bottom = 30;
  const std::size_t columns = t.total.empty() ? 1 : t.total.size();
  const std::uint64_t top_bytes = std::max<std::uint64_t>(
      1, t.total.empty() ? 1 : *std::max_element(t.total.begin(), t.total.end()));
  const double step = (width - left - right) / static_cast<double>(columns);
  const auto x = [&](std::size_t c) { return left + step * static_cast<double>(c); };
  const auto y = [&](std::uint64_t b) {
    return top + (height - top - bottom) *
                     (1.0 - static_cast<double>(b) / static_cast<double>(top_bytes));
  };
  os << "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width
     << "\" height=\"" << height << "\" viewBox=\"0 0 " << width << " " << height
     << "\" role=\"img\" aria-label=\"live bytes per call site over the history\">\n";
  os << "<line x1=\"" << left << "\" y1=\"" << y(0) << "\" x2=\"" << width - right << "\" y2=\""
     << y(0) << "\" stroke=\"#444\"/>\n";
  os << "<text x=\"" << left - 6 << "\" y=\"" << y(top_bytes) + 4 << "\" text-anchor=\"end\">"
     << short_bytes(top_bytes) << "</text>\n";
  os << "<text x=\"" << left - 6 << "\" y=\"" << y(0) << "\" text-anchor=\"end\">0</text>\n";
  std::vector<std::uint64_t> base(columns, 0);
  for (std::size_t s = 0; s < t.sites.size(); ++s) {
    // A step function: each column holds its value across its width; the band is the area
    // between the running sum below it and that sum plus this site.
    std::string d;
    for (std::size_t c = 0; c < columns; ++c) {
      const std::uint64_t v = base[c] + t.live[s][c];
      d += (c == 0 ? "M" : "L") + fixed(x(c)) + " " + fixed(y(v)) + " L" + fixed(x(c + 1)) + " " +
           fixed(y(v)) + " ";
    }
    for (std::size_t c = columns; c-- > 0;) {
      d += "L" + fixed(x(c + 1)) + " " + fixed(y(base[c])) + " L" + fixed(x(c)) + " " +
           fixed(y(base[c])) + " ";
    }
    d += "Z";
    const std::string label = xml_text(site_label(t.sites[s]));
    os << "<path class=\"band\" data-site=\"" << label << "\" fill=\""
       << palette[s % std::size(palette)] << "\" d=\"" << d << "\"><title>" << label
       << "</title></path>\n";
    for (std::size_t c = 0; c < columns; ++c) base[c] += t.live[s][c];
  }
  if (!t.total.empty()) {
    const double px = x(t.peak_column) + step / 2;
    os << "<line id=\"peak\" x1=\"" << fixed(px) << "\" y1=\"" << top << "\" x2=\"" << fixed(px)
       << "\" y2=\"" << y(0) << "\" stroke=\"#c00\" stroke-dasharray=\"4 3\"/>\n";
    os << "<text x=\"" << fixed(std::min(px + 4, width - 160)) << "\" y=\"" << top + 12
       << "\" fill=\"#c00\">peak " << short_bytes(t.total[t.peak_column]) << "</text>\n";
  }
  os << "<text x=\"" << left << "\" y=\"" << height - 8
     << "\">older events &#8594; newer (one step per alloc or free)</text>\n";
  os << "</svg>\n";
}

}  // namespace

void write_mem_page(const MemorySnapshot& s, std::string_view source, std::ostream& os) {
  const Timeline t = timeline(s);
  os << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'\">\n<title>gpuplug memory: "
     << xml_text(s.backend)
     << "</title>\n<style>\n"
        "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\n"
        "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;"
        "padding:2px 8px;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
        ".swatch{display:inline-block;width:.9em;height:.9em;margin-right:.4em;"
        "vertical-align:middle}\nsvg text{font-size:12px;fill:#333}\n</style></head><body>\n";
  os << "<h1>Memory of " << xml_text(s.backend) << "</h1>\n<p>" << xml_text(std::string(source))
     << ": " << s.totals.live_count << " live allocations, " << short_bytes(s.totals.live_bytes)
     << " (peak " << short_bytes(s.totals.peak_bytes) << ")";
  if (s.device_memory_limit) os << "; device_memory_limit " << short_bytes(*s.device_memory_limit);
  if (s.device)
    os << "; device " << short_bytes(s.device->free_bytes) << " free of "
       << short_bytes(s.device->total_bytes);
  os << ".</p>\n";
  if (!s.complete) os << "<p><strong>Partial:</strong> " << xml_text(s.partial_reason) << "</p>\n";

  os << "<h2>Live bytes per call site</h2>\n";
  if (s.history_capacity == 0) {
    os << "<p id=\"no-history\">No history in this snapshot: create the backend with "
          "<code>memory_history=N</code> to keep the last N events. The chart shows the "
          "snapshot's moment only.</p>\n";
  } else {
    os << "<p>The last " << s.history.size() << " events";
    if (s.history_dropped != 0) os << " (" << s.history_dropped << " older ones dropped)";
    os << "; the dashed line marks the highest total in this window.</p>\n";
  }
  write_svg(t, os);
  os << "<table id=\"legend\"><tr><th>site</th><th>live now</th><th>peak</th></tr>\n";
  for (std::size_t i = 0; i < t.sites.size(); ++i) {
    std::uint64_t live = 0, peak = 0;
    for (const SiteMemory& m : s.sites) {
      if (m.site == t.sites[i]) {
        live = m.live_bytes;
        peak = m.peak_bytes;
      }
    }
    os << "<tr><td><span class=\"swatch\" style=\"background:" << palette[i % std::size(palette)]
       << "\"></span>" << xml_text(site_label(t.sites[i])) << "</td><td class=\"n\">"
       << short_bytes(live) << "</td><td class=\"n\">" << short_bytes(peak) << "</td></tr>\n";
  }
  os << "</table>\n";

  if (!s.op_scratch.empty()) {
    os << "<h2>OpCache scratch</h2>\n<table id=\"scratch\"><tr><th>cache</th><th>tag</th>"
          "<th>live</th><th>retired</th></tr>\n";
    for (const ScratchMemory& m : s.op_scratch) {
      os << "<tr><td>" << xml_text(m.cache) << "</td><td>" << xml_text(m.tag)
         << "</td><td class=\"n\">" << short_bytes(m.live_bytes) << "</td><td class=\"n\">"
         << short_bytes(m.retired_bytes) << " in " << m.retired_count << "</td></tr>\n";
    }
    os << "</table>\n";
  }

  os << "<h2>Live allocations</h2>\n<table id=\"allocations\"><tr><th>address</th><th>bytes</th>"
        "<th>kind</th><th>site</th><th>sequence</th></tr>\n";
  for (const LiveAllocation& a : s.allocations) {
    os << "<tr><td><code>" << hex(a.ptr.value) << "</code></td><td class=\"n\">" << a.bytes
       << "</td><td>" << (a.kind == AllocKind::managed    ? "managed"
                                : a.kind == AllocKind::external ? "external"
                                                                : "device") << "</td><td>"
       << xml_text(site_label(a.site)) << "</td><td class=\"n\">" << a.sequence << "</td></tr>\n";
  }
  os << "</table>\n<p><small>Written by <code>gpuplug mem</code>; snapshot schema " << s.schema
     << ".</small></p>\n</body></html>\n";
}

}  // namespace gpuplug::tool
