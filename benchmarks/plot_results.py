#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Figures (SVG) of the collective benchmarks: bf16, CUDA graphs, median µs per call.

    plot_results.py --out DIR INPUT...

Each INPUT is a JSON file of one of these kinds (the same ones
benchmarks/compare_results.py merges):
  - benchmarks/collective_bench.cpp --json: {op, dtype, mode, route, rows:
    [{bytes, route, time_us, nccl_time_us, rows?, plain_time_us?}]};
  - benchmarks/reference_allreduce.py: {tool: "reference_allreduce", rows:
    [{dtype, mode, bytes, nccl_us, symm_one_shot_us, symm_two_shot_us,
    nccl_plus_norm_us, fused_rows}]};
  - the peers' peers.json (shared/bench/peers/run.sh): {info, rows: [{peer,
    variant?, bytes, rows?, graph_us, best_graph_us?}]};
  - a bundle, {documents: [...]} holding any of the above (the format of
    benchmarks/results/*.json, whose "source" says where the numbers come from).

Writes into DIR:
  - allreduce-latency.svg: all-reduce µs against message size (log-log):
    peerplan, NCCL, torch symmetric memory, the best peer and each peer;
  - allreduce-ratio.svg: peerplan's time / NCCL's and / the best peer's;
  - fused-rows.svg: all-reduce + residual add + RMSNorm µs against rows.
A figure whose data the inputs lack is not written (a line on stderr says
so). The SVGs are the same bytes for the same inputs and matplotlib.
"""
import argparse
import json
import os
import sys

DTYPE, MODE = "bf16", "graph"
KIB, MIB = 1 << 10, 1 << 20

# Plain all-reduce peers of peers.json: (label, peer, variant, key), as compare_results.py.
PEER_COLUMNS = [
    ("TRT-LLM", "trtllm", "auto", "graph_us"),
    ("TRT-LLM two-shot", "trtllm", "twoshot", "graph_us"),
    ("vLLM custom", "vllm", None, "graph_us"),
    ("FlashInfer PCIe IPC", "pcie_ipc", None, "graph_us"),
    ("FlashInfer PCIe IPC, best config", "pcie_ipc", None, "best_graph_us"),
]


class InputError(Exception):
    """Input the script cannot use; the message names the file and what is missing."""


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise InputError(f"{path}: cannot read it ({e.strerror})")
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not JSON ({e.msg} at line {e.lineno})")


def kind_of(doc):
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("documents"), list):
        return "bundle"
    if doc.get("tool") == "reference_allreduce":
        return "reference"
    rows = doc.get("rows")
    if not isinstance(rows, list):
        return None
    if "info" in doc and all(isinstance(r, dict) and "peer" in r for r in rows):
        return "peers"
    if "mode" in doc and "dtype" in doc:
        return "ours"
    return None


def number(row, key, where, required=True):
    value = row.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise InputError(f"{where} has no number '{key}'")
    return value


class Data:
    """The bf16 CUDA-graph series of every input: name -> {x: µs}."""

    def __init__(self):
        self.allreduce = {}  # label -> {bytes: µs}
        self.routes = {}  # bytes -> peerplan's route
        self.peers = {}  # label -> {bytes: µs}
        self.fused = {}  # label -> {rows: µs}
        self.ours_sources = set()

    def add_series(self, table, label, x, us):
        if us is not None:
            table.setdefault(label, {}).setdefault(x, us)

    def add(self, doc, where):
        kind = kind_of(doc)
        if kind is None:
            raise InputError(f"{where}: not a collective_bench, reference_allreduce, peers or "
                             "bundle document (no 'mode' and 'dtype', 'tool', 'info' or "
                             "'documents' with a 'rows' list)")
        if kind == "bundle":
            for i, inner in enumerate(doc["documents"]):
                self.add(inner, f"{where}: documents[{i}]")
        elif kind == "ours":
            self.add_ours(doc, where)
        elif kind == "reference":
            self.add_reference(doc, where)
        else:
            self.add_peers(doc, where)

    def add_ours(self, doc, where):
        if doc.get("dtype") != DTYPE or doc.get("mode") != MODE:
            return
        op, route = doc.get("op") or "allreduce", doc.get("route", "auto")
        if route != "auto":  # forced routes are experiments, not what a caller gets
            return
        if op in self.ours_sources:
            raise InputError(f"{where}: a second bf16 graph route-auto {op} file; give one")
        self.ours_sources.add(op)
        hidden = doc.get("hidden")
        for i, row in enumerate(doc["rows"]):
            at = f"{where}: rows[{i}]"
            nbytes = number(row, "bytes", at)
            us = number(row, "time_us", at)
            nccl = number(row, "nccl_time_us", at, required=False)
            if op == "fused":
                rows = row.get("rows")
                if rows is None:
                    if not hidden or not isinstance(row.get("count"), int):
                        raise InputError(f"{at} has no 'rows' (nor 'count' and a 'hidden')")
                    rows = row["count"] // hidden
                self.add_series(self.fused, "peerplan fused", rows, us)
                self.add_series(self.fused, "NCCL + peerplan add/RMSNorm", rows, nccl)
                self.add_series(self.fused, "peerplan plain all-reduce, same bytes", rows,
                                number(row, "plain_time_us", at, required=False))
            else:
                self.add_series(self.allreduce, "peerplan", nbytes, us)
                self.add_series(self.allreduce, "NCCL", nbytes, nccl)
                if row.get("route"):
                    self.routes.setdefault(nbytes, row["route"])

    def add_reference(self, doc, where):
        # A transcribed reference from another run says so in its legend entries.
        run = f", run of {doc['date']}" if doc.get("date") else ""
        for i, row in enumerate(doc.get("rows") or []):
            if row.get("dtype") != DTYPE or row.get("mode") != MODE:
                continue
            at = f"{where}: rows[{i}]"
            nbytes = number(row, "bytes", at)
            symm = [v for v in (number(row, "symm_one_shot_us", at, False),
                                number(row, "symm_two_shot_us", at, False)) if v is not None]
            self.add_series(self.allreduce, "torch symmetric memory (best)" + run, nbytes,
                            min(symm) if symm else None)
            self.add_series(self.allreduce, "torch NCCL" + run, nbytes,
                            number(row, "nccl_us", at, False))
            fused_rows = row.get("fused_rows")
            if fused_rows:
                self.add_series(self.fused, "torch NCCL + add/RMSNorm (reference)" + run, fused_rows,
                                number(row, "nccl_plus_norm_us", at, False))

    def add_peers(self, doc, where):
        for i, row in enumerate(doc["rows"]):
            at = f"{where}: rows[{i}]"
            peer = row.get("peer")
            if "rows" in row:  # the fused peers, keyed by rows of hidden 7168
                label = {("trtllm_fused", "auto_pdl"): "TRT-LLM fused, PDL",
                         ("trtllm_fused", "auto"): "TRT-LLM fused",
                         ("nccl_norm", None): "NCCL + torch add/RMSNorm"}.get(
                             (peer, row.get("variant") if peer != "nccl_norm" else None))
                if label and row.get("ok", True) is not False:
                    self.add_series(self.fused, label, row["rows"],
                                    number(row, "graph_us", at, False))
                continue
            if peer == "nccl" and row.get("ok", True) is not False:
                self.add_series(self.allreduce, "torch NCCL", number(row, "bytes", at),
                                number(row, "graph_us", at, False))
            for label, name, variant, key in PEER_COLUMNS:
                if peer != name or (variant is not None and row.get("variant") != variant):
                    continue
                ok = row.get("best_ok" if key.startswith("best") else "ok", True)
                if ok is not False:
                    self.add_series(self.peers, label, number(row, "bytes", at),
                                    number(row, key, at, False))

    def best_peer(self):
        best = {}
        for series in self.peers.values():
            for nbytes, us in series.items():
                best[nbytes] = min(us, best.get(nbytes, us))
        return best


# ---------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------


def size_text(n):
    if n >= MIB:
        return f"{n / MIB:g} MiB"
    if n >= KIB:
        return f"{n / KIB:g} KiB"
    return f"{n} B"


def setup_matplotlib():
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams.update({
        "svg.hashsalt": "peerplan-results",  # stable ids in the SVG
        "svg.fonttype": "path",
        "font.size": 9,
        "axes.grid": True,
        "grid.alpha": 0.3,
    })
    import matplotlib.pyplot as plt

    return plt


def size_axis(ax, sizes):
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(sizes)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: size_text(int(round(v)))))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("message size (bytes)")


def plot_series(ax, series, label, gid, **style):
    xs = sorted(series)
    ax.plot(xs, [series[x] for x in xs], label=label, gid=gid, **style)


ROUTE_MARKERS = {"one_shot": "o", "two_shot": "s", "fallback": "x"}


def latency_figure(plt, data, title):
    fig, ax = plt.subplots(figsize=(8, 5.2))
    for label, series in sorted(data.peers.items()):
        plot_series(ax, series, label, "series-peer-" + slug(label), linewidth=0.8, alpha=0.45,
                    linestyle=":")
    best = data.best_peer()
    if best:
        plot_series(ax, best, "best peer", "series-best-peer", color="tab:green", linewidth=2,
                    linestyle="--")
    styles = {"NCCL": dict(color="tab:red", linewidth=1.6),
              "torch NCCL": dict(color="tab:red", linewidth=1, linestyle="-."),
              "torch symmetric memory (best)": dict(color="tab:purple", linewidth=1.6)}
    main = [best]
    for label, series in sorted(data.allreduce.items()):
        style = next((s for base, s in styles.items() if same_series(label, base)), None)
        if style is not None:
            plot_series(ax, series, label, "series-" + slug(label), **style)
            main.append(series)
    ours = data.allreduce.get("peerplan", {})
    if ours:
        plot_series(ax, ours, "peerplan", "series-peerplan", color="tab:blue", linewidth=2.4,
                    zorder=5)
        for route, marker in ROUTE_MARKERS.items():
            xs = sorted(b for b in ours if data.routes.get(b) == route)
            if xs:
                ax.plot(xs, [ours[b] for b in xs], marker, color="tab:blue", zorder=6,
                        label=f"  peerplan route {route}", gid="markers-" + route)
    sizes = set(best) | {b for s in data.allreduce.values() for b in s}
    size_axis(ax, sizes)
    ax.set_yscale("log")
    main.append(ours)
    top = max((us for series in main for us in series.values()), default=None)
    if top:  # a peer far slower than the rest runs off the top instead of squashing it
        ax.set_ylim(top=top * 2)
    ax.set_ylabel("µs per call (median, slowest rank)")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left")
    return fig


def ratio_figure(plt, data, title):
    ours = data.allreduce.get("peerplan", {})
    fig, ax = plt.subplots(figsize=(8, 4.2))
    # NCCL timed in peerplan's own run where there is one, else torch's.
    nccl = "NCCL" if data.allreduce.get("NCCL") else "torch NCCL"
    others = [(nccl, data.allreduce.get(nccl, {}), "tab:red"),
              ("best peer", data.best_peer(), "tab:green")]
    sizes = set()
    for label, series, color in others:
        ratio = {b: ours[b] / series[b] for b in ours if series.get(b)}
        if ratio:
            plot_series(ax, ratio, f"peerplan / {label}", "series-ratio-" + slug(label),
                        color=color, marker="o", linewidth=1.6)
            sizes |= set(ratio)
    ax.axhline(1.0, color="black", linewidth=0.9, gid="reference-line-one")
    size_axis(ax, sizes)
    ax.set_ylabel("peerplan's time / the other's (< 1: peerplan faster)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return fig


def fused_figure(plt, data, title):
    fig, ax = plt.subplots(figsize=(8, 5))
    styles = [("peerplan fused", dict(color="tab:blue", linewidth=2.4, marker="o", zorder=5)),
              ("TRT-LLM fused, PDL", dict(color="tab:green", linewidth=1.8, marker="s")),
              ("TRT-LLM fused", dict(color="tab:green", linewidth=1, linestyle="--")),
              ("NCCL + peerplan add/RMSNorm", dict(color="tab:red", linewidth=1.6, marker="^")),
              ("NCCL + torch add/RMSNorm", dict(color="tab:red", linewidth=1, linestyle="-.")),
              ("torch NCCL + add/RMSNorm (reference)", dict(color="tab:orange", linewidth=1,
                                                             linestyle="-.")),
              ("peerplan plain all-reduce, same bytes", dict(color="tab:blue", linewidth=0.9,
                                                              linestyle=":"))]
    rows = set()
    for base, style in styles:
        for label, series in sorted(data.fused.items()):
            if same_series(label, base) and series:
                plot_series(ax, series, label, "series-" + slug(label), **style)
                rows |= set(series)
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    ax.set_xscale("log", base=2)
    # The row counts peerplan ran label the axis; other sources may add rows in between.
    ax.xaxis.set_major_locator(FixedLocator(sorted(data.fused.get("peerplan fused") or rows)))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_yscale("log")
    ax.set_xlabel("rows (tokens) of the hidden dimension")
    ax.set_ylabel("µs per call (median, slowest rank)")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left")
    return fig


def same_series(label, base):
    """A series' label is its base name, or that with ", run of <date>" (see add_reference)."""
    return label == base or label.startswith(base + ", run of ")


def slug(text):
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def write(fig, path):
    fig.tight_layout()
    fig.savefig(path, format="svg", metadata={"Date": None})


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the SVG files")
    p.add_argument("--title", default="2 ranks, bf16, CUDA graphs",
                   help="the figures' title suffix (default: %(default)s)")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="benchmark JSON files")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    data = Data()
    try:
        for path in args.inputs:
            data.add(load_json(path), path)
    except InputError as e:
        print(f"plot_results: {e}", file=sys.stderr)
        return 2
    try:
        plt = setup_matplotlib()
    except ImportError:
        print("plot_results: matplotlib is missing (Debian: apt-get install python3-matplotlib)",
              file=sys.stderr)
        return 3
    os.makedirs(args.out, exist_ok=True)
    figures = [
        ("allreduce-latency.svg", bool(data.allreduce or data.peers),
         lambda: latency_figure(plt, data, f"All-reduce latency, {args.title}"),
         "no bf16 CUDA-graph all-reduce timings"),
        ("allreduce-ratio.svg", bool(data.allreduce.get("peerplan")),
         lambda: ratio_figure(plt, data, f"peerplan against NCCL and the best peer, {args.title}"),
         "no peerplan bf16 CUDA-graph all-reduce (collective_bench, route auto)"),
        ("fused-rows.svg", bool(data.fused),
         lambda: fused_figure(plt, data, f"All-reduce + add + RMSNorm, {args.title}"),
         "no bf16 CUDA-graph fused all-reduce + add + RMSNorm timings"),
    ]
    written = 0
    for name, have, make, missing in figures:
        if not have:
            print(f"plot_results: {missing} in the inputs; {name} not written", file=sys.stderr)
            continue
        fig = make()
        write(fig, os.path.join(args.out, name))
        plt.close(fig)
        written += 1
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())
