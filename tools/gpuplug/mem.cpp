// SPDX-License-Identifier: Apache-2.0
// `gpuplug mem`: reads snapshots (GpuBackend::memory_snapshot as JSON) and prints their summary
// or their difference, or writes their page (mem_page.cpp).
#include "mem.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpuplug/support/escape.hpp"
#include "gpuplug/support/regular_file.hpp"
#include "gpuplug/support/text.hpp"

#include "cli.hpp"

namespace gpuplug::tool {

namespace {

/// A snapshot file larger than this is refused, not read (a ledger of millions of allocations
/// with a full history stays far below it).
constexpr std::uint64_t max_snapshot_bytes = std::uint64_t{1} << 30;

int usage_error(const std::string& message) { return tool::usage_error("mem", message); }

void print_usage(std::ostream& os) {
  os << "usage: gpuplug mem SNAPSHOT.json [--html OUT.html]\n"
        "       gpuplug mem diff A.json B.json\n"
        "\n"
        "A snapshot is GpuBackend::memory_snapshot() as JSON (gpuplug::to_json; schema in\n"
        "share/gpuplug/memory.schema.json), e.g. from `gemm_pipeline --memory-snapshot FILE`.\n"
        "  SNAPSHOT.json      totals (device and managed apart), then every call site by live\n"
        "                     bytes with its peak, count and kind, the OpCache scratch per cache\n"
        "                     and tag (the model caches' too), and the history kept\n"
        "  --html OUT.html    also writes one self-contained page: a stacked timeline of live\n"
        "                     bytes per site over time (option memory_history=N), the peak and\n"
        "                     device_memory_limit marked, and the live allocations\n"
        "  diff A.json B.json which sites grew or shrank from A to B (leak hunting)\n"
        "Exit status: 0; 2 for a usage error or a file that is not a snapshot.\n";
}

using support::short_bytes;

std::string signed_short_bytes(std::int64_t delta) {
  if (delta == 0) return "0 B";
  const std::uint64_t magnitude =
      delta < 0 ? static_cast<std::uint64_t>(-(delta + 1)) + 1 : static_cast<std::uint64_t>(delta);
  return (delta < 0 ? "-" : "+") + short_bytes(magnitude);
}

std::string site_text(const std::string& site) {
  return site.empty() ? std::string("<no site>") : support::escape_text(site);
}

std::string padded(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

MemorySnapshot read_snapshot(const std::string& file) {
  std::string why;
  const auto bytes = support::read_regular_file(file, max_snapshot_bytes, why);
  if (!bytes) throw BadSnapshot(support::escape_text(why));
  const std::string_view text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  return parse_memory_snapshot(text, support::escape_text(file));
}

}  // namespace

std::map<std::string, MemoryKinds> live_by_site_and_kind(const MemorySnapshot& s) {
  std::map<std::string, MemoryKinds> out;
  for (const LiveAllocation& a : s.allocations) {
    MemoryKinds& k = out[a.site];
    (a.kind == AllocKind::managed    ? k.managed
     : a.kind == AllocKind::external ? k.external
                                     : k.device) += a.bytes;
  }
  for (const SiteMemory& m : s.sites) {
    MemoryKinds& k = out[m.site];
    const std::uint64_t known = k.device + k.managed + k.external;
    if (known < m.live_bytes) k.device += m.live_bytes - known;
  }
  return out;
}

std::string kinds_text(const MemoryKinds& k) {
  const std::pair<const char*, std::uint64_t> parts[] = {
      {"device", k.device}, {"managed", k.managed}, {"external", k.external}};
  std::string out;
  int held = 0;
  for (const auto& [kind, bytes] : parts) held += bytes != 0 ? 1 : 0;
  for (const auto& [kind, bytes] : parts) {
    if (bytes == 0) continue;
    if (!out.empty()) out += " + ";
    out += kind;
    if (held > 1) out += " " + short_bytes(bytes);
  }
  return out.empty() ? "-" : out;
}

std::string live_text(const MemorySnapshot& s) {
  const MemoryKinds k = live_by_kind(s);
  std::string out = short_bytes(s.totals.live_bytes) + " (" + short_bytes(k.device) + " device, " +
                    short_bytes(k.managed) + " managed";
  if (k.external != 0) out += ", " + short_bytes(k.external) + " external";
  return out;
}

void print_mem_summary(const MemorySnapshot& s, std::ostream& os) {
  const LedgerStats& t = s.totals;
  os << support::escape_text(s.backend) << ": " << t.live_count
     << (t.live_count == 1 ? " live allocation, " : " live allocations, ") << live_text(s)
     << "; peak " << short_bytes(t.peak_bytes) << "); " << t.total_allocs << " allocs, "
     << t.total_frees << " frees";
  // The limit counts device memory only: said, since the total above has every kind in it.
  if (s.device_memory_limit)
    os << "; device_memory_limit " << short_bytes(*s.device_memory_limit) << " of device memory";
  if (s.device)
    os << "; device " << short_bytes(s.device->free_bytes) << " free of "
       << short_bytes(s.device->total_bytes);
  os << "\n";
  if (!s.complete) os << "partial: " << support::escape_text(s.partial_reason) << "\n";
  if (!s.sites.empty()) {
    std::size_t width = 4;
    for (const SiteMemory& m : s.sites) width = std::max(width, site_text(m.site).size());
    width = std::min<std::size_t>(width, 60);
    const std::map<std::string, MemoryKinds> kinds = live_by_site_and_kind(s);
    os << "\n"
       << padded("site", width) << "  " << padded("live", 10) << "  " << padded("count", 7) << "  "
       << padded("peak", 10) << "  kind\n";
    for (const SiteMemory& m : s.sites) {
      os << padded(site_text(m.site), width) << "  " << padded(short_bytes(m.live_bytes), 10)
         << "  " << padded(std::to_string(m.live_count), 7) << "  "
         << padded(short_bytes(m.peak_bytes), 10) << "  " << kinds_text(kinds.at(m.site)) << "\n";
    }
  }
  if (!s.op_scratch.empty()) {
    os << "\nop scratch (OpCache::release frees live and retired):\n";
    for (const ScratchMemory& m : s.op_scratch) {
      os << "  " << support::escape_text(m.cache) << ": " << support::escape_text(m.tag) << "  "
         << short_bytes(m.live_bytes) << " live, " << short_bytes(m.retired_bytes) << " retired in "
         << m.retired_count << (m.retired_count == 1 ? " buffer\n" : " buffers\n");
    }
  }
  os << "\nhistory: ";
  if (s.history_capacity == 0) {
    os << "off (create the backend with memory_history=N to keep the last N events)\n";
  } else {
    os << s.history.size() << " events kept of " << s.history.size() + s.history_dropped
       << " (memory_history=" << s.history_capacity << ")\n";
  }
}

void print_mem_diff(const MemorySnapshot& a, const MemorySnapshot& b, std::ostream& os) {
  struct Change {
    std::string site;
    std::uint64_t before = 0, after = 0;
    std::uint64_t count_before = 0, count_after = 0;
    std::int64_t delta() const {
      return static_cast<std::int64_t>(after) - static_cast<std::int64_t>(before);
    }
  };
  std::map<std::string, Change> by_site;
  for (const SiteMemory& m : a.sites) {
    Change& c = by_site[m.site];
    c.site = m.site;
    c.before = m.live_bytes;
    c.count_before = m.live_count;
  }
  for (const SiteMemory& m : b.sites) {
    Change& c = by_site[m.site];
    c.site = m.site;
    c.after = m.live_bytes;
    c.count_after = m.live_count;
  }
  std::vector<Change> changed;
  for (auto& [_, c] : by_site)
    if (c.before != c.after || c.count_before != c.count_after) changed.push_back(c);
  std::sort(changed.begin(), changed.end(), [](const Change& x, const Change& y) {
    const auto mx = x.delta() < 0 ? -x.delta() : x.delta();
    const auto my = y.delta() < 0 ? -y.delta() : y.delta();
    return mx != my ? mx > my : x.site < y.site;
  });
  const MemoryKinds ka = live_by_kind(a);
  const MemoryKinds kb = live_by_kind(b);
  const std::int64_t total = static_cast<std::int64_t>(b.totals.live_bytes) -
                             static_cast<std::int64_t>(a.totals.live_bytes);
  os << support::escape_text(a.backend) << " -> " << support::escape_text(b.backend) << ": live "
     << short_bytes(a.totals.live_bytes) << " -> " << short_bytes(b.totals.live_bytes) << " ("
     << signed_short_bytes(total) << "; device " << short_bytes(ka.device) << " -> "
     << short_bytes(kb.device) << ", managed " << short_bytes(ka.managed) << " -> "
     << short_bytes(kb.managed);
  if (ka.external != 0 || kb.external != 0)
    os << ", external " << short_bytes(ka.external) << " -> " << short_bytes(kb.external);
  os << "), allocations " << a.totals.live_count << " -> " << b.totals.live_count << "\n";
  if (!a.complete || !b.complete)
    os << "partial: a snapshot without per-site totals; only the totals compare\n";
  if (changed.empty()) {
    os << "no call site changed\n";
    return;
  }
  std::size_t width = 4;
  for (const Change& c : changed) width = std::max(width, site_text(c.site).size());
  width = std::min<std::size_t>(width, 60);
  os << "\n"
     << padded("site", width) << "  " << padded("change", 12) << "  " << padded("before", 10)
     << "  " << padded("after", 10) << "  allocations\n";
  for (const Change& c : changed) {
    os << padded(site_text(c.site), width) << "  " << padded(signed_short_bytes(c.delta()), 12)
       << "  " << padded(short_bytes(c.before), 10) << "  " << padded(short_bytes(c.after), 10)
       << "  " << c.count_before << " -> " << c.count_after
       << (c.count_before == 0  ? " (new)"
           : c.count_after == 0 ? " (gone)"
                                : "")
       << "\n";
  }
}

int run_mem(std::span<const std::string_view> args) {
  std::optional<std::string> html;
  std::vector<std::string> files;
  // "diff" as the first word is the command's second form; anywhere else it is a file name.
  const bool diff = !args.empty() && args.front() == "diff";
  CommandLine cli("mem", print_usage);
  cli.value("--html", html, "a file to write");
  cli.positionals("snapshots", files);
  if (const auto status = cli.parse(diff ? args.subspan(1) : args)) return *status;
  if (diff && files.size() != 2) return usage_error("diff needs two snapshots: A.json B.json");
  if (diff && html) return usage_error("--html does not combine with diff");
  if (!diff && files.size() != 1)
    return usage_error(files.empty() ? "no snapshot (SNAPSHOT.json)"
                                     : "one snapshot at a time (or: gpuplug mem diff A B)");
  try {
    if (diff) {
      print_mem_diff(read_snapshot(files[0]), read_snapshot(files[1]), std::cout);
      return 0;
    }
    const MemorySnapshot s = read_snapshot(files[0]);
    print_mem_summary(s, std::cout);
    if (html) {
      std::ofstream out(*html, std::ios::binary | std::ios::trunc);
      write_mem_page(s, files[0], out);
      out.close();
      if (!out) {
        std::cerr << "gpuplug mem: cannot write '" << support::escape_text(*html) << "'\n";
        return exit_usage;
      }
    }
  } catch (const BadSnapshot& e) {
    std::cerr << "gpuplug mem: " << e.what() << "\n";
    return exit_usage;
  }
  return 0;
}

}  // namespace gpuplug::tool
