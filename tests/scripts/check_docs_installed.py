#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The installed documents are docs/ as it is: `cmake --install <build> --component docs` into a
# temporary prefix gives share/doc/gpuplug with every page and picture of docs/, README.md and
# CHANGELOG.md, each byte for byte, and nothing else; every relative link of those pages (the
# README's docs/<page> ones included) that names a page or picture of docs/ resolves there.
# usage: check_docs_installed.py <source root> <build dir>
import filecmp
import os
import re
import subprocess
import sys
import tempfile

root, build = sys.argv[1], sys.argv[2]
failures = []


def files_under(folder):
    out = set()
    for where, _, names in os.walk(folder):
        for name in names:
            out.add(os.path.relpath(os.path.join(where, name), folder))
    return out


with tempfile.TemporaryDirectory() as prefix:
    subprocess.run(["cmake", "--install", build, "--component", "docs", "--prefix", prefix],
                   check=True, stdout=subprocess.DEVNULL)
    docdir = os.path.join(prefix, "share", "doc", "gpuplug")
    expected = files_under(os.path.join(root, "docs")) | {"README.md", "CHANGELOG.md"}
    # The link docs -> . is how the README's links resolve; os.walk does not follow it.
    installed = files_under(docdir)
    for f in sorted(expected - installed):
        failures.append(f"not installed: {f} (add it to cmake/GpuplugPackage.cmake's lists)")
    for f in sorted(installed - expected):
        failures.append(f"installed but not in docs/: {f}")
    for f in sorted(expected & installed):
        source = os.path.join(root, f) if f in ("README.md", "CHANGELOG.md") else \
            os.path.join(root, "docs", f)
        if not filecmp.cmp(source, os.path.join(docdir, f), shallow=False):
            failures.append(f"differs from its source: {f}")
    for page in sorted(f for f in installed if f.endswith(".md")):
        text = open(os.path.join(docdir, page), encoding="utf-8").read()
        for target in re.findall(r"\]\(([^)#\s]+)", text):
            if "://" in target or not re.search(r"\.(md|png|svg|jpg)$", target):
                continue  # a web address, or code that looks like a link (f()[i](x))
            in_source = os.path.normpath(os.path.join(
                root if page in ("README.md", "CHANGELOG.md") else os.path.join(root, "docs"),
                os.path.dirname(page), target))
            if os.path.commonpath([in_source, os.path.join(root, "docs")]) != \
                    os.path.join(root, "docs"):
                continue  # a link to the sources (../examples/...): not part of the docs
            if not os.path.exists(os.path.join(docdir, os.path.dirname(page), target)):
                failures.append(f"{page}: the link {target} does not resolve when installed")
    for f in failures:
        print(f)
    if failures:
        sys.exit(1)
    print(f"{len(installed)} documents installed, equal to docs/, README.md and CHANGELOG.md")
