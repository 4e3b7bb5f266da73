#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""scripts/defaults_from_tune.py: the committed defaults are the committed
entry's; a tuner's entry rewrites only the block, into C++ that compiles; what
it refuses.

  defaults_from_tune_test.py SOURCE_DIR WORK_DIR [CXX]
"""
import os
import shutil
import subprocess
import sys

from checks import Checks

check = Checks("defaults_from_tune_test")
SOURCE, WORK = sys.argv[1], sys.argv[2]
CXX = sys.argv[3] if len(sys.argv) > 3 else ""
SCRIPT = os.path.join(SOURCE, "scripts", "defaults_from_tune.py")
DEFAULTS = os.path.join(SOURCE, "src", "routing", "defaults.cpp")
os.makedirs(WORK, exist_ok=True)

ENTRY = """peerplan-tuning 1

[entry]
fingerprint = host ranks=2
one_shot_max_bytes = 65536

[entry]
fingerprint = cuda ranks=2 gpu="NVIDIA H200" links=NV18
one_shot_max_bytes = 1048576
two_shot_min_bytes = 2097152
two_shot_max_bytes = 268435456
fused_max_bytes = 12582912
one_shot_lamport = all
fused_lamport = 32K..8M
fused_ll = 32K
two_shot_dma = 16M..
two_shot_lamport = off
one_shot_grid = 64K:16 1M:66
measured = peerplan_tune 0.1.0 (source 0000000), 2026-12-01T00:00:00Z, bf16, CUDA graphs, """ \
    """the median of 7 batches of 20 calls, the slowest rank, on 2 ranks of NVIDIA H200
"""


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def write(name, text):
    path = os.path.join(WORK, name)
    with open(path, "w") as out:
        out.write(text)
    return path


def block(text):
    start = text.index("// BEGIN two-rank CUDA defaults")
    return text[start:text.index("// END two-rank CUDA defaults")]


# The committed defaults are what the committed entry gives.
committed = run(os.path.join(SOURCE, "benchmarks", "results", "defaults.tune"), "--check",
                "--defaults", DEFAULTS)
check(committed.returncode == 0,
      f"src/routing/defaults.cpp is not benchmarks/results/defaults.tune's: {committed.stdout}"
      f"{committed.stderr}")

# A tuner's entry: --check says it differs and changes nothing; a run rewrites
# the block and nothing else.
copy = os.path.join(WORK, "defaults.cpp")
shutil.copyfile(DEFAULTS, copy)
original = open(copy).read()
tune = write("h200.tune", ENTRY)
differs = run(tune, "--check", "--defaults", copy)
check(differs.returncode == 1, f"--check on a different entry: rc {differs.returncode}")
check("+constexpr std::size_t kCudaTwoShotMaxTwoRanks = 256 * MiB;" in differs.stdout,
      f"--check's diff lacks the new two-shot maximum: {differs.stdout}")
check(open(copy).read() == original, "--check wrote the file")
rewrote = run(tune, "--defaults", copy)
check(rewrote.returncode == 0, f"rewriting: rc {rewrote.returncode}: {rewrote.stderr}")
new = open(copy).read()
wanted = [
    "constexpr std::size_t kCudaOneShotTwoRanks = 1 * MiB;",
    "constexpr std::size_t kCudaTwoShotMinTwoRanks = 2 * MiB;",
    "constexpr std::size_t kCudaTwoShotMaxTwoRanks = 256 * MiB;",
    "constexpr std::size_t kCudaFusedTwoRanks = 12 * MiB;",
    "constexpr Window kCudaOneShotLamport = Window::every_size();",
    "constexpr Window kCudaFusedLamport = Window{32 * KiB, 8 * MiB};",
    "constexpr Window kCudaFusedLl = Window::up_to_bytes(32 * KiB);",
    "constexpr Window kCudaTwoShotDma = Window::above_bytes(16 * MiB);",
    "constexpr Window kCudaTwoShotLamport = Window::never();",
]
for line in wanted:
    check(line in new, f"the rewritten block lacks '{line}'")
check(all(len(line) <= 100 for line in block(new).splitlines()),
      "a line of the block is longer than the 100 columns of .clang-format")
check("source 0000000" in block(new), "the block does not say where the entry came from")
check(new.replace(block(new), "") == original.replace(block(original), ""),
      "the rewrite changed the file outside the block")
check("one_shot_grid = 64K:16 1M:66" in rewrote.stderr and "not applied" in rewrote.stderr,
      f"the entry's grid is not reported as left out: {rewrote.stderr}")
check(run(tune, "--check", "--defaults", copy).returncode == 0,
      "--check after the rewrite still finds a difference")

# The rewritten file is C++ that compiles (with the compiler CMake found).
if CXX:
    compiled = subprocess.run([CXX, "-std=c++20", "-fsyntax-only", "-Wall", "-Werror",
                               "-I", os.path.join(SOURCE, "include"),
                               "-I", os.path.join(SOURCE, "src"), copy],
                              capture_output=True, text=True)
    check(compiled.returncode == 0, f"the rewritten defaults.cpp does not compile: "
          f"{compiled.stderr[:2000]}")

# Refusals: rc 2, nothing written, a message that says what to change.
refusals = {
    "missing.tune": (ENTRY.replace("fused_ll = 32K\n", ""), "fused_ll"),
    "auto.tune": (ENTRY.replace("fused_ll = 32K", "fused_ll = auto"), "'auto' is no measurement"),
    # peerplan_tune leaves an unmeasured fused cutoff out (-e below one row).
    "nofused.tune": (ENTRY.replace("fused_max_bytes = 12582912\n", ""),
                     "with -e at least one row of --hidden"),
    "autocutoff.tune": (ENTRY.replace("fused_max_bytes = 12582912", "fused_max_bytes = auto"),
                        "'auto' is no measurement"),
    "empty.tune": (ENTRY.replace("fused_ll = 32K", "fused_ll = 0"), "write never"),
    "backwards.tune": (ENTRY.replace("32K..8M", "8M..32K"), "holds no message"),
    "size.tune": (ENTRY.replace("12582912", "12 MiB"), "not a byte count"),
    "header.tune": (ENTRY.replace("peerplan-tuning 1", "peerplan-tuning 2"), "header"),
    "two.tune": (ENTRY.replace("fingerprint = host ranks=2",
                               'fingerprint = cuda ranks=2 gpu="NVIDIA H100" links=NV18'),
                 "--fingerprint"),
}
before = open(copy).read()
for name, (text, says) in refusals.items():
    refused = run(write(name, text), "--defaults", copy)
    check(refused.returncode == 2, f"{name}: rc {refused.returncode}, not 2")
    check(says in refused.stderr, f"{name}: the message lacks '{says}': {refused.stderr}")
check(open(copy).read() == before, "a refused entry changed the file")

# --fingerprint picks one of two CUDA entries.
two = write("two.tune", refusals["two.tune"][0])
picked = run(two, "--fingerprint", 'cuda ranks=2 gpu="NVIDIA H100" links=NV18', "--check",
             "--defaults", copy)
check(picked.returncode == 2 and "one_shot_max_bytes" not in picked.stderr and
      "two_shot_min_bytes" in picked.stderr,
      f"--fingerprint did not pick the H100 entry (which has only one_shot_max_bytes): "
      f"{picked.stderr}")

sys.exit(check.finish())
