#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Every file of core/ has a row in the table of docs/architecture.md ("The core's files"), and
# every row names a file that exists: the table is how a reader finds a file's job.
# usage: check_core_files_documented.py <source root>
import os
import re
import sys

root = sys.argv[1]
doc = open(os.path.join(root, "docs", "architecture.md"), encoding="utf-8").read()
start = doc.index("## The core's files")
end = doc.index("\n## ", start + 1)
rows = set(re.findall(r"^\| `(core/[^`]+)` \|", doc[start:end], re.M))
files = set()
for folder, _, names in os.walk(os.path.join(root, "core")):
    for name in names:
        files.add(os.path.relpath(os.path.join(folder, name), root))
missing = sorted(files - rows)
stale = sorted(rows - files)
for f in missing:
    print(f"docs/architecture.md: no row for {f} in \"The core's files\"")
for f in stale:
    print(f"docs/architecture.md: the row for {f} names no file")
if missing or stale:
    sys.exit(1)
print(f"{len(files)} files of core/, each with its row")
