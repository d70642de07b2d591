#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""CTest driver: mem_check.py <gpuplug> <gemm_pipeline> <memory.schema.json>

`gemm_pipeline --memory-snapshot` on host writes two snapshots (after warm-up and at exit) that
validate against the installed schema, with the model cache's scratch in op_scratch; `gpuplug
mem` prints their summary (sites, peaks and kinds, OpCache scratch per cache and tag, the
history), their diff (the model's buffers gone at exit) and their page, and says device and
managed memory apart (a made-up snapshot with both, in the totals, the sites and the diff); bad
input (a missing file, bad JSON, another schema, a field of the wrong type, usage errors) exits
2 naming the file and the reason. python3-jsonschema is required (scripts/lib/common.sh installs
it): without it this fails.
"""
import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError:
    sys.exit("FAIL: python3-jsonschema is not installed (apt-get install python3-jsonschema)")

tool, pipeline, schema_file = sys.argv[1:4]
schema = json.load(open(schema_file))
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


work = tempfile.mkdtemp(prefix="gpuplug-mem-")
atexit.register(shutil.rmtree, work, True)
p = lambda name: os.path.join(work, name)


def run(*cmd):
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=300)


r = run(pipeline, "--backend", "host", "--steps", "3", "--m", "64", "--n", "64", "--k", "64",
        "--log-level", "warning", "--memory-snapshot", p("run.json"))
check(r.returncode == 0, f"gemm_pipeline --memory-snapshot: exit {r.returncode}: {r.stderr}")
check(f"memory snapshot: {p('run.warmup.json')}" in r.stdout, "no warm-up snapshot line")
check(f"memory snapshot: {p('run.json')}" in r.stdout, "no exit snapshot line")

docs = {}
for name in ("run.warmup.json", "run.json"):
    if not os.path.exists(p(name)):
        failures.append(f"{name} was not written")
        continue
    doc = json.load(open(p(name)))
    docs[name] = doc
    try:
        jsonschema.validate(doc, schema)
    except jsonschema.ValidationError as e:
        failures.append(f"{name} does not validate: {e.message} at {list(e.absolute_path)}")

warm, end = docs.get("run.warmup.json"), docs.get("run.json")
if warm and end:
    check(warm["complete"] and warm["backend"] == "host:0", "the warm-up snapshot is not host:0's")
    check(warm["totals"]["live_count"] > 0, "nothing live after warm-up")
    check(end["totals"]["live_count"] == 0, "the exit snapshot (after teardown) still holds memory")
    check(end["totals"]["peak_bytes"] >= warm["totals"]["live_bytes"], "the peak fell")
    check(end["history"]["capacity"] == 4096 and end["history"]["events"],
          "gemm_pipeline did not turn the history on")
    sites = {s["site"] for s in warm["sites"]}
    check(any(s.startswith("op scratch (mlp): ") for s in sites),
          f"no per-tag scratch site of the model cache in {sorted(sites)}")
    # The model cache's scratch is in op_scratch too, each tag naming its cache and matching the
    # ledger's site "<cache>: <tag>".
    scratch = {f"{m['cache']}: {m['tag']}": m["live_bytes"] for m in warm["op_scratch"]}
    check(scratch and all(c.startswith("op scratch (mlp): ") for c in scratch),
          f"op_scratch does not hold the model cache's tags: {warm['op_scratch']}")
    live = {s["site"]: s["live_bytes"] for s in warm["sites"]}
    check(all(live.get(site) == bytes_ for site, bytes_ in scratch.items()),
          f"op_scratch {scratch} does not match the ledger's scratch sites {live}")
    allocs = sum(e["action"] == "alloc" for e in end["history"]["events"])
    frees = sum(e["action"] == "free" for e in end["history"]["events"])
    check(allocs == frees == end["totals"]["total_allocs"],
          f"history of the whole run: {allocs} allocs, {frees} frees, "
          f"{end['totals']['total_allocs']} allocations")

# The summary: totals, every site with its peak, the history kept.
r = run(tool, "mem", p("run.warmup.json"))
check(r.returncode == 0, f"mem: exit {r.returncode}: {r.stderr}")
check(re.search(r"^host:0: \d+ live allocations, \S+ \S+ \(\S+ \S+ device, \S+ \S+ managed; "
                r"peak .*\); \d+ allocs, \d+ frees", r.stdout, re.M) is not None,
      f"mem: no totals line with device and managed apart:\n{r.stdout}")
check(re.search(r"^site +live +count +peak +kind$", r.stdout, re.M) is not None,
      "mem: no site table")
check(re.search(r"^op scratch \(mlp\): x +\S+ \S+ +1 +\S+ \S+ +device$", r.stdout, re.M),
      f"mem: the scratch sites are missing, or their kind:\n{r.stdout}")
check(re.search(r"^  op scratch \(mlp\): x  \S+ \S+ live", r.stdout, re.M),
      f"mem: the model cache's scratch is not listed per tag:\n{r.stdout}")
check(re.search(r"^history: \d+ events kept of \d+ \(memory_history=4096\)$", r.stdout, re.M)
      is not None, f"mem: no history line:\n{r.stdout}")

# Device and managed memory apart: a snapshot with both (the limit counts device memory only).
kib = 1024
mixed = {"schema": 1, "backend": "host:0", "complete": True, "device_memory_limit": 3 * kib * kib,
         "device": None,
         "totals": {"live_bytes": 3584 * kib, "live_count": 3, "peak_bytes": 3584 * kib,
                    "live_managed_bytes": 1536 * kib, "total_allocs": 3, "total_frees": 0},
         "sites": [{"site": "weights", "live_bytes": 2048 * kib, "live_count": 1,
                    "peak_bytes": 2048 * kib},
                   {"site": "kv", "live_bytes": 1536 * kib, "live_count": 2,
                    "peak_bytes": 1536 * kib}],
         "allocations": [
             {"ptr": "0x1000", "bytes": 2048 * kib, "kind": "device", "site": "weights",
              "sequence": 1, "time_ns": None},
             {"ptr": "0x2000", "bytes": 512 * kib, "kind": "managed", "site": "kv", "sequence": 2,
              "time_ns": None},
             {"ptr": "0x3000", "bytes": 1024 * kib, "kind": "managed", "site": "kv",
              "sequence": 3, "time_ns": None}],
         "history": {"capacity": 0, "dropped": 0, "events": []}, "op_scratch": []}
json.dump(mixed, open(p("mixed.json"), "w"))
r = run(tool, "mem", p("mixed.json"))
check(r.returncode == 0, f"mem mixed: exit {r.returncode}: {r.stderr}")
check("3 live allocations, 3.5 MiB (2.0 MiB device, 1.5 MiB managed; peak 3.5 MiB)" in r.stdout
      and "device_memory_limit 3.0 MiB of device memory" in r.stdout,
      f"mem: device and managed are not apart in the totals:\n{r.stdout}")
check(re.search(r"^kv +1\.5 MiB +2 +1\.5 MiB +managed$", r.stdout, re.M) and
      re.search(r"^weights +2\.0 MiB +1 +2\.0 MiB +device$", r.stdout, re.M),
      f"mem: the sites' kinds are missing:\n{r.stdout}")
r = run(tool, "mem", "diff", p("mixed.json"), p("run.json"))
check("device 2.0 MiB -> 0 B, managed 1.5 MiB -> 0 B" in r.stdout,
      f"mem diff: device and managed are not apart:\n{r.stdout}")

# Many sites, a colour each (tool.mem.page checks how far apart they look, in a browser).
many = json.loads(json.dumps(mixed))
many["allocations"] = [{"ptr": hex(0x1000 * (i + 1)), "bytes": kib, "kind": "device",
                        "site": f"layer {i}", "sequence": i + 1, "time_ns": None}
                       for i in range(40)]
many["sites"] = [{"site": f"layer {i}", "live_bytes": kib, "live_count": 1, "peak_bytes": kib}
                 for i in range(40)]
many["totals"].update(live_bytes=40 * kib, live_count=40, live_managed_bytes=0)
json.dump(many, open(p("many.json"), "w"))
r = run(tool, "mem", p("many.json"), "--html", p("many.html"))
fills = re.findall(r'<path class="band"[^>]* fill="(#[0-9A-F]{6})"',
                   open(p("many.html")).read() if r.returncode == 0 else "")
check(len(fills) == 40 and len(set(fills)) == 40,
      f"mem --html: {len(set(fills))} colours for {len(fills)} bands of 40 sites")

# Times out of order (a file edited by hand): the bands stay in the plot, left of the labels.
if end and len(end["history"]["events"]) > 2:
    shuffled = json.loads(json.dumps(end))
    shuffled["history"]["events"][1]["time_ns"] = 0
    json.dump(shuffled, open(p("shuffled.json"), "w"))
    r = run(tool, "mem", p("shuffled.json"), "--html", p("shuffled.html"))
    paths = re.findall(r'<path class="band"[^>]* d="([^"]+)"',
                       open(p("shuffled.html")).read() if r.returncode == 0 else "")
    xs = [float(x) for d in paths for x in re.findall(r"[ML]([\d.-]+) ", d)]
    check(paths and min(xs) >= 80 and max(xs) <= 850,
          f"mem --html: times out of order put a band at x {min(xs, default=0)}..{max(xs, default=0)}")

# The diff: every site the model held is gone at exit.
r = run(tool, "mem", "diff", p("run.warmup.json"), p("run.json"))
check(r.returncode == 0, f"mem diff: exit {r.returncode}: {r.stderr}")
check(re.search(r"^host:0 -> host:0: live .* -> 0 B \(-", r.stdout, re.M) is not None,
      f"mem diff: no totals line:\n{r.stdout}")
check(r.stdout.count("(gone)") == len([s for s in warm["sites"] if s["live_count"]]) if warm else 0,
      f"mem diff: not every live site is gone:\n{r.stdout}")
r = run(tool, "mem", "diff", p("run.json"), p("run.json"))
check(r.returncode == 0 and "no call site changed" in r.stdout, f"mem diff A A: {r.stdout}")

# The page: one band per site that held memory, the peak, the allocations table.
r = run(tool, "mem", p("run.warmup.json"), "--html", p("run.html"))
check(r.returncode == 0, f"mem --html: exit {r.returncode}: {r.stderr}")
page = open(p("run.html")).read() if os.path.exists(p("run.html")) else ""
bands = page.count('<path class="band"')
check(warm is not None and bands == len([s for s in warm["sites"] if s["peak_bytes"]]),
      f"mem --html: {bands} bands for the snapshot's sites")
check('id="peak"' in page and 'id="allocations"' in page, "mem --html: no peak or no table")
scratch_table = re.search(r'<table id="scratch">.*?</table>', page, re.S)
check(scratch_table is not None and "<td>op scratch (mlp)</td><td>x</td>" in scratch_table.group(0),
      "mem --html: the model cache's scratch is not in the page's scratch table")
check(not re.search(r"(src|href)=\"https?:", page), "mem --html: the page fetches something")

# Bad input: exit 2, naming the file and the reason.
open(p("bad.json"), "w").write('{"schema": 1,\n "totals": ')
doc = json.loads(json.dumps(warm or {"schema": 1}))
doc["schema"] = 2
json.dump(doc, open(p("v2.json"), "w"))
doc["schema"] = 1
if "allocations" in doc and doc["allocations"]:
    doc["allocations"][0]["bytes"] = "many"
json.dump(doc, open(p("typed.json"), "w"))
for args, want in [
    ([p("missing.json")], "missing.json"),
    ([p("bad.json")], "bad.json: line "),
    ([p("v2.json")], "v2.json: schema 2, this gpuplug reads 1"),
    ([p("typed.json")], "typed.json: allocations[0]: \"bytes\" is not an unsigned integer"),
    ([], "no snapshot"),
    (["diff", p("run.json")], "diff needs two snapshots"),
    ([p("run.json"), "--frobnicate"], "unknown option '--frobnicate'"),
    ([p("run.json"), "--html"], "--html needs a file"),
]:
    r = run(tool, "mem", *args)
    check(r.returncode == 2, f"mem {args}: exit {r.returncode}, not 2")
    check(want in r.stderr, f"mem {args}: stderr does not say {want!r}: {r.stderr!r}")

if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"ok: gemm_pipeline snapshots validate; gpuplug mem summary, diff, page, kinds apart and 8 "
      f"bad inputs")
