#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The pure helpers of torch_nccl_preload.py (no torch needed): the size
parser, the expected sums and the argument checks, and that the script
skips (exit 77) where it cannot run: no torch, no CUDA or no torchrun."""

import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch_nccl_preload as preload  # noqa: E402

SCRIPT = os.path.join(HERE, "torch_nccl_preload.py")


class ParseSizes(unittest.TestCase):
    def test_suffixes_are_powers_of_1024(self):
        self.assertEqual(preload.parse_size("3000"), 3000)
        self.assertEqual(preload.parse_size("1K"), 1024)
        self.assertEqual(preload.parse_size("1.5M"), 1536 * 1024)
        self.assertEqual(preload.parse_size("2g"), 2 << 30)

    def test_a_multiplying_range_like_nccl_tests_f(self):
        self.assertEqual(preload.parse_sizes("1K-64K:x4"), [1024, 4096, 16384, 65536])

    def test_an_adding_range_and_single_sizes_sorted_without_repeats(self):
        self.assertEqual(preload.parse_sizes("64,8-32:+8,16"), [8, 16, 24, 32, 64])

    def test_the_default_is_the_declared_range_and_two_undeclared_sizes(self):
        sizes = preload.parse_sizes(preload.DEFAULT_SIZES)
        declared = preload.parse_sizes(preload.DEFAULT_DECLARED)
        self.assertEqual(declared[0], 1024)
        self.assertEqual(declared[-1], 64 << 20)
        self.assertEqual(sorted(set(sizes) - set(declared)), [3000, 1536 * 1024])

    def test_bad_sizes_say_what_is_wrong(self):
        for bad in ["", "abc", "1.5", "-3", "64K-1K", "1K-4K:x1", "1K-4K:*2", "1K-4K:+0", ","]:
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                preload.parse_sizes(bad)


class ExpectedSums(unittest.TestCase):
    def test_the_expected_sum_is_the_sum_of_every_ranks_values(self):
        for world in (1, 2, 3, 8):
            for index in range(10):
                values = [preload.element_value(rank, index) for rank in range(world)]
                self.assertEqual(preload.expected_sum(world, index), sum(values))

    def test_sums_stay_exact_in_bf16_up_to_64_ranks(self):
        # Integers up to 256 are exact in bf16's 8-bit significand.
        largest = max(preload.expected_sum(64, index) for index in range(preload.VALUE_SPAN))
        self.assertLessEqual(largest, 256)

    def test_ranks_contribute_different_values(self):
        self.assertNotEqual(preload.element_value(0, 0), preload.element_value(1, 0))

    def test_counts_of_whole_elements_only(self):
        self.assertEqual(preload.count_of(3000, 2), 1500)
        self.assertEqual(preload.count_of(3000, 4), 750)
        self.assertIsNone(preload.count_of(3001, 2))


class Arguments(unittest.TestCase):
    def test_options(self):
        args = preload.parse_args(["--dtypes", "bf16,f32", "--sizes", "1K,2K", "--iters", "3",
                                   "--no-graph"])
        self.assertEqual(args.dtypes, ["bf16", "f32"])
        self.assertEqual(args.sizes, [1024, 2048])
        self.assertEqual(args.iters, 3)
        self.assertFalse(args.graph)
        self.assertTrue(preload.parse_args([]).graph)

    def test_bad_options_exit_2(self):
        for bad in (["--dtypes", "f64"], ["--sizes", "1K-"], ["--iters", "0"]):
            with self.subTest(bad=bad), self.assertRaises(SystemExit) as exited:
                with open(os.devnull, "w") as devnull:
                    saved, sys.stderr = sys.stderr, devnull
                    try:
                        preload.parse_args(bad)
                    finally:
                        sys.stderr = saved
            self.assertEqual(exited.exception.code, 2)

    def test_without_torchrun_it_skips_with_77(self):
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
        ran = subprocess.run([sys.executable, SCRIPT, "--sizes", "1K"], env=env,
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(ran.returncode, preload.SKIP, ran.stdout + ran.stderr)
        self.assertIn("SKIPPED", ran.stdout)


if __name__ == "__main__":
    unittest.main()
