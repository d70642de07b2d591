#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Turns the benchmarks' JSON (--benchmark_format=json) into the ratio tables of docs/PERFORMANCE.md.
"""Usage: report.py --op-cache FILE --backend FILE [--pipeline FILE]

Prints Markdown tables: OpCache hits against the baselines (1 thread), 2-thread scaling,
dispatch, ledger, and the GEMM pipeline's steady state, each with its target and whether this
run met it. Every figure comes from one run; ratios compare benchmarks of the same run.
ns/op is per thread: threads / items_per_second (items/s is the aggregate rate of all threads,
measured in real time). With repetitions, the median of the repetitions is used.
"""
import argparse
import json
import re
import sys

HITS = ["kernel_hit", "scratch_fits", "first_shape_seen", "once_seen", "first_n_past", "n_tile"]
IMPLS = ["opcache", "seed_shared_mutex", "std_mutex", "unsync_flat"]


def load(path):
    """{(name, threads): items_per_second}, the median when there are repetitions."""
    with open(path) as f:
        data = json.load(f)
    singles, medians = {}, {}
    for b in data["benchmarks"]:
        if b.get("error_occurred"):
            continue
        m = re.match(r"^(.*?)(?:/real_time)?/threads:(\d+)$", b["run_name"])
        if not m or "items_per_second" not in b:
            continue
        key = (m.group(1), int(m.group(2)))
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[key] = b["items_per_second"]
        else:
            singles.setdefault(key, b["items_per_second"])
    singles.update(medians)
    return singles, data.get("context", {})


def ns_per_op(rates, name, threads=1):
    r = rates.get((name, threads))
    return None if r is None else threads * 1e9 / r


def fmt(v, digits=1):
    return "n/a" if v is None else f"{v:.{digits}f}"


def verdict(ok):
    return "n/a" if ok is None else ("met" if ok else "**missed**")


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--op-cache", required=True)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--pipeline")
    args = ap.parse_args()
    oc, ctx = load(args.op_cache)
    be, _ = load(args.backend)
    missed = 0

    def count(ok):
        nonlocal missed
        if ok is False:
            missed += 1
        return verdict(ok)

    print(f"Machine: {ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz, "
          f"load average at start {', '.join(f'{x:.2f}' for x in ctx.get('load_avg', []))}; "
          f"Google Benchmark library built as: {ctx.get('library_build_type', '?')}")
    print()
    print("### OpCache hits, one thread (ns/op; (a) seed port: shared_mutex + unordered_map<string>, "
          "(b) std::mutex + the same map, (c) unsynchronized open addressing, same hash)")
    print()
    print("| hit | OpCache | (a) | (b) | (c) | OpCache / (c) (target <= 2) | (a) / OpCache (target >= 3) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for hit in HITS:
        v = {impl: ns_per_op(oc, f"{hit}/{impl}") for impl in IMPLS}
        vs_c = ratio(v["opcache"], v["unsync_flat"])
        vs_a = ratio(v["seed_shared_mutex"], v["opcache"])
        print(f"| {hit} | {fmt(v['opcache'])} | {fmt(v['seed_shared_mutex'])} | "
              f"{fmt(v['std_mutex'])} | {fmt(v['unsync_flat'])} | "
              f"{fmt(vs_c, 2)} {count(None if vs_c is None else vs_c <= 2.0)} | "
              f"{fmt(vs_a, 2)} {count(None if vs_a is None else vs_a >= 3.0)} |")
    print()
    print("### OpCache hits, two threads (aggregate Mops/s; scaling = 2-thread / 1-thread aggregate)")
    print()
    print("| hit | OpCache 1 thr | OpCache 2 thr | OpCache scaling (target >= 1.8) | (a) scaling | "
          "(b) scaling | (c) scaling |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for hit in HITS:
        s = {impl: ratio(oc.get((f"{hit}/{impl}", 2)), oc.get((f"{hit}/{impl}", 1))) for impl in IMPLS}
        one = oc.get((f"{hit}/opcache", 1))
        two = oc.get((f"{hit}/opcache", 2))
        print(f"| {hit} | {fmt(one and one / 1e6)} | {fmt(two and two / 1e6)} | "
              f"{fmt(s['opcache'], 2)} {count(None if s['opcache'] is None else s['opcache'] >= 1.8)} | "
              f"{fmt(s['seed_shared_mutex'], 2)} | {fmt(s['std_mutex'], 2)} | {fmt(s['unsync_flat'], 2)} |")
    print()
    print("### Dispatch: a no-op host kernel, grid 1x1x1 (ns/op)")
    print()
    print("| threads | GpuBackend::launch | plugin table launch | difference (target <= 20 ns) |")
    print("|---:|---:|---:|---:|")
    for t in (1, 2):
        g = ns_per_op(be, "launch/gpuplug", t)
        d = ns_per_op(be, "launch/plugin_table", t)
        diff = None if g is None or d is None else g - d
        mark = count(None if diff is None else diff <= 20.0) if t == 1 else "(info)"
        print(f"| {t} | {fmt(g)} | {fmt(d)} | {fmt(diff)} {mark} |")
    print()
    print("### Ledger: alloc + free of one buffer on host (ns/op)")
    print()
    print("The target row is the ledger's own cost (AllocationLedger around aligned_alloc/free); "
          "the full paths add the C ABI edge, the SDK adapter and the core (information).")
    print()
    print("| bytes | threads | ledger alone | ratio to raw (target < 1.5) | plugin table alloc/free | "
          "ratio | GpuBackend::alloc/free | ratio | aligned_alloc/free (raw) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in (256, 65536):
        for t in (1, 2):
            le = ns_per_op(be, f"alloc_free/ledger/{size}", t)
            d = ns_per_op(be, f"alloc_free/plugin_table/{size}", t)
            g = ns_per_op(be, f"alloc_free/gpuplug/{size}", t)
            r = ns_per_op(be, f"alloc_free/raw/{size}", t)
            q = ratio(le, r)
            mark = count(None if q is None else q < 1.5) if t == 1 else "(info)"
            print(f"| {size} | {t} | {fmt(le)} | {fmt(q, 2)} {mark} | {fmt(d)} | "
                  f"{fmt(ratio(d, r), 2)} | {fmt(g)} | {fmt(ratio(g, r), 2)} | {fmt(r)} |")
    if args.pipeline:
        print()
        print("### Steady state: gemm_pipeline on host")
        print()
        with open(args.pipeline) as f:
            text = f.read()
        m = re.search(r"allocations after warm-up:\s*(.*)", text)
        line = m.group(1).strip() if m else None
        ok = None if m is None else line.startswith("+0 ") or line.startswith("0 ")
        print(f"allocations after the first step: {line or 'not found in the output'} "
              f"{count(ok)}")
    print()
    print(f"{missed} target(s) missed in this run." if missed else "Every target met in this run.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
