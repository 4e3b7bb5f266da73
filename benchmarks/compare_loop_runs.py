#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One table from the kernel-loop runs of several builds, made in one call.

scripts/kernel-loop-compare.sh runs each build's peerplan_kernel_loop in turn,
twice (the second pass in reverse order), and writes each run's --json as
RUNS/<variant>--<mode>--<pass>.json (mode: pdl-off, pdl-on, or any label).
This prints, per mode, case, virtual ranks, dtype and size (bytes or rows),
the µs per call of every variant, the passes side by side ("5.81 (5.82)"),
in the order the variants are named. Exit status 1 when a case of any run
counted wrong elements or failed (a timeout, a CUDA error; "untimed" in its
cell), 2 on bad input. Cases the loop skipped (its note says why) are untimed
but no problem.

  compare_loop_runs.py RUNS main after       # variants in this order
  compare_loop_runs.py RUNS                  # every variant, by name
"""
import glob
import json
import os
import sys


def read_runs(runs_dir):
    """{(mode, case, ranks, dtype, unit, size): {variant: [(pass, us)]}}, problems."""
    table = {}
    problems = []
    variants = set()
    for path in sorted(glob.glob(os.path.join(runs_dir, "*.json"))):
        parts = os.path.basename(path)[: -len(".json")].split("--")
        if len(parts) != 3:
            continue
        variant, mode, run_pass = parts
        variants.add(variant)
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError) as error:
            problems.append(f"{path}: unreadable ({error})")
            continue
        for row in data.get("results", []):
            unit = "rows" if "rows" in row else "bytes"
            key = (mode, row["case"], row["ranks"], data.get("dtype", "?"), unit, row[unit])
            table.setdefault(key, {}).setdefault(variant, []).append((run_pass, row["us_per_call"]))
            note = row.get("note", "")
            if row.get("wrong", 0) > 0 or (note and not note.startswith("skipped")):
                problems.append(
                    f"{variant} {mode} pass {run_pass}: {row['case']} {row['ranks']} ranks "
                    f"{unit} {row[unit]}: #wrong {row.get('wrong', 0)} {note}".rstrip())
    return table, sorted(variants), problems


def size_text(unit, size):
    if unit == "rows":
        return f"{size} rows"
    for suffix, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {suffix}"
    return f"{size} B"


def cell(samples):
    if not samples:
        return "-"
    values = [f"{us:.2f}" if us > 0 else "untimed" for _, us in sorted(samples)]
    first, rest = values[0], " ".join(values[1:])
    return f"{first} ({rest})" if rest else first


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    runs_dir = argv[1]
    table, found, problems = read_runs(runs_dir)
    if not table:
        print(f"compare_loop_runs: no <variant>--<mode>--<pass>.json in {runs_dir}", file=sys.stderr)
        return 2
    variants = argv[2:] or found
    missing = [v for v in variants if v not in found]
    if missing:
        print(f"compare_loop_runs: no runs of {', '.join(missing)} in {runs_dir} "
              f"(found: {', '.join(found)})", file=sys.stderr)
        return 2
    print("µs per call, median of the loop's batches; a second pass in brackets")
    print()
    print("| mode | case | N | dtype | size | " + " | ".join(variants) + " |")
    print("|---" * (5 + len(variants)) + "|")
    for key in sorted(table):
        mode, case, ranks, dtype, unit, size = key
        cells = [cell(table[key].get(v, [])) for v in variants]
        print(f"| {mode} | {case} | {ranks} | {dtype} | {size_text(unit, size)} | "
              + " | ".join(cells) + " |")
    for problem in problems:
        print(f"problem: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
