#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The one-GPU kernel loop's ranking of kernels against a host with a GPU per
rank: benchmarks/kernel-loop.md's agreement table, made from two files.

  loop_agreement.py --loop LOOP.json --tune TUNE.json [--md OUT.md]

LOOP.json: `peerplan_kernel_loop --ranks 2 ... --json` (2 virtual ranks, as the
transport launches: PDL on). TUNE.json: `peerplan_tune --json` on 2 GPUs,
whose protocol sweep times each kernel with its route and protocol forced:
one-shot LL and Lamport, two-shot staged, Lamport and copy engines, fused LL,
Lamport and two-shot + row norm. The kernels the tuner does not time (pull
mode, the staged fused op) are left out. Per size the loop ran (all-reduce
bytes; fused rows of the same hidden), the kernels timed on both sides are
ranked by each side's µs per call, and a row says whether the two ranks agree.
A summary line follows.

Exit status: 0 with a table, 1 when no size has two kernels timed on both
sides or the loop counted wrong elements (those cases are left out), 2 on bad input (unreadable files, another dtype or hidden size, a
loop run at other than 2 virtual ranks). Only the standard library.
"""
import argparse
import json
import sys

from compare_loop_runs import size_text

# loop case -> (tuner's protocol table, its column)
TUNER_COLUMN = {
    "one_shot_ll": ("one_shot", "ll_us"),
    "one_shot_lamport": ("one_shot", "lamport_us"),
    "two_shot": ("two_shot", "staged_us"),
    "two_shot_lamport": ("two_shot", "lamport_us"),
    "two_shot_dma": ("two_shot", "dma_us"),
    "fused_ll": ("fused", "ll_us"),
    "fused_lamport": ("fused", "lamport_us"),
    # the tuner times the transport's fused two-shot: one kernel for rows of 14 KiB or
    # more, as at its default hidden (7168) in every dtype
    "fused_two_shot_rows": ("fused", "two_shot_us"),
}
MISSING = "—"


class BadInput(Exception):
    pass


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as error:
        raise BadInput(f"{path}: unreadable ({error})") from error


def positive(value):
    return isinstance(value, (int, float)) and value > 0


def loop_times(loop, wrong):
    """{(unit, size): {case: us}} from the loop's results at 2 virtual ranks;
    the cases that counted wrong elements go to `wrong` instead."""
    times = {}
    for r in loop.get("results", []):
        case = r.get("case")
        if case not in TUNER_COLUMN:
            continue
        if r.get("ranks") != 2:
            raise BadInput(f"the loop ran {case} at {r.get('ranks')} virtual ranks; "
                           "the agreement is at 2 (--ranks 2)")
        unit = "rows" if "rows" in r else "bytes"
        if isinstance(r.get("wrong"), int) and r["wrong"] > 0:
            wrong.append(f"{case} at {size_text(unit, r[unit])}")
        elif positive(r.get("us_per_call")) and r.get("wrong") == 0:
            times.setdefault((unit, r[unit]), {})[case] = r["us_per_call"]
    return times


def tuner_times(tune):
    """{(unit, size): {case: us}} from the tuner's protocol rows."""
    rows = tune.get("protocol_rows") or {}
    times = {}
    for case, (table, column) in TUNER_COLUMN.items():
        unit = "rows" if table == "fused" else "bytes"
        for row in rows.get(table, []):
            if positive(row.get(column)) and unit in row:
                times.setdefault((unit, row[unit]), {})[case] = row[column]
    return times


def check_same_shape(loop, tune):
    for field in ("dtype", "hidden"):
        if field in tune and field in loop and str(tune[field]) != str(loop[field]):
            raise BadInput(f"the loop ran {field} {loop[field]}, the tuner {tune[field]}: "
                           "run both on the same")


def ranks_of(times):
    """{case: rank}, 1 the fastest; equal times share a rank."""
    ordered = sorted(times.items(), key=lambda item: (item[1], item[0]))
    ranks, previous, rank = {}, None, 0
    for i, (case, us) in enumerate(ordered):
        if us != previous:
            rank, previous = i + 1, us
        ranks[case] = rank
    return ranks


def table(loop, tune, wrong):
    """The markdown lines and the summary counts."""
    looped, tuned = loop_times(loop, wrong), tuner_times(tune)
    lines = ["| size | case | loop µs (N=2) | loop rank | 2-GPU µs | 2-GPU rank | ranks agree |",
             "|---|---|---|---|---|---|---|"]
    compared = sizes = identical = agreeing = 0
    order = {case: i for i, case in enumerate(TUNER_COLUMN)}
    for key in sorted(looped):  # the sizes the loop ran; the tuner sweeps many more
        mine, theirs = looped.get(key, {}), tuned.get(key, {})
        both = {case for case in mine if case in theirs}
        if len(both) >= 2:
            loop_rank = ranks_of({c: mine[c] for c in both})
            tune_rank = ranks_of({c: theirs[c] for c in both})
            sizes += 1
            identical += all(loop_rank[c] == tune_rank[c] for c in both)
        else:
            loop_rank = tune_rank = {}
        for case in sorted(set(mine) | set(theirs), key=order.get):
            agree = MISSING
            if case in loop_rank:
                compared += 1
                same = loop_rank[case] == tune_rank[case]
                agreeing += same
                agree = "yes" if same else "no"
            lines.append("| {} | {} | {} | {} | {} | {} | {} |".format(
                size_text(*key), case,
                f"{mine[case]:.2f}" if case in mine else MISSING,
                loop_rank.get(case, MISSING),
                f"{theirs[case]:.2f}" if case in theirs else MISSING,
                tune_rank.get(case, MISSING), agree))
    return lines, compared, agreeing, sizes, identical


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loop", required=True, help="peerplan_kernel_loop --json, 2 virtual ranks")
    parser.add_argument("--tune", required=True, help="peerplan_tune --json, a GPU per rank")
    parser.add_argument("--md", help="also write the table to this file")
    args = parser.parse_args(argv)
    try:
        loop, tune = load(args.loop), load(args.tune)
        check_same_shape(loop, tune)
        if tune.get("ranks") not in (None, 2):
            raise BadInput(f"{args.tune}: the tuner ran {tune['ranks']} ranks; the loop's "
                           "agreement is at 2")
        wrong = []
        lines, compared, agreeing, sizes, identical = table(loop, tune, wrong)
    except BadInput as error:
        print(f"loop_agreement: {error}", file=sys.stderr)
        return 2
    shared = " (ranks sharing a GPU: the 2-GPU column is time slices)" if str(
        tune.get("fingerprint", "")).endswith(" shared") else ""
    head = [f"Loop: {loop.get('device', '?')}, {loop.get('dtype', '?')}, hidden "
            f"{loop.get('hidden', '?')}, PDL {'on' if loop.get('pdl') else 'off'}. "
            f"2-GPU: peerplan_tune on {tune.get('fingerprint', '?')}{shared}.", ""]
    summary = (f"Ranks agree for {agreeing} of {compared} kernels; the order is the same at "
               f"{identical} of {sizes} sizes.")
    if wrong:
        summary += " Left out, the loop counted wrong elements: " + ", ".join(wrong) + "."
    text = "\n".join(head + lines + ["", summary]) + "\n"
    sys.stdout.write(text)
    if args.md:
        with open(args.md, "w", encoding="utf-8") as f:
            f.write(text)
    return 0 if sizes > 0 and not wrong else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
