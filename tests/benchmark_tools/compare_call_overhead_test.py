#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""benchmarks/compare_call_overhead.py --require fails a Python call more
than the limit slower than C++'s where the times measure the calls (one GPU
per rank), and only reports it where they measure more: ranks sharing a GPU
(a rank's launch waits for the other's kernels) or the host backend. --check
still fails a missing case there.

  compare_call_overhead_test.py SOURCE_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

from checks import Checks

check = Checks("compare_call_overhead_test")
source, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
script = os.path.join(source, "benchmarks", "compare_call_overhead.py")
CASES = ["empty", "allreduce_1x512", "allreduce_8x4096", "fused_1x4096", "fused_16x4096"]


def write(name, apis, ns, gpus_shared, backend="cuda", cases=CASES):
    rows = [{"case": c, "api": a, "op": "empty" if c == "empty" else "all_reduce",
             "route": "" if c == "empty" else "one_shot", "ns_per_call": ns,
             "rank_ns_per_call": [ns, ns]} for c in cases for a in apis]
    doc = {"backend": backend, "ranks": 2, "dtype": "bf16", "peerplan_version": "0.1.0",
           "gpus_shared": gpus_shared, "rows": rows}
    path = os.path.join(work, name)
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def compare(cpp, py):
    return subprocess.run([sys.executable, script, cpp, py, "--check", "--require"],
                          capture_output=True, text=True, timeout=60)


# Python 12 µs slower than C++ on every case.
for shared, backend, applied in [(False, "cuda", True), (True, "cuda", False),
                                 (False, "host", False)]:
    what = f"gpus_shared={shared}, {backend} backend"
    result = compare(write("cpp.json", ("cpp", "c"), 6000, shared, backend),
                     write("py.json", ("python", "ctypes"), 18000, shared, backend))
    check(result.returncode == (1 if applied else 0),
          f"{what}: exit {result.returncode}, expected {1 if applied else 0}")
    check("over the 3000 ns limit" in result.stdout + result.stderr,
          f"{what}: the cases over the limit are named: {result.stdout + result.stderr!r}")
    check(applied or "not applied" in result.stdout, f"{what}: says the limit was not applied")

# Within the limit: 0 wherever the GPU is.
result = compare(write("cpp.json", ("cpp", "c"), 6000, False),
                 write("py.json", ("python", "ctypes"), 8000, False))
check(result.returncode == 0, f"within the limit: exit {result.returncode}")

# A missing case is an error even where the limit is not applied.
result = compare(write("cpp.json", ("cpp", "c"), 6000, True),
                 write("py.json", ("python", "ctypes"), 6500, True, cases=CASES[:-1]))
check(result.returncode == 1 and "fused_16x4096" in result.stderr,
      f"a missing case with shared GPUs: exit {result.returncode}, {result.stderr!r}")

sys.exit(check.finish())
