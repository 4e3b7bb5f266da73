#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""scripts/kernel-loop-compare.sh run and benchmarks/compare_loop_runs.py
without a GPU: stand-in loop binaries write the JSON the real one writes, so
the run order, the file names and the table are checked end to end.

  kernel_loop_compare_test.py SOURCE_DIR WORK_DIR
"""
import os
import shutil
import stat
import subprocess
import sys

from checks import Checks

check = Checks("kernel_loop_compare_test")


# A stand-in peerplan_kernel_loop: µs per call from the variant and the PDL
# mode, each launch logged in order; the variant "bad" counts wrong elements.
STAND_IN = r"""#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
value = lambda flag: args[args.index(flag) + 1]
name = os.path.basename(sys.argv[0])[len("loop-"):]
pdl = value("--pdl")
with open(os.path.join(os.path.dirname(sys.argv[0]), "launches"), "a") as log:
    log.write(f"{name}:{pdl}:{value('--calls')}\n")
us = {"before": 3.0, "after": 2.5, "bad": 2.0}[name] - (0.25 if pdl == "on" else 0.0)
results = [
    {"case": "one_shot_ll", "ranks": 2, "bytes": 16384, "us_per_call": us, "wrong": 0, "note": ""},
    {"case": "fused_ll", "ranks": 2, "rows": 1, "us_per_call": us + 2, "wrong": 0, "note": ""},
    {"case": "fused_ll", "ranks": 2, "rows": 4096, "us_per_call": -1, "wrong": -1,
     "note": "skipped: above the slabs' size"},
]
if name == "bad":
    results[1]["wrong"] = 3
with open(value("--json"), "w") as f:
    json.dump({"dtype": "bf16", "results": results}, f)
"""


def make_variants(directory, names):
    os.makedirs(directory, exist_ok=True)
    for name in names:
        path = os.path.join(directory, f"loop-{name}")
        with open(path, "w", encoding="utf-8") as f:
            f.write(STAND_IN)
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    with open(os.path.join(directory, "variants"), "w", encoding="utf-8") as f:
        f.write(" ".join(names) + "\n")


def run(source, *args):
    return subprocess.run([os.path.join(source, "scripts", "kernel-loop-compare.sh"), *args],
                          capture_output=True, text=True, timeout=120)


def main(source, work):
    shutil.rmtree(work, ignore_errors=True)
    good = os.path.join(work, "good")
    make_variants(good, ["before", "after"])
    result = run(source, "run", good)
    check(result.returncode == 0, f"a clean comparison exits 0 (got {result.returncode}: "
                                  f"{result.stderr.strip()})")
    with open(os.path.join(good, "launches"), encoding="utf-8") as f:
        launches = f.read().split()
    check(launches == ["before:off:20", "before:on:5", "after:off:20", "after:on:5",
                       "after:off:20", "after:on:5", "before:off:20", "before:on:5"],
          f"each variant twice, the second pass reversed, PDL off then on: {launches}")
    out = result.stdout
    check("| pdl-off | one_shot_ll | 2 | bf16 | 16 KiB | 3.00 (3.00) | 2.50 (2.50) |" in out,
          "the all-reduce row, variants in build order, both passes:\n" + out)
    check("| pdl-on | fused_ll | 2 | bf16 | 1 rows | 4.75 (4.75) | 4.25 (4.25) |" in out,
          "the fused row with PDL on")
    check("| pdl-off | fused_ll | 2 | bf16 | 4096 rows | untimed (untimed) |" in out,
          "a case the loop skipped is untimed")
    check("problem:" not in out, "a skipped case is no problem")

    reordered = subprocess.run(
        [sys.executable, os.path.join(source, "benchmarks", "compare_loop_runs.py"),
         os.path.join(good, "runs"), "after", "before"], capture_output=True, text=True)
    check("| 16 KiB | 2.50 (2.50) | 3.00 (3.00) |" in reordered.stdout,
          "the variants in the order named")
    unknown = subprocess.run(
        [sys.executable, os.path.join(source, "benchmarks", "compare_loop_runs.py"),
         os.path.join(good, "runs"), "later"], capture_output=True, text=True)
    check(unknown.returncode == 2 and "no runs of later" in unknown.stderr,
          "an unknown variant is refused, naming it")

    wrong = os.path.join(work, "wrong")
    make_variants(wrong, ["before", "bad"])
    result = run(source, "run", wrong)
    check(result.returncode == 1, f"wrong elements fail the comparison (got {result.returncode})")
    check("problem: bad pdl-off pass 1: fused_ll 2 ranks rows 1: #wrong 3" in result.stdout,
          "the problem names the variant, mode, pass and case:\n" + result.stdout)

    result = run(source, "build", os.path.join(work, "bad-spec"), "no-revision")
    check(result.returncode == 2 and "is not NAME=REV" in result.stdout,
          "a build spec without NAME=REV is refused")
    result = run(source, "run", os.path.join(work, "empty"))
    check(result.returncode == 2 and "build first" in result.stdout,
          "a run without builds says to build first")
    return check.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
