#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Markdown tables: peerplan's collective benchmark next to the PyTorch references.

Inputs:
  - one or more JSON files of benchmarks/collective_bench.cpp (--json): a doc
    with device, ranks, dtype, op (allreduce | fused), hidden, route, mode
    (eager | graph) and rows {bytes, count, route, time_us, nccl_time_us, wrong, ...};
  - the JSON of benchmarks/reference_allreduce.py (--reference, may repeat):
    rows {dtype, bytes, mode, nccl_us, symm_one_shot_us, symm_two_shot_us,
    nccl_plus_norm_us, fused_rows, errors}.

  - the JSON of the peers' benchmark (shared/bench/peers/run.sh: peers.json,
    --peers): TRT-LLM (plain and fused), vLLM, FlashInfer PCIe IPC, torch
    NCCL, bf16, graph and eager;
  - the output of shared/bench/limits.cu (--limits): launch floor, NVLink
    latency and bandwidth.

    python3 benchmarks/compare_results.py --reference ref.json --peers peers.json \
        --limits limits.txt ours1.json ours2.json > table.md

Output, in this order:
  - "## Against the peers" (with --peers): bf16, CUDA graphs, peerplan (route
    auto) next to every peer and NCCL, the best peer per size and
    peerplan / best peer (< 1: peerplan faster; the performance issue's
    target is <= 0.90), the fused op against TRT-LLM's fused kernel, and the
    physical limits (--limits);
  - "## Targets": the performance issue's targets computed from the route-auto
    files (and the reference), one column per dtype;
  - "## <dtype>" per dtype: one all-reduce table with graph and eager side by
    side (peerplan, NCCL of the same run, best symmetric memory, host ns per
    eager call) and one fused table (fused, plain all-reduce of the same
    bytes, NCCL + add/RMSNorm), from the route-auto files;
  - "## Per-file tables": one table per peerplan file, i.e. per (op, dtype,
    mode, route), every route.
All-reduce rows are matched to the reference by (dtype, mode, bytes); fused
rows by (dtype, mode, hidden, rows). Ratios in the tables are other /
peerplan, as in the C++ benchmark: > 1 means peerplan is faster (fused /
plain is the fused op's cost over the plain all-reduce). Missing values print
as "—". Only the Python standard library.
"""
import argparse
import json
import os
import sys

MISSING = "—"


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


# ---------------------------------------------------------------------------
# The matrix: per dtype, graph and eager side by side (route auto), and the
# performance issue's targets computed from it
# ---------------------------------------------------------------------------

KIB, MIB = 1 << 10, 1 << 20
DTYPE_ORDER = ("bf16", "f16", "f32")


def fmt_ns(value):
    return MISSING if value is None else f"{value:.0f}"


def fmt_x(value):
    return MISSING if value is None else f"{value:.2f}"


def div(a, b):
    return a / b if a is not None and b else None


def is_p2p(route):
    return bool(route) and route != "fallback"


def symm_best(ref_row):
    """(µs, 'one' | 'two') of the faster symmetric-memory all-reduce, or (None, None)."""
    if not ref_row:
        return None, None
    one, two = ref_row.get("symm_one_shot_us"), ref_row.get("symm_two_shot_us")
    if one is None and two is None:
        return None, None
    if two is None or (one is not None and one <= two):
        return one, "one-shot"
    return two, "two-shot"


def extreme(items, pick=max):
    """items: (value, label) with value None skipped; the max (or min) pair or None."""
    present = [(v, w) for v, w in items if v is not None]
    return pick(present, key=lambda p: p[0]) if present else None


class Matrix:
    """The route-auto files, indexed by (op, dtype, mode); one doc each (the
    first path in sorted order; the others are noted and stay in the per-file
    tables)."""

    def __init__(self, ours, ref):
        self.ref, self.docs, self.dupes = ref, {}, []
        for path, doc, mode in sorted(ours, key=lambda item: item[0]):
            if doc.get("route") != "auto" or mode not in ("graph", "eager"):
                continue
            key = (doc.get("op") or "allreduce", doc.get("dtype"), mode)
            if key in self.docs:
                self.dupes.append(f"{os.path.basename(path)} (same op, dtype and mode as "
                                  f"{os.path.basename(self.docs[key][0])}: per-file tables only)")
                continue
            self.docs[key] = (path, doc)
        present = {d for _, d, _ in self.docs}
        self.dtypes = [d for d in DTYPE_ORDER if d in present] + sorted(
            d for d in present if d not in DTYPE_ORDER and d is not None)

    def doc(self, op, dtype, mode):
        entry = self.docs.get((op, dtype, mode))
        return entry[1] if entry else None

    def rows(self, op, dtype, mode):
        """bytes -> row of that file ({} when there is none)."""
        doc = self.doc(op, dtype, mode)
        return {r.get("bytes"): r for r in doc.get("rows", [])} if doc else {}

    def ref_row(self, dtype, mode, nbytes):
        return self.ref.row(dtype, mode, nbytes) if self.ref else None

    # -- tables ------------------------------------------------------------

    ALLREDUCE = ["size", "route", "pp graph µs", "NCCL graph µs", "NCCL ÷ pp",
                 "symm best graph µs", "symm ÷ pp", "pp eager µs", "NCCL eager µs", "NCCL ÷ pp",
                 "pp host ns/call", "NCCL host ns/call"]

    FUSED = ["size (rows)", "route", "fused graph µs", "plain graph µs", "fused ÷ plain",
             "NCCL+norm graph µs", "NCCL+norm ÷ fused", "fused eager µs", "plain eager µs",
             "fused ÷ plain", "NCCL+norm eager µs", "NCCL+norm ÷ fused", "fused host ns/call"]

    @staticmethod
    def route_of(g, e):
        routes = [r.get("route") for r in (g, e) if r and r.get("route")]
        if not routes:
            return MISSING
        return routes[0] if len(set(routes)) == 1 else " / ".join(routes)

    def allreduce_table(self, dtype):
        graph, eager = self.rows("allreduce", dtype, "graph"), self.rows("allreduce", dtype, "eager")
        notes, out = Notes(), []
        for nbytes in sorted(set(graph) | set(eager), key=lambda b: b or 0):
            g, e = graph.get(nbytes), eager.get(nbytes)
            gt, et = (g or {}).get("time_us"), (e or {}).get("time_us")
            gn = nccl_time(g) if g else None
            en = nccl_time(e) if e else None
            r = self.ref_row(dtype, "graph", nbytes)
            symm, which = symm_best(r)
            out.append([fmt_bytes(nbytes), self.route_of(g, e), fmt_us(gt), fmt_us(gn),
                        fmt_ratio(gn, gt), f"{symm:.2f} ({which})" if symm is not None else MISSING,
                        fmt_ratio(symm, gt), fmt_us(et), fmt_us(en), fmt_ratio(en, et),
                        fmt_ns((e or {}).get("host_ns_per_call")),
                        fmt_ns((e or {}).get("nccl_host_ns_per_call"))])
            for row in (g, e):
                if row:
                    notes.wrong(row)
            if symm is None:
                notes.reference_errors(r, ("symm_one_shot", "symm_two_shot"))
        return table(self.ALLREDUCE, out, left=2) + notes.render()

    def fused_table(self, dtype):
        graph, eager = self.rows("fused", dtype, "graph"), self.rows("fused", dtype, "eager")
        hidden = next((self.doc("fused", dtype, m).get("hidden") for m in ("graph", "eager")
                       if self.doc("fused", dtype, m)), None)
        notes, out = Notes(), []
        for nbytes in sorted(set(graph) | set(eager), key=lambda b: b or 0):
            g, e = graph.get(nbytes), eager.get(nbytes)
            any_row = g or e
            nrows = any_row.get("rows") or (any_row.get("count", 0) // hidden if hidden else None)
            gt, et = (g or {}).get("time_us"), (e or {}).get("time_us")
            gp, ep = (g or {}).get("plain_time_us"), (e or {}).get("plain_time_us")
            gn = nccl_time(g) if g else None
            en = nccl_time(e) if e else None
            out.append([f"{fmt_bytes(nbytes)} ({nrows if nrows else MISSING})",
                        self.route_of(g, e), fmt_us(gt), fmt_us(gp), fmt_x(div(gt, gp)),
                        fmt_us(gn), fmt_ratio(gn, gt), fmt_us(et), fmt_us(ep), fmt_x(div(et, ep)),
                        fmt_us(en), fmt_ratio(en, et), fmt_ns((e or {}).get("host_ns_per_call"))])
            for row in (g, e):
                if row:
                    notes.wrong(row)
                    if row.get("plain_wrong"):
                        notes.lines.append(f"plain all-reduce {fmt_bytes(nbytes)}: "
                                           f"#wrong {row['plain_wrong']}")
        return table(self.FUSED, out, left=2) + notes.render()

    # -- targets -----------------------------------------------------------

    def _ar(self, dtype, mode, lo=None, hi=None, p2p_only=False):
        """(bytes, row) of the all-reduce file in [lo, hi] bytes."""
        for nbytes, row in sorted(self.rows("allreduce", dtype, mode).items(),
                                  key=lambda kv: kv[0] or 0):
            if nbytes is None or (lo is not None and nbytes < lo) or (hi is not None and nbytes > hi):
                continue
            if p2p_only and not is_p2p(row.get("route")):
                continue
            yield nbytes, row

    def _fused(self, dtype, mode, max_rows=None):
        doc = self.doc("fused", dtype, mode)
        hidden = doc.get("hidden") if doc else None
        for nbytes, row in sorted(self.rows("fused", dtype, mode).items(), key=lambda kv: kv[0] or 0):
            nrows = row.get("rows") or (row.get("count", 0) // hidden if hidden else None)
            if max_rows is not None and (nrows is None or nrows > max_rows):
                continue
            yield nbytes, nrows, row

    def target_values(self, dtype):
        """target name -> (value, where) or None, for one dtype."""
        v = {}
        for mode in ("graph", "eager"):
            v[f"slow_{mode}"] = extreme((div(r.get("time_us"), nccl_time(r)), fmt_bytes(b))
                                        for b, r in self._ar(dtype, mode))
        v["slow_p2p"] = extreme((div(r.get("time_us"), nccl_time(r)), f"{fmt_bytes(b)} {m}")
                                for m in ("graph", "eager")
                                for b, r in self._ar(dtype, m, p2p_only=True))
        v["small_us"] = extreme((r.get("time_us"), fmt_bytes(b))
                                for b, r in self._ar(dtype, "graph", hi=64 * KIB))
        v["mid_nccl"] = extreme((div(r.get("time_us"), nccl_time(r)), fmt_bytes(b))
                                for b, r in self._ar(dtype, "graph", lo=256 * KIB, hi=MIB))
        v["mid_symm"] = extreme((div(r.get("time_us"), symm_best(self.ref_row(dtype, "graph", b))[0]),
                                 fmt_bytes(b))
                                for b, r in self._ar(dtype, "graph", lo=256 * KIB, hi=MIB))
        row64 = self.rows("allreduce", dtype, "graph").get(64 * MIB)
        v["busbw64"] = ((row64.get("busbw_gbs"), f"({row64.get('route')})")
                        if row64 and row64.get("busbw_gbs") else None)
        v["busbw_min"] = extreme(((r.get("busbw_gbs"), fmt_bytes(b))
                                  for b, r in self._ar(dtype, "graph", lo=4 * MIB, hi=64 * MIB)), min)
        v["fused_plain"] = extreme((div(r.get("time_us"), r.get("plain_time_us")), rows_text(n))
                                   for _, n, r in self._fused(dtype, "graph", max_rows=64))
        v["nccl_fused"] = extreme(((div(nccl_time(r), r.get("time_us")), rows_text(n))
                                   for _, n, r in self._fused(dtype, "graph", max_rows=64)), min)
        # Launch overhead: P2P-routed sizes only (on the fallback both modes
        # are NCCL, and at 256 MiB 1% noise is already 10 µs).
        gaps = []
        for op in ("allreduce", "fused"):
            graph = self.rows(op, dtype, "graph")
            for b, e in self.rows(op, dtype, "eager").items():
                g = graph.get(b)
                if not g or not (is_p2p(g.get("route")) and is_p2p(e.get("route"))):
                    continue
                if e.get("time_us") is not None and g.get("time_us") is not None:
                    gaps.append((e["time_us"] - g["time_us"],
                                 f"{'fused ' if op == 'fused' else ''}{fmt_bytes(b)}"))
        v["eager_gap"] = extreme(gaps)
        v["host_ns"] = extreme((r.get("host_ns_per_call"), fmt_bytes(b))
                               for b, r in self._ar(dtype, "eager", p2p_only=True))
        v["host_ns_nccl"] = extreme((r.get("nccl_host_ns_per_call"), fmt_bytes(b))
                                    for b, r in self._ar(dtype, "eager"))
        if dtype != "bf16":
            base = dict(self._ar("bf16", "graph", p2p_only=True))
            devs = []
            for b, r in self._ar(dtype, "graph", p2p_only=True):
                ratio = div(r.get("time_us"), (base.get(b) or {}).get("time_us"))
                if ratio is not None:
                    devs.append((ratio, fmt_bytes(b)))
            v["per_byte"] = extreme(devs, key_abs_dev)
        else:
            v["per_byte"] = None
        return v

    # (key, description, goal text, check(value) -> bool or None for info, format)
    TARGETS = [
        ("slow_graph", "never slower than NCCL: max pp ÷ NCCL, all sizes, graph", "≤ 1.00",
         lambda x: x <= 1.0, fmt_x),
        ("slow_eager", "same, eager", "≤ 1.00", lambda x: x <= 1.0, fmt_x),
        ("slow_p2p", "same, P2P-routed sizes only (graph and eager)", "≤ 1.00",
         lambda x: x <= 1.0, fmt_x),
        ("small_us", "≤ 64 KiB: max pp graph µs", "≤ 4.00", lambda x: x <= 4.0, fmt_x),
        ("mid_nccl", "256 KiB–1 MiB: max pp ÷ NCCL, graph", "≤ 0.50", lambda x: x <= 0.5, fmt_x),
        ("mid_symm", "256 KiB–1 MiB: max pp ÷ best symm, graph", "info", None, fmt_x),
        ("busbw64", "64 MiB busbw GB/s, graph (route)", "≥ 330", lambda x: x >= 330, lambda x: f"{x:.0f}"),
        ("busbw_min", "4–64 MiB: min busbw GB/s, graph", "≥ 330", lambda x: x >= 330,
         lambda x: f"{x:.0f}"),
        ("fused_plain", "fused: max fused ÷ plain same bytes, 1–64 rows, graph", "≤ 1.15",
         lambda x: x <= 1.15, fmt_x),
        ("nccl_fused", "fused: min NCCL+add/RMSNorm ÷ fused, 1–64 rows, graph", "≥ 3.00",
         lambda x: x >= 3.0, fmt_x),
        ("eager_gap", "max eager − graph µs, P2P-routed sizes (all-reduce and fused)", "≤ 3.00",
         lambda x: x <= 3.0, fmt_x),
        ("per_byte", "per byte vs bf16: pp graph time ÷ bf16's, P2P-routed sizes (worst)",
         "0.90–1.10", lambda x: 0.9 <= x <= 1.1, fmt_x),
        ("host_ns", "eager host ns per call, P2P-routed sizes: max", "info", None, fmt_ns),
        ("host_ns_nccl", "eager host ns per ncclAllReduce: max", "info", None, fmt_ns),
    ]

    def targets_table(self):
        values = {d: self.target_values(d) for d in self.dtypes}
        out = []
        for key, text, goal, ok, fmt in self.TARGETS:
            cells, verdicts = [], []
            for d in self.dtypes:
                got = values[d].get(key)
                if got is None or got[0] is None:
                    cells.append(MISSING)
                    continue
                where = got[1] or ""
                cells.append(fmt(got[0]) + (f" {where}" if where.startswith("(") else
                                            f" @ {where}" if where else ""))
                if ok is not None:
                    verdicts.append(ok(got[0]))
            met = "info" if ok is None else (MISSING if not verdicts else
                                             ("yes" if all(verdicts) else "no"))
            out.append([text, goal] + cells + [met])
        return table(["target", "goal"] + self.dtypes + ["met"], out, left=2)

    def render(self):
        if not self.docs:
            return ("## Targets\n\nNo route-auto peerplan file (collective_bench --route auto): "
                    "no matrix, no targets; see the per-file tables.\n")
        parts = ["## Targets\n",
                 "From the route-auto files (`pp` = peerplan, `NCCL` = ncclAllReduce in the same "
                 "run, `symm` = the reference's PyTorch symmetric memory; \"met\" over every dtype "
                 "with data; fallback rows are NCCL against NCCL, so their ratios are noise).\n",
                 self.targets_table() + "\n"]
        if self.dupes:
            parts.append("Not in the matrix: " + "; ".join(self.dupes) + ".\n")
        for dtype in self.dtypes:
            parts.append(f"## {dtype}\n")
            if self.doc("allreduce", dtype, "graph") or self.doc("allreduce", dtype, "eager"):
                files = ", ".join(f"`{os.path.basename(self.docs[k][0])}`" for k in
                                  (("allreduce", dtype, "graph"), ("allreduce", dtype, "eager"))
                                  if k in self.docs)
                parts.append(f"### all-reduce, {dtype}, route auto: graph and eager\n\n{files}\n")
                parts.append(self.allreduce_table(dtype) + "\n")
            if self.doc("fused", dtype, "graph") or self.doc("fused", dtype, "eager"):
                keys = [("fused", dtype, m) for m in ("graph", "eager") if ("fused", dtype, m) in self.docs]
                hidden = self.docs[keys[0]][1].get("hidden")
                files = ", ".join(f"`{os.path.basename(self.docs[k][0])}`" for k in keys)
                parts.append(f"### fused all-reduce + add + RMSNorm, {dtype}, hidden {hidden}, "
                             f"route auto: graph and eager\n\n{files}; plain = a declared "
                             f"all-reduce of the same [rows, hidden]\n")
                parts.append(self.fused_table(dtype) + "\n")
        return "\n".join(parts)


# ---------------------------------------------------------------------------
# The peers (shared/bench/peers) and the physical limits (shared/bench/limits.cu)
# ---------------------------------------------------------------------------

# Plain all-reduce columns of peers.json: (label, peer, variant, key).
PEER_COLUMNS = [
    ("TRT-LLM", "trtllm", "auto", "graph_us"),
    ("TRT-LLM two-shot", "trtllm", "twoshot", "graph_us"),
    ("vLLM", "vllm", None, "graph_us"),
    ("PCIe IPC", "pcie_ipc", None, "graph_us"),
    ("PCIe IPC best cfg", "pcie_ipc", None, "best_graph_us"),
]


def peer_value(peer_rows, peer, variant, key, **match):
    for r in peer_rows:
        if r.get("peer") != peer or (variant is not None and r.get("variant") != variant):
            continue
        if all(r.get(k) == v for k, v in match.items()) and r.get(key) is not None:
            ok = r.get("best_ok" if key.startswith("best") else "ok", True)
            return r[key] if ok is not False else None
    return None


def peers_section(ours, peers_doc, limits_text):
    """bf16 graph tables: peerplan (route auto) against every peer."""
    rows = peers_doc.get("rows", [])
    mine = {}
    fused_mine = {}
    for _, doc, mode in ours:
        if mode != "graph" or doc.get("dtype") != "bf16" or doc.get("route") != "auto":
            continue
        for r in doc.get("rows", []):
            if doc.get("op") == "fused":
                hidden = doc.get("hidden") or 1
                count = r.get("count") or 0
                fused_mine[r.get("rows", count // hidden if hidden else None)] = r
            else:
                mine[r.get("bytes")] = r
    parts = ["## Against the peers (bf16, CUDA graphs)\n",
             "peerplan: collective_bench --route auto, this run; peers: shared/bench/peers "
             f"({peers_doc.get('info', {}).get('method', 'same method')}). µs per call. "
             "`pp / best` < 1 means peerplan is faster; the target is <= 0.90.\n"]
    header = ["size", "peerplan", "route", "NCCL (same run)"] + [c[0] for c in PEER_COLUMNS] + \
             ["best peer", "which", "pp / best"]
    out = []
    sizes = sorted({r.get("bytes") for r in rows if "rows" not in r and r.get("bytes")})
    for b in sizes:
        ours_row = mine.get(b, {})
        values = [peer_value(rows, p, v, k, bytes=b) for _, p, v, k in PEER_COLUMNS]
        named = [(val, PEER_COLUMNS[i][0]) for i, val in enumerate(values) if val]
        best_val, best_name = min(named) if named else (None, MISSING)
        pp = ours_row.get("time_us")
        out.append([fmt_bytes(b), fmt_us(pp), ours_row.get("route", MISSING),
                    fmt_us(ours_row.get("nccl_time_us"))] + [fmt_us(v) for v in values] +
                   [fmt_us(best_val), best_name,
                    f"{pp / best_val:.2f}" if pp and best_val else MISSING])
    parts.append(table(header, out) + "\n")
    fused_rows = sorted({r.get("rows") for r in rows if r.get("peer") == "trtllm_fused"})
    if fused_rows:
        parts.append("Fused all-reduce + residual add + RMSNorm, hidden 7168: peerplan against "
                     "TRT-LLM's fused kernel (PDL and not), and against peerplan's plain "
                     "all-reduce of the same bytes (target: fused <= 0.90 x TRT-LLM PDL, and "
                     "<= 1.2 x plain).\n")
        fout = []
        for n in fused_rows:
            mine_row = fused_mine.get(n, {})
            pdl = peer_value(rows, "trtllm_fused", "auto_pdl", "graph_us", rows=n)
            plain_trt = peer_value(rows, "trtllm_fused", "auto", "graph_us", rows=n)
            norm = peer_value(rows, "nccl_norm", None, "graph_us", rows=n)
            pp = mine_row.get("time_us")
            plain = mine_row.get("plain_time_us")
            fout.append([rows_text(n), fmt_us(pp), mine_row.get("route", MISSING), fmt_us(plain),
                         f"{pp / plain:.2f}" if pp and plain else MISSING, fmt_us(pdl),
                         fmt_us(plain_trt), fmt_us(norm),
                         f"{pp / pdl:.2f}" if pp and pdl else MISSING])
        parts.append(table(["rows", "peerplan fused", "route", "peerplan plain", "fused / plain",
                            "TRT-LLM fused PDL", "TRT-LLM fused", "NCCL + torch norm",
                            "pp / TRT PDL"], fout) + "\n")
    if limits_text:
        lines = [l.strip() for l in limits_text.splitlines() if l.strip()]
        parts.append("The floor on the same host (shared/bench/limits.cu):\n\n" +
                     "\n".join(f"- {l}" for l in lines) + "\n")
    return "\n".join(parts)


def rows_text(n):
    return f"{n} row" if n == 1 else f"{n} rows"


def key_abs_dev(items, key):
    """extreme()'s `pick` for ratios: the one farthest from 1."""
    return max(items, key=lambda p: abs(key(p) - 1.0))


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


def render(ours, ref, peers_doc=None, limits_text=""):
    parts = ["# peerplan vs references", ""]
    if ref:
        parts.append(f"Reference: {ref.describe()}.")
    parts.append("Ratios are other / peerplan (> 1: peerplan faster); "
                 "µs per call, median of 7 batches, slowest rank.\n")
    if peers_doc:
        parts.append(peers_section(ours, peers_doc, limits_text))
    matrix = Matrix(ours, ref)
    parts.append(matrix.render())
    parts.append("## Per-file tables\n")
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
    p.add_argument("--peers", metavar="FILE", help="peers.json of shared/bench/peers/run.sh")
    p.add_argument("--limits", metavar="FILE", help="output of shared/bench/limits.cu")
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
    peers_doc = load(args.peers) if args.peers and os.path.exists(args.peers) else None
    limits_text = ""
    if args.limits and os.path.exists(args.limits):
        with open(args.limits) as f:
            limits_text = f.read()
    print(render(ours, ref, peers_doc, limits_text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
