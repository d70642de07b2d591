#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs gemm_pipeline --trace FILE on host and checks FILE as Chrome trace-event JSON, the format
Perfetto and chrome://tracing load: every event has the fields its phase needs, the calls the
pipeline makes are there with their arguments (kernel names, grids, sizes), each thread and the
default stream have a named track, and the live-bytes counter ends at 0.

usage: check_trace.py GEMM_PIPELINE WORKDIR
"""
import collections
import json
import os
import subprocess
import sys


def fail(why):
    print("check_trace: FAIL: " + why)
    sys.exit(1)


def main():
    pipeline, workdir = sys.argv[1], sys.argv[2]
    os.makedirs(workdir, exist_ok=True)
    trace = os.path.join(workdir, "gemm_pipeline-trace.json")
    if os.path.exists(trace):
        os.remove(trace)
    env = dict(os.environ)
    env.pop("GPUPLUG_LAYERS", None)
    run = subprocess.run([pipeline, "--backend", "host", "--steps", "3", "--trace", trace],
                         capture_output=True, text=True, env=env, timeout=300)
    out = run.stdout + run.stderr
    if run.returncode != 0:
        fail("gemm_pipeline exited %d:\n%s" % (run.returncode, out))
    for expected in ("trace summary: ", "launch: 12 calls", "trace: wrote "):
        if expected not in out:
            fail("the log lacks %r:\n%s" % (expected, out))
    with open(trace) as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    if doc["otherData"]["dropped_events"] != 0:
        fail("events dropped in a short run")
    need = {"X": ("name", "ts", "dur", "pid", "tid"), "M": ("name", "pid", "tid", "args"),
            "C": ("name", "ts", "pid", "args")}
    for e in events:
        if e.get("ph") not in need:
            fail("unknown phase in %r" % e)
        missing = [k for k in need[e["ph"]] if k not in e]
        if missing:
            fail("%r lacks %s" % (e, missing))
    calls = collections.Counter(e["name"].split(" ")[0] for e in events if e["ph"] == "X")
    for op in ("alloc", "free", "copy_h2d", "copy_d2h", "get_function", "launch"):
        if calls[op] == 0:
            fail("no %s call in the trace (calls: %s)" % (op, dict(calls)))
    launches = [e for e in events if e["ph"] == "X" and e["name"].startswith("launch ")]
    kernels = {e["args"]["kernel"] for e in launches}
    if not {"gemm::gemm_f32", "gemm::gemm_a_e4m3"} <= kernels:
        fail("launches do not name their kernels: %s" % kernels)
    if any("grid" not in e["args"] or "block" not in e["args"] for e in launches):
        fail("a launch without grid or block")
    tracks = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    if "thread 1" not in tracks or "stream default (queued)" not in tracks:
        fail("tracks: %s" % tracks)
    counters = [e for e in events if e["ph"] == "C"]
    if not counters or counters[-1]["args"]["live"] != 0:
        fail("the live-bytes counter does not end at 0")
    print("check_trace: %d events, %d calls, kernels %s, tracks %s: ok" %
          (len(events), sum(calls.values()), sorted(kernels), sorted(tracks)))


if __name__ == "__main__":
    main()
