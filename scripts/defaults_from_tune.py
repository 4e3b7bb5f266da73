#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Makes a peerplan_tune entry the built-in two-rank CUDA defaults.

  scripts/defaults_from_tune.py TUNE_FILE [--fingerprint FP] [--defaults FILE] [--check]

Reads the entry of TUNE_FILE (the one whose fingerprint is FP, else its only
"cuda ranks=2" entry) and rewrites the block between "// BEGIN two-rank CUDA
defaults" and "// END two-rank CUDA defaults" of src/routing/defaults.cpp: the
route cutoffs and the five protocol windows at two ranks, which the world-size
model scales to other rank counts. --check writes nothing and exits 1 when the
block differs from what the entry gives (a unified diff on stdout).

The entry needs every cutoff and window peerplan_tune measures on the CUDA
backend in push mode (--protocols-max above 0). An entry's one_shot_grid has
no built-in counterpart (the default grid is one block per multiprocessor,
routing/defaults.hpp): it is reported, not applied.
"""
import argparse
import difflib
import re
import textwrap
import sys
from pathlib import Path

BEGIN = "// BEGIN two-rank CUDA defaults"
END = "// END two-rank CUDA defaults"
HEADER = "peerplan-tuning 1"
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}

# tuning-file key -> the constant of defaults.cpp it sets.
CUTOFFS = [
    ("one_shot_max_bytes", "kCudaOneShotTwoRanks"),
    ("two_shot_min_bytes", "kCudaTwoShotMinTwoRanks"),
    ("two_shot_max_bytes", "kCudaTwoShotMaxTwoRanks"),
    ("fused_max_bytes", "kCudaFusedTwoRanks"),
]
WINDOWS = [
    ("one_shot_lamport", "kCudaOneShotLamport"),
    ("fused_lamport", "kCudaFusedLamport"),
    ("fused_ll", "kCudaFusedLl"),
    ("two_shot_dma", "kCudaTwoShotDma"),
    ("two_shot_lamport", "kCudaTwoShotLamport"),
]


class Refused(Exception):
    """What is wrong with the input, and what to change."""


def parse_size(text, where):
    match = re.fullmatch(r"(\d+)([KMGkmg]?)", text.strip())
    if not match:
        raise Refused(f"{where}: '{text}' is not a byte count (digits with an optional K, M or G)")
    return int(match.group(1)) * UNITS.get(match.group(2).upper(), 1)


def parse_cutoff(text, where):
    if text.strip().lower() == "auto":
        raise Refused(f"{where}: 'auto' is no measurement; run peerplan_tune again, or write the "
                      "cutoff the defaults should have")
    return parse_size(text, where)


def parse_window(text, where):
    """(above, up_to) with up_to None for no ceiling; None for never."""
    word = text.strip().lower()
    if word in ("never", "off"):
        return None
    if word == "all":
        return (0, None)
    if word == "auto":
        raise Refused(f"{where}: 'auto' is no measurement; run peerplan_tune again, or write the "
                      "window the defaults should have")
    if ".." not in word:
        up_to = parse_size(word, where)
        if up_to == 0:
            raise Refused(f"{where}: a window up to 0 bytes holds no message: write never")
        return (0, up_to)
    above_text, up_to_text = word.split("..", 1)
    above = parse_size(above_text, where)
    if not up_to_text:
        return (above, None)
    up_to = parse_size(up_to_text, where)
    if above >= up_to:
        raise Refused(f"{where}: the range '{text.strip()}' holds no message")
    return (above, up_to)


def read_entries(path):
    """[{key: (value, line number)}] of the file's entries."""
    entries, seen_header = [], False
    for number, raw in enumerate(Path(path).read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not seen_header:
            if line != HEADER:
                raise Refused(f"{path}, line {number}: expected the header '{HEADER}'; is this a "
                              "tuning file written by peerplan_tune?")
            seen_header = True
        elif line == "[entry]":
            entries.append({})
        elif "=" in line and entries:
            key, value = (part.strip() for part in line.split("=", 1))
            entries[-1][key] = (value, number)
        else:
            raise Refused(f"{path}, line {number}: '{line}' is neither '[entry]' nor "
                          "'key = value' inside an entry")
    return entries


def pick_entry(path, fingerprint):
    entries = read_entries(path)
    prints = [keys.get("fingerprint", ("",))[0] for keys in entries]
    if fingerprint is not None:
        wanted, matches = f"the fingerprint '{fingerprint}'", lambda p: p == fingerprint
    else:
        wanted, matches = "a 'cuda ranks=2' fingerprint", lambda p: p.startswith("cuda ranks=2 ")
    chosen = [keys for keys, p in zip(entries, prints) if matches(p)]
    if len(chosen) != 1:
        found = ", ".join(f"'{p}'" for p in prints) or "none"
        raise Refused(f"{path}: {len(chosen)} entries with {wanted} (its entries: {found}); "
                      "name one with --fingerprint")
    return chosen[0]


def size_expression(size):
    for suffix, unit in (("GiB", UNITS["G"]), ("MiB", UNITS["M"]), ("KiB", UNITS["K"])):
        if size and size % unit == 0:
            return f"{size // unit} * {suffix}"
    return str(size)


def window_expression(window):
    if window is None:
        return "Window::never()"
    above, up_to = window
    if up_to is None:
        return "Window::every_size()" if above == 0 else \
            f"Window::above_bytes({size_expression(above)})"
    if above == 0:
        return f"Window::up_to_bytes({size_expression(up_to)})"
    return f"Window{{{size_expression(above)}, {size_expression(up_to)}}}"


def block_lines(entry, path):
    """The block's lines, BEGIN and END included."""
    missing = [key for key, _ in CUTOFFS + WINDOWS if key not in entry]
    if missing:
        # peerplan_tune leaves fused_max_bytes out when no swept size held a row.
        fused = (" (fused_max_bytes: with -e at least one row of --hidden elements)"
                 if "fused_max_bytes" in missing else "")
        raise Refused(f"{path}: the entry has no {', '.join(missing)}; the defaults need every "
                      "cutoff and window: run peerplan_tune on the cuda backend in push mode "
                      f"with --protocols-max above 0{fused}")
    where = {key: f"{path}, line {line}" for key, (_, line) in entry.items()}
    cutoffs = {key: parse_cutoff(entry[key][0], where[key]) for key, _ in CUTOFFS}
    windows = {key: parse_window(entry[key][0], where[key]) for key, _ in WINDOWS}
    source = entry.get("measured", ("not recorded in the entry",))[0]
    fingerprint = entry["fingerprint"][0]

    def constant(key, name):
        return f"constexpr std::size_t {name} = {size_expression(cutoffs[key])};"

    def window(key, name):
        return f"constexpr Window {name} = {window_expression(windows[key])};"

    names = dict(CUTOFFS + WINDOWS)
    return [
        f"{BEGIN}: scripts/defaults_from_tune.py writes this",
        "// block from a peerplan_tune entry (benchmarks/results/defaults.tune).",
        *textwrap.wrap(f"Entry: {fingerprint}. Measured: {source}", 100,
                       initial_indent="// ", subsequent_indent="// ", break_on_hyphens=False),
        "// One-shot was the fastest route at every measured size up to here.",
        constant("one_shot_max_bytes", names["one_shot_max_bytes"]),
        "// Two-shot was the fastest route from its minimum (0: right above one-shot)",
        "// up to its maximum; outside that window, the fallback.",
        constant("two_shot_min_bytes", names["two_shot_min_bytes"]),
        constant("two_shot_max_bytes", names["two_shot_max_bytes"]),
        "// The fused op beat its fallback (NCCL + add + RMSNorm) at every size up to here.",
        constant("fused_max_bytes", names["fused_max_bytes"]),
        "// The protocol windows (the same at every world size until measured): where",
        "// each protocol won, by the rules of docs/tuning.md (\"Protocol windows\").",
        *(window(key, name) for key, name in WINDOWS),
        END,
    ]


def replace_block(text, lines, path):
    begin, end = text.find(BEGIN), text.find(END)
    if begin < 0 or end < begin:
        raise Refused(f"{path}: no '{BEGIN}' ... '{END}' block")
    start = text.rfind("\n", 0, begin) + 1
    stop = text.find("\n", end)
    stop = len(text) if stop < 0 else stop + 1
    return text[:start] + "\n".join(lines) + "\n" + text[stop:]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tune_file")
    parser.add_argument("--fingerprint", help="the entry's fingerprint (default: the only "
                        "'cuda ranks=2' entry)")
    parser.add_argument("--defaults", default=str(Path(__file__).resolve().parent.parent /
                                                  "src" / "routing" / "defaults.cpp"))
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when the block differs from the entry's")
    args = parser.parse_args(argv)
    try:
        entry = pick_entry(args.tune_file, args.fingerprint)
        lines = block_lines(entry, args.tune_file)
        old = Path(args.defaults).read_text()
        new = replace_block(old, lines, args.defaults)
    except (Refused, OSError) as problem:
        print(f"defaults_from_tune.py: {problem}", file=sys.stderr)
        return 2
    if "one_shot_grid" in entry:
        print(f"defaults_from_tune.py: not applied: one_shot_grid = {entry['one_shot_grid'][0]} "
              "(the built-in grid is one block per multiprocessor at every size; keep the "
              "tuning file for it)", file=sys.stderr)
    if args.check:
        if old == new:
            print(f"{args.defaults}: the block is the entry's")
            return 0
        sys.stdout.writelines(difflib.unified_diff(
            old.splitlines(True), new.splitlines(True), args.defaults, "from " + args.tune_file))
        return 1
    if old != new:
        Path(args.defaults).write_text(new)
        print(f"{args.defaults}: rewrote the two-rank CUDA defaults from {args.tune_file}")
    else:
        print(f"{args.defaults}: already the entry's")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
