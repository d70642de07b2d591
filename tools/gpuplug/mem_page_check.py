#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""CTest driver: mem_page_check.py <gpuplug> <gemm_pipeline>

The page of `gpuplug mem SNAPSHOT --html`, in a real browser (Debian's headless Chromium): the
DOM Chromium renders holds a non-empty timeline SVG with one band per call site of the snapshot
and the peak marked, and a screenshot shows the bands' colours (more than a blank page's). Exit
77 (skipped, said so) when no Chromium is installed; scripts/lib/common.sh installs it.
"""
import json
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

r = subprocess.run([pipeline, "--backend", "host", "--steps", "2", "--m", "64", "--n", "64",
                    "--k", "64", "--log-level", "warning", "--memory-snapshot", p("run.json")],
                   capture_output=True, text=True, timeout=300)
if r.returncode != 0:
    sys.exit(f"FAIL: gemm_pipeline --memory-snapshot: exit {r.returncode}: {r.stderr}")
snapshot = json.load(open(p("run.json")))
# Every site that held memory during the run has a band (at exit nothing is live, so the page's
# sites are those of the history).
sites = {e["site"] for e in snapshot["history"]["events"]}
r = subprocess.run([tool, "mem", p("run.json"), "--html", p("run.html")], capture_output=True,
                   text=True, timeout=120)
if r.returncode != 0:
    sys.exit(f"FAIL: gpuplug mem --html: exit {r.returncode}: {r.stderr}")

url = "file://" + p("run.html")
dom = browser.run(p("profile"), "--dump-dom", url).stdout
svg = re.search(r'<svg id="timeline".*?</svg>', dom, re.S)
check(svg is not None, "the rendered page has no timeline SVG")
bands = re.findall(r'<path class="band" data-site="([^"]*)"[^>]* d="M([^"]+)"', svg.group(0)) \
    if svg else []
check(len(bands) == len(sites) and len(sites) > 0,
      f"{len(bands)} bands for {len(sites)} sites ({sorted(sites)})")
unescape = lambda s: s.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"') \
    .replace("&amp;", "&")
check({unescape(s) for s, _ in bands} == sites, "the bands are not the snapshot's sites")
check(all(len(d.split()) > 8 for _, d in bands), "a band is empty")
check('id="peak"' in (svg.group(0) if svg else ""), "the peak is not marked")

shot = p("mem.png")
browser.run(p("profile"), f"--screenshot={shot}", "--window-size=1000,700", url)
colours = png_colours(shot) if os.path.exists(shot) else set()
# White, text, and at least two band colours (Okabe-Ito blue and orange come first).
check(len(colours) >= 5, f"the screenshot has {len(colours)} colours: a blank or unstyled page")
check(any(b > r + 40 and b > g for r, g, b in colours), "no blue band in the screenshot")
if os.environ.get("GPUPLUG_MEM_PAGE_SCREENSHOT"):
    shutil.copy(shot, os.environ["GPUPLUG_MEM_PAGE_SCREENSHOT"])  # docs/images/memory-page.png

check.finish(f"ok: the memory page in {browser.name}: {len(bands)} bands, one per site "
      f"(screenshot {len(colours)} colours)")
