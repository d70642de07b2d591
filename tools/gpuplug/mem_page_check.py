#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""CTest driver: mem_page_check.py <gpuplug> <gemm_pipeline>

The page of `gpuplug mem SNAPSHOT --html`, in a real browser (Debian's headless Chromium), for two
snapshots: a `gemm_pipeline` run on host with a device_memory_limit (the picture in
docs/memory.md), and a made-up one with 14 bands (13 sites, device and managed memory, a limit
the total passes). In the DOM Chromium renders, each has a timeline SVG with one band per call
site and kind, the peak and the limit marked, and a time axis with units; the bands' colours are
pairwise distinct (apart in OKLab) and each is in the screenshot; and, measured by the browser's
layout, no label's box meets a band's or another label's. Exit 77 (skipped, said so) when no
Chromium is installed; scripts/lib/common.sh installs it.
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from browser import Browser, Checks, png_colours, scratch_folder  # noqa: E402 (tools/gpuplug/browser.py, beside this)

tool, pipeline = sys.argv[1:3]
browser = Browser.found_or_skip()
check = Checks()
p = scratch_folder("gpuplug-mem-page-")
unescape = lambda s: s.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"') \
    .replace("&amp;", "&")


def oklab(hex_colour):
    """#RRGGBB in OKLab (Ottosson), to tell whether two colours look apart."""
    lin = lambda c: c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (lin(int(hex_colour[i:i + 2], 16) / 255) for i in (1, 3, 5))
    lms = [(0.4122214708 * r + 0.5363325363 * g + 0.0514459929 * b) ** (1 / 3),
           (0.2119034982 * r + 0.6806995451 * g + 0.1073969566 * b) ** (1 / 3),
           (0.0883024619 * r + 0.2817188376 * g + 0.6299787005 * b) ** (1 / 3)]
    m = [(0.2104542553, 0.7936177850, -0.0040720468), (1.9779984951, -2.4285922050, 0.4505937099),
         (0.0259040371, 0.7827717662, -0.8086757660)]
    return [sum(k * v for k, v in zip(row, lms)) for row in m]


# What the page test measures: a copy of the page that lets one inline script run (the page
# itself allows none) and writes the boxes Chromium laid out into the DOM it dumps.
MEASURE = """<script>
const box = e => { const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
const g = {bands: [...document.querySelectorAll('#timeline path.band')].map(box),
           labels: [...document.querySelectorAll('#timeline text')].map(
             e => [e.childNodes[0].textContent, ...box(e)])};
const out = document.createElement('pre'); out.id = 'geometry';
out.textContent = JSON.stringify(g); document.body.appendChild(out);
</script>"""


def overlap(a, b):
    return min(a[2], b[2]) - max(a[0], b[0]) > 0.5 and min(a[3], b[3]) - max(a[1], b[1]) > 0.5


def check_page(name, snapshot_file, want_bands, limit):
    """The page of one snapshot; returns (screenshot path, band count)."""
    html = p(name + ".html")
    r = subprocess.run([tool, "mem", snapshot_file, "--html", html], capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        sys.exit(f"FAIL: gpuplug mem --html {name}: exit {r.returncode}: {r.stderr}")
    url = "file://" + html
    dom = browser.run(p("profile"), "--dump-dom", url).stdout
    svg = re.search(r'<svg id="timeline".*?</svg>', dom, re.S)
    check(svg is not None, f"{name}: the rendered page has no timeline SVG")
    svg = svg.group(0) if svg else ""
    bands = re.findall(r'<path class="band" data-site="([^"]*)"(?: data-kind="([a-z]+)")? '
                       r'fill="(#[0-9A-Fa-f]{6})" d="M([^"]+)"', svg)
    got = {(unescape(s), k) for s, k, _, _ in bands}
    check(got == want_bands and len(bands) == len(want_bands),
          f"{name}: bands {sorted(got)}, not one per site and kind {sorted(want_bands)}")
    check(all(len(d.split()) > 8 for *_, d in bands), f"{name}: a band is empty")
    check('id="peak"' in svg, f"{name}: the peak is not marked")
    fills = [f for _, _, f, _ in bands]
    check(len(set(fills)) == len(fills), f"{name}: two bands share a colour: {fills}")
    closest = min((math.dist(oklab(a), oklab(b)), a, b)
                  for i, a in enumerate(fills) for b in fills[i + 1:]) if len(fills) > 1 else None
    check(closest is None or closest[0] >= 0.05,
          f"{name}: colours {closest[1:] if closest else ''} are too alike (OKLab distance "
          f"{closest[0] if closest else 0:.3f})")
    ticks = re.findall(r'<text class="tick"[^>]*>([^<]*)</text>', svg)
    check(len(ticks) >= 3 and all(re.fullmatch(r"\d+(\.\d+)? (ns|µs|ms|s)", t) for t in ticks),
          f"{name}: no time axis with units: {ticks}")
    check("time since the backend was made" in svg, f"{name}: the time axis has no title")
    if limit:
        line = re.search(r'<line id="limit"[^>]* y1="([\d.]+)"', svg)
        label = re.search(r'<text id="limit-label"[^>]*>limit ([^<]+)<', svg)
        check(line is not None and label is not None, f"{name}: no device_memory_limit line")
        check(label is None or label.group(1) == limit, f"{name}: the limit reads "
              f"{label and label.group(1)}, not {limit}")
    else:
        check('id="limit"' not in svg, f"{name}: a limit line without a limit")

    # The boxes, as Chromium laid them out.
    page = open(html).read()
    page = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page)
    open(p(name + ".measure.html"), "w").write(page.replace("</body>", MEASURE + "</body>"))
    dom = browser.run(p("profile"), "--dump-dom", "file://" + p(name + ".measure.html")).stdout
    m = re.search(r'<pre id="geometry">(.*?)</pre>', dom, re.S)
    check(m is not None, f"{name}: the measuring script wrote nothing")
    g = json.loads(unescape(m.group(1))) if m else {"bands": [], "labels": []}
    check(len(g["bands"]) == len(bands) and len(g["labels"]) >= 6,
          f"{name}: measured {len(g['bands'])} bands, {len(g['labels'])} labels")
    for text, *b in g["labels"]:
        check(b[2] > b[0] and b[3] > b[1], f"{name}: label {text!r} has no box")
        hit = [i for i, band in enumerate(g["bands"]) if overlap(b, band)]
        check(not hit, f"{name}: label {text!r} {b} overlaps band {hit and g['bands'][hit[0]]}")
    labels = g["labels"]
    for i, (ta, *a) in enumerate(labels):
        for tb, *b in labels[i + 1:]:
            check(not overlap(a, b), f"{name}: labels {ta!r} {a} and {tb!r} {b} overlap")

    shot = p(name + ".png")
    browser.run(p("profile"), f"--screenshot={shot}", "--window-size=1000,760",
                "--force-color-profile=srgb", "--hide-scrollbars", url)
    colours = png_colours(shot) if os.path.exists(shot) else set()
    seen = {"#%02X%02X%02X" % tuple(c) for c in colours}
    missing = [f for f in fills if f not in seen]
    check(not missing, f"{name}: band colours {missing} are not in the screenshot")
    return shot, len(bands)


# 1. A real run: gemm_pipeline on host, with a limit above what it uses.
r = subprocess.run([pipeline, "--backend", "host", "--steps", "2", "--m", "64", "--n", "64",
                    "--k", "64", "--log-level", "warning", "--device-memory-limit", "128K",
                    "--memory-snapshot", p("run.json")], capture_output=True, text=True,
                   timeout=300)
if r.returncode != 0:
    sys.exit(f"FAIL: gemm_pipeline --memory-snapshot: exit {r.returncode}: {r.stderr}")
run = json.load(open(p("run.json")))
# At exit nothing is live, so the bands are the history's sites and kinds.
run_bands = {(e["site"], e["kind"]) for e in run["history"]["events"]}
run_shot, run_count = check_page("run", p("run.json"), run_bands, "128.0 KiB")

# 2. Made up: 13 sites (more than the 8 colours of the old palette), one of them managed and one
# both, with a limit above the device memory and below the total (managed memory does not count
# against it).
MiB = 1 << 20
events, t, seq, live = [], 5_000_000, 0, []
sites = [f"layer {i}" for i in range(11)] + ["spill", "kv cache"]
for i, site in enumerate(sites):
    kinds = ["managed"] if site == "spill" else ["device", "managed"] if site == "kv cache" \
        else ["device"]
    for kind in kinds:
        seq += 1
        t += 1_500_000
        ptr = "0x%x" % (0x10000 + seq * 0x100000)
        bytes_ = (i % 4 + 1) * MiB // 2
        events.append({"sequence": seq, "time_ns": t, "action": "alloc", "ptr": ptr,
                       "bytes": bytes_, "kind": kind, "site": site})
        live.append({"ptr": ptr, "bytes": bytes_, "kind": kind, "site": site, "sequence": seq,
                     "time_ns": t})
for a in live[:5]:  # the first five freed again: the peak is in the middle
    seq += 1
    t += 1_500_000
    events.append({"sequence": seq, "time_ns": t, "action": "free", "ptr": a["ptr"],
                   "bytes": a["bytes"], "kind": a["kind"], "site": a["site"]})
live = live[5:]
by_site = {}
for a in live:
    s = by_site.setdefault(a["site"], {"site": a["site"], "live_bytes": 0, "live_count": 0})
    s["live_bytes"] += a["bytes"]
    s["live_count"] += 1
site_rows = sorted(({**s, "peak_bytes": s["live_bytes"]} for s in by_site.values()),
                   key=lambda s: -s["live_bytes"])
peak = sum(e["bytes"] for e in events if e["action"] == "alloc")
made_up = {
    "schema": 1, "backend": "host:0", "complete": True, "device_memory_limit": 14 * MiB,
    "device": None,
    "totals": {"live_bytes": sum(a["bytes"] for a in live), "live_count": len(live),
               "peak_bytes": peak,
               "live_managed_bytes": sum(a["bytes"] for a in live if a["kind"] == "managed"),
               "total_allocs": len(live) + 5, "total_frees": 5},
    "sites": site_rows, "allocations": live,
    "history": {"capacity": 64, "dropped": 0, "events": events}, "op_scratch": []}
json.dump(made_up, open(p("many.json"), "w"))
many_bands = {(e["site"], e["kind"]) for e in events}
check(len(many_bands) == 14, f"the made-up snapshot has {len(many_bands)} bands")
_, many_count = check_page("many", p("many.json"), many_bands, "14.0 MiB")

if os.environ.get("GPUPLUG_MEM_PAGE_SCREENSHOT") and os.path.exists(run_shot):
    shutil.copy(run_shot, os.environ["GPUPLUG_MEM_PAGE_SCREENSHOT"])  # docs/images/memory-page.png

check.finish(f"ok: the memory page in {browser.name}: {run_count} bands of a gemm_pipeline run "
             f"and {many_count} made up, one per site and kind, distinct colours, the limit "
             f"line, a time axis, labels clear of the bands and of each other")
