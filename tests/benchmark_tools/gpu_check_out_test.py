#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""scripts/gpu-check.sh ends by replacing OUT's contents with one archive, so
it refuses, before doing anything, an OUT that holds files it did not write
(OUT=/tmp or the checkout once lost everything); an empty OUT is taken and
marked. Runs no build: a refused OUT exits at once, and the accepted one is
stopped by a bad RANKS right after the check.

  gpu_check_out_test.py SOURCE_DIR WORK_DIR
"""
import os
import shutil
import subprocess
import sys

from checks import Checks

check = Checks("gpu_check_out_test")
source, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
script = os.path.join(source, "scripts", "gpu-check.sh")


def run(out):
    env = dict(os.environ, OUT=out, RANKS="9")  # 9: refused right after the OUT check
    return subprocess.run(["bash", script, os.path.join(work, "build")], env=env,
                          capture_output=True, text=True, timeout=60)


mine = os.path.join(work, "mine")
os.makedirs(os.path.join(mine, "old-run"))
with open(os.path.join(mine, "notes.txt"), "w") as f:
    f.write("keep me\n")
refused = run(mine)
check(refused.returncode == 2, f"a folder of the user's is refused with 2, got {refused.returncode}")
check("did not write" in refused.stderr, f"the refusal says why: {refused.stderr!r}")
check(os.path.exists(os.path.join(mine, "notes.txt")) and
      os.path.isdir(os.path.join(mine, "old-run")), "the user's files are left alone")
check(not os.path.exists(os.path.join(mine, ".gpu-check-out")), "a refused folder is not marked")

empty = os.path.join(work, "empty")
os.makedirs(empty)
taken = run(empty)
check("did not write" not in taken.stderr, f"an empty folder is taken: {taken.stderr!r}")
check("RANKS" in taken.stderr, f"the run went on to the next check: {taken.stderr!r}")
check(os.path.exists(os.path.join(empty, ".gpu-check-out")), "a taken folder is marked")
with open(os.path.join(empty, "bench.log"), "w") as f:
    f.write("an earlier run's log\n")
again = run(empty)
check("did not write" not in again.stderr, f"a folder an earlier run made is taken: {again.stderr!r}")
sys.exit(check.finish())
