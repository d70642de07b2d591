# SPDX-License-Identifier: Apache-2.0
"""Headless Chromium for the page tests (matrix_page_check.py, mem_page_check.py): finding it
(or skipping, exit 77, saying so), running it with a private profile, and reading the colours of
its screenshots. Debian's chromium is installed by scripts/lib/common.sh."""
import atexit
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib


class Checks:
    """Collects failed checks; `finish` prints them (exit 1) or the line that says what passed."""

    def __init__(self):
        self.failures = []

    def __call__(self, ok, what):
        if not ok:
            self.failures.append(what)

    def finish(self, ok_line):
        if self.failures:
            print("FAIL:\n  " + "\n  ".join(self.failures))
            sys.exit(1)
        print(ok_line)


def scratch_folder(prefix):
    """A temporary folder, removed at exit, and a function naming a file in it."""
    work = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, work, True)
    return lambda name: os.path.join(work, name)


class Browser:
    def __init__(self, path):
        self.path = path
        self.name = os.path.basename(path)

    @staticmethod
    def found_or_skip():
        path = shutil.which("chromium") or shutil.which("chromium-browser")
        if path is None:
            print("skipped: no chromium installed (apt-get install chromium)")
            sys.exit(77)
        return Browser(path)

    def run(self, profile, *args):
        # --no-sandbox: CI runs as root, where Chromium refuses its sandbox. A private profile,
        # so that nothing of the user's is read or written.
        cmd = [self.path, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               f"--user-data-dir={profile}", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


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
