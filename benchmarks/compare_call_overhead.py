#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Python's call overhead over C++'s: the JSON of
benchmarks/call_overhead_bench.cpp (--json) next to that of
python/benchmarks/call_overhead.py (--json), per case.

    python3 benchmarks/compare_call_overhead.py cpp.json py.json --md overhead.md

Per case (matched by name): C++ ns per call (peerplan::Communicator),
Python ns per call (the package's call), their difference and whether it is
within the issue's limit (--limit-ns, default 3000: "an eager call from
Python costs at most ~3 us more than the same call from C++"); and, to see
where the difference goes, the C interface called from C++, the same C
function called through ctypes without the package's wrapper, and the
wrapper's own cost (Python - ctypes). A table on stdout, the same as
markdown with --md.

--check: every case of both files must be there with a positive ns per call
for each of its interfaces (exit 1 otherwise; what the CPU smoke test
asserts). --require: exit 1 when a difference is over the limit, where the
times measure the calls: not where ranks shared a GPU (a rank's launch then
waits for the other's kernels, so the times are the GPU's time slices) or ran
the host backend (each time includes the exchange); those tables are printed
with the limit not applied. Without them the exit status is 0 whenever both
files could be read. Only the Python standard library.
"""
import argparse
import json
import sys

CASES = ["empty", "allreduce_1x512", "allreduce_8x4096", "fused_1x4096", "fused_16x4096"]
CPP_APIS = ("cpp", "c")
PY_APIS = ("python", "ctypes")
MISSING = "—"


def load(path):
    with open(path) as f:
        return json.load(f)


def rows_by_key(doc):
    return {(row.get("case"), row.get("api")): row for row in doc.get("rows", [])}


def check(doc, path, apis):
    """Problems of one file: missing cases or interfaces, non-positive times."""
    problems = []
    rows = rows_by_key(doc)
    for case in CASES:
        for api in apis:
            row = rows.get((case, api))
            if row is None:
                problems.append(f"{path}: no row for case {case}, api {api}")
                continue
            ns = row.get("ns_per_call")
            if not isinstance(ns, (int, float)) or not ns > 0:
                problems.append(f"{path}: {case}/{api}: ns_per_call {ns!r} is not positive")
            ranks = row.get("rank_ns_per_call") or []
            if len(ranks) != doc.get("ranks") or not all(v > 0 for v in ranks):
                problems.append(f"{path}: {case}/{api}: rank_ns_per_call {ranks!r} is not one "
                                f"positive value per rank ({doc.get('ranks')} ranks)")
            if row.get("op") != "empty" and not row.get("route"):
                problems.append(f"{path}: {case}/{api}: no route")
    return problems


def ns(rows, case, api):
    row = rows.get((case, api))
    return row.get("ns_per_call") if row else None


def fmt(value, digits=0):
    return MISSING if value is None else f"{value:,.{digits}f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cpp_json", help="benchmarks/call_overhead_bench.cpp --json")
    parser.add_argument("python_json", help="python/benchmarks/call_overhead.py --json")
    parser.add_argument("--md", help="write the markdown table to this file")
    parser.add_argument("--limit-ns", type=float, default=3000.0,
                        help="the largest Python - C++ difference allowed (ns; default 3000)")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 unless every case is there with positive times")
    parser.add_argument("--require", action="store_true",
                        help="exit 1 when a difference is over --limit-ns")
    args = parser.parse_args()

    cpp, py = load(args.cpp_json), load(args.python_json)
    problems = []
    if args.check:
        problems += check(cpp, args.cpp_json, CPP_APIS) + check(py, args.python_json, PY_APIS)
    # Differences that make the comparison unfair, said next to the table.
    caveats = []
    unfair = False  # the times measure more than the calls: the limit is not applied
    for key in ("backend", "ranks", "dtype", "peerplan_version"):
        if cpp.get(key) != py.get(key):
            caveats.append(f"{key} differs: C++ {cpp.get(key)!r}, Python {py.get(key)!r}")
    if cpp.get("gpus_shared") or py.get("gpus_shared"):
        unfair = True
        caveats.append("ranks shared a GPU: the GPU time-slices them; run one rank per GPU")
    if cpp.get("backend") == "host" or py.get("backend") == "host":
        unfair = True
        caveats.append("host backend: every call returns when its exchange is done, so each "
                       "time includes the exchange (and its noise), not only the call's overhead")
    c_rows, p_rows = rows_by_key(cpp), rows_by_key(py)

    header = ["case", "route", "C++ ns", "Python ns", "Python − C++ ns",
              f"≤ {args.limit_ns / 1000:g} µs", "C API from C++ ns", "ctypes ns",
              "wrapper ns (Python − ctypes)"]
    table, over = [], []
    for case in CASES:
        c_ns, p_ns = ns(c_rows, case, "cpp"), ns(p_rows, case, "python")
        c_api, raw = ns(c_rows, case, "c"), ns(p_rows, case, "ctypes")
        diff = p_ns - c_ns if c_ns is not None and p_ns is not None else None
        verdict = MISSING if diff is None else ("yes" if diff <= args.limit_ns else "NO")
        if verdict == "NO":
            over.append(case)
        routes = {r.get("route") for r in (c_rows.get((case, "cpp")), p_rows.get((case, "python")))
                  if r is not None}
        route = "/".join(sorted(r for r in routes if r)) or MISSING
        if len(routes) > 1:
            caveats.append(f"{case}: the routes differ (C++ vs Python): {route}")
        wrapper = p_ns - raw if p_ns is not None and raw is not None else None
        table.append([case, route, fmt(c_ns), fmt(p_ns), fmt(diff), verdict, fmt(c_api), fmt(raw),
                      fmt(wrapper)])

    title = (f"Host ns per eager call, {cpp.get('backend')} backend ({cpp.get('device')}), "
             f"{cpp.get('ranks')} ranks, {cpp.get('dtype')}; Python "
             f"{py.get('python_version')} with {py.get('tensors')}; median batch of the "
             f"slowest rank")
    widths = [max(len(str(r[i])) for r in [header] + table) for i in range(len(header))]
    print(title)
    for r in [header] + table:
        print("  ".join(str(v).rjust(w) if i > 1 else str(v).ljust(w)
                        for i, (v, w) in enumerate(zip(r, widths))))
    for c in caveats:
        print(f"note: {c}")
    if args.md:
        lines = [f"{title}.", "", "| " + " | ".join(header) + " |",
                 "|" + "|".join("---" if i < 2 else "---:" for i in range(len(header))) + "|"]
        lines += ["| " + " | ".join(str(v) for v in r) + " |" for r in table]
        if caveats:
            lines += [""] + [f"- {c}" for c in caveats]
        with open(args.md, "w") as f:
            f.write("\n".join(lines) + "\n")
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    if problems:
        return 1
    if over:
        enforced = args.require and not unfair
        print(f"over the {args.limit_ns:g} ns limit: {', '.join(over)}"
              + ("" if enforced or not args.require else
                 " (not applied: these times measure more than the calls, see the notes)"),
              file=sys.stderr if enforced else sys.stdout)
        if enforced:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
