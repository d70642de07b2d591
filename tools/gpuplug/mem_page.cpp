// SPDX-License-Identifier: Apache-2.0
// The page of `gpuplug mem SNAPSHOT --html OUT`: one self-contained file (inline SVG and CSS, no
// script, nothing fetched), the vendor-neutral counterpart of PyTorch's memory viewer.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "gpuplug/support/text.hpp"
#include "mem.hpp"
#include "mem_chart.hpp"
#include "results.hpp"  // xml_text

namespace gpuplug::tool {

namespace {

using support::short_bytes;

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string site_label(const std::string& site) { return site.empty() ? "<no site>" : site; }

}  // namespace

void write_mem_page(const MemorySnapshot& s, std::string_view source, std::ostream& os) {
  os << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'\">\n<title>gpuplug memory: "
     << xml_text(s.backend)
     << "</title>\n<style>\n"
        "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\n"
        "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;"
        "padding:2px 8px;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
        ".swatch{display:inline-block;width:.9em;height:.9em;margin-right:.4em;"
        "vertical-align:middle}\n.swatch.hatched{background-image:repeating-linear-gradient(45deg,"
        "transparent 0 2px,#fff 2px 3.5px)}\nsvg text{font-size:12px;fill:#333}\n"
        "</style></head><body>\n";
  os << "<h1>Memory of " << xml_text(s.backend) << "</h1>\n<p>" << xml_text(std::string(source))
     << ": " << s.totals.live_count << " live allocations, " << live_text(s) << "; peak "
     << short_bytes(s.totals.peak_bytes) << ")";
  if (s.device_memory_limit)
    os << "; device_memory_limit " << short_bytes(*s.device_memory_limit) << " of device memory";
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
    os << " over time; the dashed line marks the highest total in this window.</p>\n";
  }
  os << "<p>Device memory is stacked at the bottom, managed and external memory above it, "
        "hatched: only device memory counts against <code>device_memory_limit</code>";
  if (s.device_memory_limit) os << " (the solid line)";
  os << ".</p>\n";
  const std::vector<ChartBand> bands = write_mem_chart(s, os);
  const std::map<std::string, MemoryKinds> kinds = live_by_site_and_kind(s);
  os << "<table id=\"legend\"><tr><th>site</th><th>kind</th><th>live now</th><th>site's peak"
        "</th></tr>\n";
  for (const ChartBand& b : bands) {
    std::uint64_t peak = 0;
    for (const SiteMemory& m : s.sites)
      if (m.site == b.site) peak = m.peak_bytes;
    const auto k = kinds.find(b.site);
    const std::uint64_t live = k == kinds.end()                ? 0
                               : b.kind == AllocKind::managed  ? k->second.managed
                               : b.kind == AllocKind::external ? k->second.external
                                                               : k->second.device;
    os << "<tr><td><span class=\"swatch" << (b.kind == AllocKind::device ? "" : " hatched")
       << "\" style=\"background-color:" << b.colour << "\"></span>" << xml_text(site_label(b.site))
       << "</td><td>" << kind_name(b.kind) << "</td><td class=\"n\">" << short_bytes(live)
       << "</td><td class=\"n\">" << short_bytes(peak) << "</td></tr>\n";
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
       << "</td><td>" << kind_name(a.kind) << "</td><td>" << xml_text(site_label(a.site))
       << "</td><td class=\"n\">" << a.sequence << "</td></tr>\n";
  }
  os << "</table>\n<p><small>Written by <code>gpuplug mem</code>; snapshot schema " << s.schema
     << ".</small></p>\n</body></html>\n";
}

}  // namespace gpuplug::tool
