#!/usr/bin/env python3
"""Markdown tables: peerplan's collective benchmark next to the PyTorch references.

Inputs:
  - one or more JSON files of benchmarks/collective_bench.cpp (--json): a doc
    with device, ranks, dtype, op (allreduce | fused), hidden, route, mode
    (eager | graph) and rows {bytes, count, route, time_us, nccl_time_us, wrong, ...};
  - the JSON of benchmarks/reference_allreduce.py (--reference, may repeat):
    rows {dtype, bytes, mode, nccl_us, symm_one_shot_us, symm_two_shot_us,
    nccl_plus_norm_us, fused_rows, errors}.

    python3 benchmarks/compare_results.py --reference ref.json ours1.json ours2.json > table.md

One table per peerplan file, i.e. per (op, dtype, mode, route). All-reduce rows
are matched to the reference by (dtype, mode, bytes); fused rows by (dtype,
mode, hidden, rows). Ratios are other / peerplan, as in the C++ benchmark:
> 1 means peerplan is faster. Missing values print as "–".
Only the Python standard library.
"""
import argparse
import json
import os
import sys

MISSING = "–"


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------

def load(path):
    with open(path) as f:
        return json.load(f)


def is_reference(doc):
    return doc.get("tool") == "reference_allreduce"


class Reference:
    """The reference rows, indexed for matching. Several files merge; where
    two give the same key, the first file with a value wins."""

    def __init__(self, docs):
        self.docs = docs
        self.allreduce = {}  # (dtype, mode, bytes) -> row
        self.fused = {}      # (dtype, mode, hidden, rows) -> row
        for doc in docs:
            hidden = doc.get("hidden")
            for row in doc.get("rows", []):
                key = (row.get("dtype"), row.get("mode"), row.get("bytes"))
                self.allreduce.setdefault(key, row)
                if row.get("nccl_plus_norm_us") is not None and row.get("fused_rows"):
                    # Several sizes can give the same row count (1K, 4K and
                    # 16K are all one row of 7168): the smallest size, first.
                    fkey = (row.get("dtype"), row.get("mode"), hidden, row["fused_rows"])
                    self.fused.setdefault(fkey, row)

    def row(self, dtype, mode, nbytes):
        return self.allreduce.get((dtype, mode, nbytes))

    def fused_row(self, dtype, mode, hidden, rows):
        return self.fused.get((dtype, mode, hidden, rows))

    def keys(self):
        """(dtype, mode) pairs present, in first-seen order."""
        seen = {}
        for dtype, mode, _ in self.allreduce:
            seen.setdefault((dtype, mode), None)
        return list(seen)

    def describe(self):
        parts = []
        for doc in self.docs:
            parts.append(f"{doc.get('gpu', '?')} ×{doc.get('world', '?')}, torch {doc.get('torch', '?')}, "
                         f"NCCL {doc.get('nccl', '?')}, symm-mem backend {doc.get('symm_backend') or '?'}"
                         + ("" if doc.get("complete", True) else " (run incomplete: partial results)"))
        return "; ".join(parts)


def ours_mode(doc, forced):
    """eager | graph: the --ours-eager/--ours-graph argument, else the doc's
    'mode' field (written by collective_bench.cpp), else unknown."""
    return forced or doc.get("mode") or "unknown"


# ---------------------------------------------------------------------------
# Formatting
# ---------------------------------------------------------------------------

def fmt_us(value):
    return MISSING if value is None else f"{value:.2f}"


def fmt_ratio(other, ours):
    if other is None or not ours:
        return MISSING
    return f"{other / ours:.2f}"


def fmt_bytes(n):
    if n is None:
        return MISSING
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            # 3.5 MiB, 3.99 MiB, 1022 KiB: short, and exact for powers of two.
            return f"{v:.0f} {unit}" if v >= 100 else f"{v:.3g} {unit}"
    return f"{n} B"


def table(header, rows, left=1):
    """Markdown table; the first `left` columns (labels) left-aligned, the
    numbers right-aligned."""
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join(["---"] * left + ["---:"] * (len(header) - left)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def nccl_time(row):
    """The C++ writes nccl_time_us; accept nccl_us too."""
    return row.get("nccl_time_us", row.get("nccl_us"))


def best(*values):
    present = [v for v in values if v is not None]
    return min(present) if present else None


class Notes:
    """Distinct reference errors and wrong results, listed under a table."""

    def __init__(self):
        self.lines = []

    def reference_errors(self, ref_row, keys):
        if not ref_row:
            return
        for key in keys:
            err = ref_row.get("errors", {}).get(key)
            if err:
                line = f"reference {key}: {err[:160]}"
                if line not in self.lines:
                    self.lines.append(line)

    def wrong(self, row):
        if row.get("wrong"):
            self.lines.append(f"peerplan {fmt_bytes(row.get('bytes'))}: #wrong {row['wrong']}")

    def render(self):
        return ("\n" + "".join(f"\n- {line}" for line in self.lines)) if self.lines else ""


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------

ALLREDUCE_HEADER = ["size", "peerplan route", "peerplan µs", "NCCL µs (ours, same run)",
                    "ratio vs NCCL", "torch NCCL µs", "symm one-shot µs", "symm two-shot µs",
                    "ratio vs best symm"]

FUSED_HEADER = ["size (rows)", "peerplan route", "peerplan fused µs", "NCCL+norm (ours) µs",
                "ratio vs ours", "torch NCCL+norm µs", "ratio vs torch"]


def allreduce_table(doc, mode, ref):
    dtype, notes, out = doc.get("dtype"), Notes(), []
    for row in doc.get("rows", []):
        r = ref.row(dtype, mode, row.get("bytes")) if ref else None
        t = row.get("time_us")
        one, two = (r.get("symm_one_shot_us"), r.get("symm_two_shot_us")) if r else (None, None)
        out.append([fmt_bytes(row.get("bytes")), row.get("route", MISSING), fmt_us(t),
                    fmt_us(nccl_time(row)), fmt_ratio(nccl_time(row), t),
                    fmt_us(r.get("nccl_us") if r else None), fmt_us(one), fmt_us(two),
                    fmt_ratio(best(one, two), t)])
        notes.wrong(row)
        notes.reference_errors(r, ("nccl", "symm_one_shot", "symm_two_shot"))
    return table(ALLREDUCE_HEADER, out, left=2) + notes.render()


def fused_table(doc, mode, ref):
    dtype, hidden, notes, out = doc.get("dtype"), doc.get("hidden"), Notes(), []
    for row in doc.get("rows", []):
        # The C++ JSON has no rows field: count = rows * hidden.
        nrows = row.get("rows") or (row.get("count", 0) // hidden if hidden else None)
        r = ref.fused_row(dtype, mode, hidden, nrows) if ref else None
        t, theirs = row.get("time_us"), r.get("nccl_plus_norm_us") if r else None
        out.append([f"{fmt_bytes(row.get('bytes'))} ({nrows if nrows else MISSING})",
                    row.get("route", MISSING), fmt_us(t), fmt_us(nccl_time(row)),
                    fmt_ratio(nccl_time(row), t), fmt_us(theirs), fmt_ratio(theirs, t)])
        notes.wrong(row)
        notes.reference_errors(r, ("nccl_plus_norm",))
    return table(FUSED_HEADER, out, left=2) + notes.render()


def reference_only_table(ref, dtype, mode):
    """A (dtype, mode) the reference measured and no peerplan file has."""
    header = ["size", "torch NCCL µs", "symm one-shot µs", "symm two-shot µs",
              "NCCL / best symm", "torch NCCL+norm µs (rows)"]
    notes, out = Notes(), []
    rows = sorted((r for (d, m, _), r in ref.allreduce.items() if d == dtype and m == mode),
                  key=lambda r: r.get("bytes", 0))
    for r in rows:
        nccl, one, two = r.get("nccl_us"), r.get("symm_one_shot_us"), r.get("symm_two_shot_us")
        norm = r.get("nccl_plus_norm_us")
        out.append([fmt_bytes(r.get("bytes")), fmt_us(nccl), fmt_us(one), fmt_us(two),
                    fmt_ratio(nccl, best(one, two)),
                    MISSING if norm is None else f"{norm:.2f} ({r.get('fused_rows')})"])
        notes.reference_errors(r, ("nccl", "symm_one_shot", "symm_two_shot", "nccl_plus_norm"))
    return table(header, out) + notes.render()


def heading(doc, path, mode):
    op = "fused all-reduce + add + RMSNorm" if doc.get("op") == "fused" else "all-reduce"
    hidden = f", hidden {doc.get('hidden')}" if doc.get("op") == "fused" else ""
    return (f"### {op}, {doc.get('dtype')}, {mode}, route {doc.get('route', '?')}{hidden}\n\n"
            f"`{os.path.basename(path)}`: {doc.get('device', '?')} ×{doc.get('ranks', '?')}, "
            f"NCCL {doc.get('nccl_version', '?')}, {doc.get('iters', '?')} calls per batch")


def mismatch_note(doc, ref):
    """Ratios across runs only mean something on the same GPUs and world."""
    if not ref:
        return ""
    worlds = {d.get("world") for d in ref.docs}
    if doc.get("ranks") not in worlds:
        return f"\n\n> note: {doc.get('ranks')} ranks here, reference world {sorted(worlds, key=str)}"
    return ""


def ours_sort_key(item):
    path, doc, mode = item
    return (doc.get("op") != "allreduce", doc.get("dtype") or "", mode, doc.get("route") or "", path)


def render(ours, ref):
    parts = ["# peerplan vs references", ""]
    if ref:
        parts.append(f"Reference: {ref.describe()}.")
    parts.append("Ratios are other / peerplan (> 1: peerplan faster); "
                 "µs per call, median of 7 batches, slowest rank.\n")
    covered = set()
    for path, doc, mode in sorted(ours, key=ours_sort_key):
        parts.append(heading(doc, path, mode) + mismatch_note(doc, ref) + "\n")
        if doc.get("op") == "fused":
            parts.append(fused_table(doc, mode, ref) + "\n")
        else:
            covered.add((doc.get("dtype"), mode))
            parts.append(allreduce_table(doc, mode, ref) + "\n")
    if ref:
        for dtype, mode in ref.keys():
            if (dtype, mode) not in covered:
                parts.append(f"### reference only: all-reduce, {dtype}, {mode}\n")
                parts.append(reference_only_table(ref, dtype, mode) + "\n")
    return "\n".join(parts)


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ours", nargs="*", help="collective_bench --json files")
    p.add_argument("--reference", action="append", default=[],
                   help="reference_allreduce.py JSON (repeatable)")
    p.add_argument("--ours-eager", action="append", default=[], metavar="FILE",
                   help="a collective_bench JSON to read as eager, whatever it says")
    p.add_argument("--ours-graph", action="append", default=[], metavar="FILE",
                   help="a collective_bench JSON to read as graph, whatever it says")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    ref_docs, ours = [], []
    for path in args.reference:
        ref_docs.append(load(path))
    inputs = ([(p, None) for p in args.ours] + [(p, "eager") for p in args.ours_eager]
              + [(p, "graph") for p in args.ours_graph])
    for path, forced in inputs:
        doc = load(path)
        if is_reference(doc):  # a reference given without --reference: take it as one
            ref_docs.append(doc)
            continue
        mode = ours_mode(doc, forced)
        if mode == "unknown":
            print(f"compare_results: {path} has no mode; use --ours-eager/--ours-graph",
                  file=sys.stderr)
        ours.append((path, doc, mode))
    if not ours and not ref_docs:
        print("compare_results: nothing to compare (see --help)", file=sys.stderr)
        return 1
    ref = Reference(ref_docs) if ref_docs else None
    print(render(ours, ref))
    return 0


if __name__ == "__main__":
    sys.exit(main())
