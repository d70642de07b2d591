#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""CTest driver: matrix_page_check.py <gpuplug> <broken_host plugin>

The page of `gpuplug matrix --html`, in a real browser (Debian's headless Chromium): its script
runs, counts the rows, hides the rows a filter excludes (#filter=TEXT in the link), shows only
the changed rows against a baseline (#changed), marks the regressed cell, and a screenshot shows
the coloured table (more than a blank page's colours). Exit 77 (skipped, said so) when no
Chromium is installed; scripts/lib/common.sh installs it.
"""
import json
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from browser import Browser, Checks, png_colours, scratch_folder  # noqa: E402 (tools/gpuplug/browser.py, beside this)

tool, broken = sys.argv[1:3]
browser = Browser.found_or_skip()

check = Checks()
p = scratch_folder("gpuplug-page-")


def gp(*args):
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=300)


def chromium(*args):
    return browser.run(p("profile"), *args)


cases = ["--case", "alloc_copy", "--case", "launch_axpy", "--case", "zero_byte"]
gp("check", "--backend", "host", *cases, "--json", p("host.json"))
gp("check", "--plugin", broken, "--timeout", "5", *cases, "--json", p("broken.json"))
base = json.load(open(p("host.json")))
now = json.loads(json.dumps(base))
for c in now["cases"]:
    if c["name"] == "zero_byte_alloc":
        c["status"] = "failed"
json.dump(now, open(p("now.json"), "w"))

r = gp("matrix", "--html", p("m.html"), p("host.json"), p("broken.json"))
check(r.returncode == 0, f"matrix --html: exit {r.returncode}: {r.stderr}")
r = gp("matrix", "--html", p("b.html"), "--baseline", p("host.json"), p("now.json"))
check(r.returncode == 1, f"matrix --html with a regression: exit {r.returncode}, not 1")


def visible_rows(dom):
    rows = re.findall(r"<tr( style=\"[^\"]*\")?><td class=\"case\">([^<]*)</td>", dom)
    return [name for style, name in rows if "display: none" not in style]


def count_text(dom):
    m = re.search(r'<p id="count">([^<]*)</p>', dom)
    return m.group(1) if m else None


url = "file://" + p("m.html")
dom = chromium("--dump-dom", url).stdout
# 3 cases and the 5 lint rows (lint_exports, ...) of every record.
check(count_text(dom) == "8 of 8 cases shown", f"the script did not count 8 rows: {count_text(dom)!r}")
check({"alloc_copy_roundtrip", "launch_axpy", "zero_byte_alloc", "lint_exports"} <=
      set(visible_rows(dom)) and len(visible_rows(dom)) == 8,
      f"rows shown without a filter: {visible_rows(dom)}")
check('<td class="crashed"' in dom, "the crashed cell has no 'crashed' class")

dom = chromium("--dump-dom", url + "#filter=launch").stdout
check(count_text(dom) == "1 of 8 cases shown", f"#filter=launch: {count_text(dom)!r}")
check(visible_rows(dom) == ["launch_axpy"], f"#filter=launch shows {visible_rows(dom)}")

dom = chromium("--dump-dom", "file://" + p("b.html") + "#changed").stdout
check(visible_rows(dom) == ["zero_byte_alloc"], f"#changed shows {visible_rows(dom)}")
check('class="failed regressed"' in dom, "the regressed cell is not marked")


shot = p("matrix.png")
chromium(f"--screenshot={shot}", "--window-size=900,400", url)
colours = png_colours(shot) if os.path.exists(shot) else set()
# White, text grey/black, the header grey, green (pass) and red (CRASH) cells at least.
check(len(colours) >= 5, f"the screenshot has {len(colours)} colours: a blank or unstyled page")
check(any(g > r + 8 and g > b + 8 for r, g, b in colours) and
      any(r > g + 8 and r > b + 8 for r, g, b in colours),
      "the screenshot has no green and red cells")

check.finish(f"ok: the matrix page in {browser.name} (screenshot {len(colours)} colours)")
