#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""benchmarks/loop_agreement.py on made-up runs: which kernels it pairs, how
it ranks them, what it refuses.

  loop_agreement_test.py SOURCE_DIR WORK_DIR
"""
import json
import os
import subprocess
import sys

from checks import Checks

check = Checks("loop_agreement_test")


def loop_run(results, hidden=7168):
    return {"device": "NVIDIA H200", "dtype": "bf16", "hidden": hidden, "pdl": True,
            "results": results}


def result(case, size, us, ranks=2, wrong=0):
    unit = "rows" if case.startswith("fused") else "bytes"
    return {"case": case, "ranks": ranks, unit: size, "us_per_call": us, "wrong": wrong,
            "note": ""}


TUNE = {
    "fingerprint": "2x NVIDIA H200 NV18", "ranks": 2, "dtype": "bf16", "hidden": 7168,
    "protocol_rows": {
        "one_shot": [{"bytes": 1024, "ll_us": 2.4, "lamport_us": 2.6},
                     {"bytes": 2048, "ll_us": 2.5, "lamport_us": 2.7}],
        "two_shot": [{"bytes": 1024, "staged_us": 5.0, "lamport_us": 4.5, "dma_us": None}],
        "fused": [{"bytes": 14336, "rows": 1, "ll_us": 4.0, "lamport_us": 3.9,
                   "two_shot_us": 9.0}],
    },
}
LOOP = loop_run([
    result("one_shot_ll", 1024, 2.0), result("one_shot_lamport", 1024, 2.5),
    result("two_shot", 1024, 4.0), result("pull_one_shot_staged", 1024, 4.6),
    result("fused_ll", 1, 3.0), result("fused_lamport", 1, 3.5), result("fused_staged", 1, 5.0),
])


def run(source, work, name, loop, tune):
    loop_path = os.path.join(work, f"{name}-loop.json")
    tune_path = os.path.join(work, f"{name}-tune.json")
    for path, doc in ((loop_path, loop), (tune_path, tune)):
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f)
    md = os.path.join(work, f"{name}.md")
    done = subprocess.run([sys.executable, os.path.join(source, "benchmarks", "loop_agreement.py"),
                           "--loop", loop_path, "--tune", tune_path, "--md", md],
                          capture_output=True, text=True)
    return done.returncode, done.stdout, done.stderr


def rows_of(text):
    """{(size, case): [cells]} of the table."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 7 and cells[0] != "size":
            rows[(cells[0], cells[1])] = cells[2:]
    return rows


def main(source, work):
    os.makedirs(work, exist_ok=True)

    status, out, err = run(source, work, "agree", LOOP, TUNE)
    check(status == 0, f"a table: exit 0 (got {status}, {err})")
    rows = rows_of(out)
    # 1 KiB: the same order on both sides (LL, Lamport, staged two-shot).
    check(rows.get(("1 KiB", "one_shot_ll")) == ["2.00", "1", "2.40", "1", "yes"],
          f"1 KiB one_shot_ll: {rows.get(('1 KiB', 'one_shot_ll'))}")
    check(rows.get(("1 KiB", "two_shot")) == ["4.00", "3", "5.00", "3", "yes"],
          f"1 KiB two_shot: {rows.get(('1 KiB', 'two_shot'))}")
    # Timed by the tuner alone: shown, not ranked.
    check(rows.get(("1 KiB", "two_shot_lamport")) == ["—", "—", "4.50", "—", "—"],
          f"1 KiB two_shot_lamport: {rows.get(('1 KiB', 'two_shot_lamport'))}")
    check(("1 KiB", "two_shot_dma") not in rows, "a kernel timed by neither side is left out")
    check(("2 KiB", "one_shot_ll") not in rows, "a size the loop did not run is left out")
    # Not timed by the tuner at all: not in the table.
    check(("1 KiB", "pull_one_shot_staged") not in rows, "pull mode is left out")
    check(("1 rows", "fused_staged") not in rows, "the staged fused op is left out")
    # 1 row: the loop puts LL first, the 2 GPUs Lamport.
    check(rows.get(("1 rows", "fused_ll")) == ["3.00", "1", "4.00", "2", "no"],
          f"1 rows fused_ll: {rows.get(('1 rows', 'fused_ll'))}")
    check(rows.get(("1 rows", "fused_lamport")) == ["3.50", "2", "3.90", "1", "no"],
          f"1 rows fused_lamport: {rows.get(('1 rows', 'fused_lamport'))}")
    check("Ranks agree for 3 of 5 kernels; the order is the same at 1 of 2 sizes." in out,
          f"the summary: {out}")
    with open(os.path.join(work, "agree.md"), encoding="utf-8") as f:
        check(f.read() == out, "--md writes what is printed")

    other_hidden = dict(LOOP, hidden=4096)
    status, _, err = run(source, work, "hidden", other_hidden, TUNE)
    check(status == 2 and "hidden" in err, f"another hidden size is refused: {status} {err}")

    four = loop_run([result("one_shot_ll", 1024, 2.0, ranks=4)])
    status, _, err = run(source, work, "ranks", four, TUNE)
    check(status == 2 and "--ranks 2" in err, f"a loop at 4 virtual ranks is refused: {err}")

    wrong = loop_run(LOOP["results"] + [result("two_shot_lamport", 1024, 3.0, wrong=5)])
    status, out, _ = run(source, work, "wrong", wrong, TUNE)
    check(status == 1 and "wrong elements: two_shot_lamport at 1 KiB" in out,
          f"a loop case with wrong elements is named and fails the run: {status} {out}")
    check(rows_of(out).get(("1 KiB", "two_shot_lamport")) == ["—", "—", "4.50", "—", "—"],
          "a wrong case is not ranked")

    apart = loop_run([result("one_shot_ll", 4096, 2.0), result("one_shot_lamport", 4096, 2.2)])
    status, out, _ = run(source, work, "apart", apart, TUNE)
    check(status == 1 and "at 0 of 0 sizes" in out, f"no size in common: exit 1 ({status})")

    return check.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
