#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# docs/quickstart.md shows the files of examples/quickstart in full: each code block after a
# marker <!-- examples/quickstart/<file> --> equals that file, and every file has its block.
# usage: check_quickstart.py <source root>
import os
import re
import sys

root = sys.argv[1]
doc = open(os.path.join(root, "docs", "quickstart.md"), encoding="utf-8").read()
blocks = dict(re.findall(r"<!-- (examples/quickstart/[^ ]+) -->\n```[a-z]*\n(.*?)```", doc, re.S))
folder = os.path.join(root, "examples", "quickstart")
failures = []
for name in sorted(os.listdir(folder)):
    path = f"examples/quickstart/{name}"
    text = open(os.path.join(folder, name), encoding="utf-8").read()
    if path not in blocks:
        failures.append(f"docs/quickstart.md does not show {path}")
    elif blocks[path] != text:
        failures.append(f"docs/quickstart.md's block for {path} differs from the file")
for path in sorted(set(blocks) - {f"examples/quickstart/{n}" for n in os.listdir(folder)}):
    failures.append(f"docs/quickstart.md shows {path}, which does not exist")
for f in failures:
    print(f)
if failures:
    sys.exit(1)
print(f"docs/quickstart.md shows the {len(blocks)} files of examples/quickstart as they are")
