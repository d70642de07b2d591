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
import shutil
import struct
import subprocess
import sys
import tempfile
import atexit
import zlib

tool, broken = sys.argv[1:3]
browser = shutil.which("chromium") or shutil.which("chromium-browser")
if browser is None:
    print("skipped: no chromium installed (apt-get install chromium)")
    sys.exit(77)

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


work = tempfile.mkdtemp(prefix="gpuplug-page-")
atexit.register(shutil.rmtree, work, True)
p = lambda name: os.path.join(work, name)


def gp(*args):
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=300)


def chromium(*args):
    # --no-sandbox: CI runs as root, where Chromium refuses its sandbox. A private profile, so
    # that nothing of the user's is read or written.
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           f"--user-data-dir={p('profile')}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


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


def png_colours(path):
    """Distinct RGB(A) pixels of a PNG (8-bit, colour types 2 and 6, as Chromium writes)."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return set()
    pos, idat, width, height, ctype = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    bpp = {2: 3, 6: 4}.get(ctype)
    if bpp is None:
        return set()
    raw, stride, prev, colours = zlib.decompress(idat), width * bpp, None, set()
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):  # undo the PNG filters
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i] if prev else 0
            c = prev[i - bpp] if prev and i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        prev = line
        for x in range(0, stride, bpp * 7):  # a sample is enough
            colours.add(bytes(line[x:x + 3]))
    return colours


shot = p("matrix.png")
chromium(f"--screenshot={shot}", "--window-size=900,400", url)
colours = png_colours(shot) if os.path.exists(shot) else set()
# White, text grey/black, the header grey, green (pass) and red (CRASH) cells at least.
check(len(colours) >= 5, f"the screenshot has {len(colours)} colours: a blank or unstyled page")
check(any(g > r + 8 and g > b + 8 for r, g, b in colours) and
      any(r > g + 8 and r > b + 8 for r, g, b in colours),
      "the screenshot has no green and red cells")

if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"ok: the matrix page in {os.path.basename(browser)} (screenshot {len(colours)} colours)")
