#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""CTest driver: matrix_check.py <gpuplug> <check.schema.json> <junit.xsd> <broken_host plugin>

What CI relies on from `gpuplug check --json/--junit` and `gpuplug matrix`, end to end:
  - host and the broken_host plugin (a launch that segfaults, an event wait that hangs) write
    JSON valid against the installed schema, with crashed and timed_out statuses, and JUnit XML
    valid against junit.xsd (xmllint) with those as <failure type="crashed"/"timed_out">;
  - the matrix merges them (text, Markdown, --messages, a self-contained --html page);
  - against a baseline a newly failing case is "regressed" (exit 1), a newly passing one "fixed";
    a case that passed and is now skipped is "regressed" too, unless --allow-new-skips;
  - bad input exits 2 naming the file and the reason: not JSON (with the line), an unknown
    schema, the same backend@machine twice; records from two gpuplug versions merge with a note;
  - hostile text from a record (escape sequences, markup) never reaches the terminal or the page
    raw.
python3-jsonschema and xmllint are required (scripts/lib/common.sh installs them): without them
this fails, it never skips.
"""
import copy
import json
import os
import subprocess
import sys
import shutil
import tempfile
import atexit

try:
    import jsonschema
except ImportError:
    sys.exit("FAIL: python3-jsonschema is not installed (apt-get install python3-jsonschema)")

tool, schema_file, xsd_file, broken = sys.argv[1:5]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def run(*args, timeout=300):
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=timeout)


def validate_xml(path):
    r = subprocess.run(["xmllint", "--noout", "--schema", xsd_file, path],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"{path} is not valid JUnit XML: {r.stderr.strip()}")


schema = json.load(open(schema_file))
work = tempfile.mkdtemp(prefix="gpuplug-matrix-")
atexit.register(shutil.rmtree, work, True)
p = lambda name: os.path.join(work, name)

# --- the records ---------------------------------------------------------------------------
host = run("check", "--backend", "host", "--case", "alloc_copy", "--case", "launch_axpy",
           "--case", "events_query_before", "--json", p("host.json"), "--junit", p("host.xml"))
check(host.returncode == 0, f"check on host exited {host.returncode}: {host.stdout[-400:]}")
broken_run = run("check", "--plugin", broken, "--timeout", "2", "--case", "alloc_copy",
                 "--case", "launch_axpy", "--case", "events_query_before", "--json", p("broken.json"),
                 "--junit", p("broken.xml"))
check(broken_run.returncode == 1, f"check on broken_host exited {broken_run.returncode}, not 1")

records = {}
for name in ("host", "broken"):
    doc = json.load(open(p(name + ".json")))
    try:
        jsonschema.validate(doc, schema)
    except jsonschema.ValidationError as e:
        check(False, f"{name}.json breaks check.schema.json: {e.message}")
    records[name] = doc
    validate_xml(p(name + ".xml"))

status = {c["name"]: c["status"] for c in records["broken"]["cases"]}
check(status.get("alloc_copy_roundtrip") == "passed", f"broken_host alloc_copy: {status}")
check(status.get("launch_axpy") == "crashed", f"broken_host launch_axpy not crashed: {status}")
check(status.get("events_query_before_and_after_completion") == "timed_out",
      f"broken_host events_query_before_and_after_completion not timed_out: {status}")
# Five lint rows ("lint_exports", ...) come first in every record; broken_host passes them.
check(records["broken"]["summary"] == {"passed": 6, "failed": 2, "skipped": 0},
      f"broken summary: {records['broken']['summary']}")
check(records["host"]["backend"]["device"]["class"] == "cpu", "host device class is not cpu")
# No flag: isolated, with the default per-case limit (60 s; 600 s in a sanitizer build).
check(records["host"]["options"] in ({"isolate": True, "timeout_s": 60},
                                     {"isolate": True, "timeout_s": 600}),
      f"host options: {records['host']['options']}")
check(all(c["known_failure"] == "" for c in records["host"]["cases"]), "host lists no known failure")

# A known failure: its reason in the record, the case xfail, and <skipped> in JUnit.
with open(p("known.txt"), "w") as f:
    f.write("broken_host launch_axpy the launch slot segfaults on purpose\n")
kf = run("check", "--plugin", broken, "--timeout", "5", "--case", "launch_axpy",
         "--known-failures", p("known.txt"), "--json", p("known.json"), "--junit", p("known.xml"))
known_case = next((c for c in json.load(open(p("known.json")))["cases"]
                   if c["name"] == "launch_axpy"), {})
check(known_case.get("status") == "xfail" and
      known_case.get("known_failure") == "the launch slot segfaults on purpose",
      f"known failure record: {known_case}")
validate_xml(p("known.xml"))
check("known failure (xfail)" in open(p("known.xml")).read(), "JUnit does not mark the xfail")
xml = open(p("broken.xml")).read()
check('type="crashed"' in xml and 'type="timed_out"' in xml,
      "broken.xml lacks failure types crashed and timed_out")

# --- the matrix ----------------------------------------------------------------------------
m = run("matrix", p("host.json"), p("broken.json"), "--messages")
check(m.returncode == 0, f"matrix exited {m.returncode} without a baseline: {m.stderr}")
lines = m.stdout.splitlines()
check(lines and lines[0].split() == ["case", "host:0@" + records["host"]["machine"]["hostname"],
                                     "broken_host:0@" + records["host"]["machine"]["hostname"]],
      f"matrix header: {lines[:1]}")
row = next((l.split() for l in lines if l.startswith("launch_axpy ")), [])
check(row == ["launch_axpy", "pass", "CRASH"], f"launch_axpy row: {row}")
row = next((l.split() for l in lines if l.startswith("events_query_before_and_after_completion ")), [])
check(row == ["events_query_before_and_after_completion", "pass", "TIMEOUT"], f"events row: {row}")
check(any(l.split() == ["lint_exports", "pass", "pass"] for l in lines), "no lint_exports row")
check("8 cases on 2 backends: 2 failing cells" in m.stdout, f"matrix summary: {m.stdout[-200:]}")
check(any("launch_axpy @ broken_host" in l and "crashed" in l for l in lines),
      "--messages does not give launch_axpy's crash message")
check(not any(l != l.rstrip() for l in lines), "matrix text has trailing blanks")

md = run("matrix", "--markdown", p("host.json"), p("broken.json"))
check("\n|---|---|---|\n" in md.stdout and "| launch_axpy | pass | **CRASH** |" in md.stdout,
      f"markdown table: {md.stdout[:600]}")

page = run("matrix", "--html", p("m.html"), p("host.json"), p("broken.json"))
check(page.returncode == 0, f"matrix --html exited {page.returncode}: {page.stderr}")
html = open(p("m.html")).read() if os.path.exists(p("m.html")) else ""
check("<table id=\"matrix\">" in html and "<script>" in html and "CRASH" in html,
      "the page has no table, script or CRASH cell")
check("http://" not in html and "https://" not in html and " src=" not in html,
      "the page reaches the network")

unavailable = run("check", "--backend", "nosuch:0!", "--case", "alloc_copy", "--no-isolate",
                  "--json", p("gone.json"))
check(unavailable.returncode == 3, f"check of an unavailable backend exited {unavailable.returncode}")
gone_options = json.load(open(p("gone.json")))["options"]
check(gone_options == {"isolate": False, "timeout_s": 0}, f"--no-isolate options: {gone_options}")
summary = run("matrix", "--summary", p("host.json"), p("broken.json"), p("gone.json"))
rows = {l.split()[0]: l for l in summary.stdout.splitlines()[1:] if l.strip()}
host_col = "host:0@" + records["host"]["machine"]["hostname"]
check(rows.get(host_col, "").split()[1:4] == ["8", "0", "0"], f"--summary host row: {summary.stdout}")
broken_row = next((l for k, l in rows.items() if k.startswith("broken_host:0@")), "")
check(broken_row.split()[1:4] == ["6", "2", "0"] and "launch_axpy (CRASH)" in broken_row and
      "events_query_before_and_after_completion (TIMEOUT)" in broken_row,
      f"--summary broken_host row: {broken_row}")
gone_row = next((l for k, l in rows.items() if k.startswith("nosuch:0@")), "")
check("not run:" in gone_row and "nosuch" in gone_row, f"--summary unavailable row: {gone_row!r}")

# --- the baseline --------------------------------------------------------------------------
def write(name, doc):
    with open(p(name), "w") as f:
        json.dump(doc, f)
    return p(name)


now = copy.deepcopy(records["host"])
for c in now["cases"]:
    if c["name"] == "launch_axpy":
        c["status"], c["message"] = "failed", "axpy: element 3 is 2, expected 1"
regressed = run("matrix", "--baseline", p("host.json"), write("now.json", now))
check(regressed.returncode == 1, f"a regression exited {regressed.returncode}, not 1")
check("FAIL (regressed)" in regressed.stdout and "1 regressed, 0 fixed" in regressed.stdout,
      f"regression not marked: {regressed.stdout}")
fixed = run("matrix", "--baseline", p("now.json"), p("host.json"))
check(fixed.returncode == 0 and "pass (fixed)" in fixed.stdout and "0 regressed, 1 fixed"
      in fixed.stdout, f"fix not marked or exit {fixed.returncode}: {fixed.stdout}")

skipped_now = copy.deepcopy(records["host"])
for c in skipped_now["cases"]:
    if c["name"] == "launch_axpy":
        c["status"], c["message"] = "skipped", "no image of module 'axpy'"
new_skip = run("matrix", "--baseline", p("host.json"), write("skipped.json", skipped_now))
check(new_skip.returncode == 1 and "skip (regressed)" in new_skip.stdout
      and "1 regressed, 0 fixed" in new_skip.stdout,
      f"passed -> skipped is not a regression (exit {new_skip.returncode}): {new_skip.stdout}")
allowed = run("matrix", "--allow-new-skips", "--baseline", p("host.json"), p("skipped.json"))
check(allowed.returncode == 0 and "skip (regressed)" not in allowed.stdout
      and "0 regressed, 0 fixed" in allowed.stdout,
      f"--allow-new-skips still counts the skip (exit {allowed.returncode}): {allowed.stdout}")

# --- bad input -----------------------------------------------------------------------------
with open(p("bad.json"), "w") as f:
    f.write('{"schema": 1,\n "cases": [\n')
bad = run("matrix", p("bad.json"))
check(bad.returncode == 2 and "bad.json: not JSON: line" in bad.stderr,
      f"malformed JSON: exit {bad.returncode}, {bad.stderr}")
future = copy.deepcopy(records["host"])
future["schema"] = 2
f2 = run("matrix", write("future.json", future))
check(f2.returncode == 2 and "future.json: schema 2" in f2.stderr,
      f"schema 2: exit {f2.returncode}, {f2.stderr}")
twice = run("matrix", p("host.json"), write("again.json", records["host"]))
check(twice.returncode == 2 and "again.json and" in twice.stderr and "host.json both hold"
      in twice.stderr and "same backend" in twice.stderr,
      f"same backend twice: exit {twice.returncode}, {twice.stderr}")
bad_status = copy.deepcopy(records["host"])
bad_status["cases"][0]["status"] = "great"
bs = run("matrix", write("bad_status.json", bad_status))
check(bs.returncode == 2 and "status 'great'" in bs.stderr, f"bad status: {bs.stderr}")
missing = run("matrix", p("nope.json"))
check(missing.returncode == 2 and "nope.json" in missing.stderr, f"missing file: {missing.stderr}")

old = copy.deepcopy(records["host"])
old["gpuplug_version"] = "0.0.9"
old["machine"]["hostname"] = "older-box"
old["cases"] = old["cases"][:1]
two = run("matrix", p("host.json"), write("old.json", old))
check(two.returncode == 0 and "different gpuplug versions" in two.stdout and "0.0.9" in two.stdout,
      f"two versions: exit {two.returncode}, {two.stdout[:300]}")
check(any(l.split() == ["launch_axpy", "pass", "-"] for l in two.stdout.splitlines()),
      "a case missing from the older record is not '-'")

# --- hostile text --------------------------------------------------------------------------
hostile = copy.deepcopy(records["broken"])
hostile["machine"]["hostname"] = "evil"
crashed = next(c for c in hostile["cases"] if c["name"] == "launch_axpy")
crashed["message"] = "\x1b[2J<script>alert(1)</script> & done"
h = run("matrix", "--messages", "--html", p("h.html"), write("hostile.json", hostile))
check("\x1b" not in h.stdout and "\\x1b[2J" in h.stdout, "an escape sequence reached the terminal")
page = open(p("h.html")).read() if os.path.exists(p("h.html")) else ""
check("<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; done" in page,
      "markup from a record reached the page unescaped")

if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("ok: check --json/--junit and gpuplug matrix")
