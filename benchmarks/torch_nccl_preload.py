#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""torch.distributed all-reduce (NCCL backend) checked and timed, for the
NCCL interposer: run it plain and with LD_PRELOAD=libpeerplan_nccl.so to
compare (scripts/nccl-interposer-check.sh does both).

    torchrun --nproc-per-node 2 benchmarks/torch_nccl_preload.py
    LD_PRELOAD=build-cuda/src/nccl_interposer/libpeerplan_nccl.so \\
      PEERPLAN_NCCL_DECLARE=bf16:1K-64M:x4 \\
      torchrun --nproc-per-node 2 benchmarks/torch_nccl_preload.py

Each rank fills its tensor with small integers that depend on the rank and
the element, so every sum is exact in the dtype, runs dist.all_reduce eager
and replayed from a CUDA graph, counts the elements that differ from the
expected sum and times the median of --iters calls with CUDA events.
Rank 0 prints one line per dtype, size and mode (bytes, median us, #wrong),
then `#wrong <total>`; exit 1 when any element is wrong, 77 (SKIPPED)
without torch or CUDA.
"""

import argparse
import functools
import os
import statistics
import sys

SKIP = 77

# Bytes per element and the torch dtype's name, per --dtypes name.
DTYPES = {"bf16": (2, "bfloat16"), "f16": (2, "float16"), "f32": (4, "float32")}

# Each rank's values are integers in [0, VALUE_SPAN): a sum over up to 64
# ranks is at most 192, and every integer up to 256 is exact in bf16, f16
# and f32, whatever order the reduction adds in.
VALUE_SPAN = 4


def parse_size(text):
    """'3000', '1K', '1.5M', '64M' -> bytes (K/M/G are powers of 1024)."""
    text = text.strip()
    if not text:
        raise ValueError("an empty size")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1].upper())
    number = text[:-1] if scale else text
    try:
        value = float(number) * (scale or 1)
    except ValueError:
        raise ValueError(f"size {text!r} is not a number of bytes (e.g. 3000, 1K, 1.5M)") from None
    if value <= 0 or value != int(value):
        raise ValueError(f"size {text!r} is not a positive whole number of bytes")
    return int(value)


def parse_sizes(text):
    """Comma-separated sizes or ranges: '1K-64M:x4' (multiply by 4 from
    1K up to 64M), '8-64:+8' (add 8), single sizes; sorted, no repeats."""
    sizes = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" not in part:
            sizes.add(parse_size(part))
            continue
        span, _, step = part.partition(":")
        low_text, _, high_text = span.partition("-")
        low, high = parse_size(low_text), parse_size(high_text)
        if high < low:
            raise ValueError(f"range {part!r} ends below its start")
        step = step or "x2"
        try:
            amount = int(step[1:])
        except ValueError:
            amount = 0
        if step[0] not in "x+" or amount < (2 if step[0] == "x" else 1):
            raise ValueError(f"step {step!r} of {part!r} is not xN (N >= 2) or +N (N >= 1)")
        size = low
        while size <= high:
            sizes.add(size)
            size = size * amount if step[0] == "x" else size + amount
    if not sizes:
        raise ValueError(f"no sizes in {text!r}")
    return sorted(sizes)


# The declared range and, between its sizes, a couple that are not declared.
DEFAULT_DECLARED = "1K-64M:x4"
DEFAULT_SIZES = DEFAULT_DECLARED + ",3000,1.5M"


def element_value(rank, index):
    """Rank `rank`'s value at element `index`, an integer in [0, VALUE_SPAN)."""
    return (rank + index) % VALUE_SPAN


def expected_sum(world, index):
    """The all-reduced value at element `index` over ranks 0..world-1."""
    return sum(element_value(rank, index) for rank in range(world))


def count_of(size, element_bytes):
    """Elements of a buffer of `size` bytes; None when it is not whole."""
    return size // element_bytes if size % element_bytes == 0 else None


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="torch.distributed all_reduce (NCCL) checked and timed, eager and in a "
        "CUDA graph; run under torchrun")
    parser.add_argument("--dtypes", default="bf16",
                        help="comma-separated of " + ", ".join(DTYPES) + " (default bf16)")
    parser.add_argument("--sizes", default=DEFAULT_SIZES,
                        help="bytes of the whole buffer: sizes and ranges such as 1K-64M:x4 "
                        "(xN multiplies, +N adds), comma-separated (default %(default)s)")
    parser.add_argument("--iters", type=int, default=50, help="timed calls per size (default 50)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls first (default 5)")
    parser.add_argument("--graph", action=argparse.BooleanOptionalAction, default=True,
                        help="also replay the all-reduce from a CUDA graph (default on)")
    args = parser.parse_args(argv)
    dtypes = [name.strip() for name in args.dtypes.split(",") if name.strip()]
    unknown = [name for name in dtypes if name not in DTYPES]
    if unknown or not dtypes:
        parser.error(f"--dtypes {args.dtypes!r}: use names of {', '.join(DTYPES)}")
    try:
        args.sizes = parse_sizes(args.sizes)
    except ValueError as error:
        parser.error(f"--sizes: {error}")
    if args.iters < 1 or args.warmup < 0:
        parser.error("--iters must be at least 1 and --warmup at least 0")
    args.dtypes = dtypes
    return args


def skip(why):
    print(f"SKIPPED torch_nccl_preload: {why}", flush=True)
    sys.exit(SKIP)


def main(argv=None):
    args = parse_args(argv)
    try:
        import torch
        import torch.distributed as dist
    except ImportError as error:
        skip(f"torch does not import ({error})")
    if not torch.cuda.is_available():
        skip("no CUDA device")
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        skip("not started by torchrun (RANK, WORLD_SIZE unset): "
             "torchrun --nproc-per-node N benchmarks/torch_nccl_preload.py")

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    try:
        # device_id makes NCCL's communicator (and the interposer's setup) now.
        dist.init_process_group("nccl", device_id=device)
    except TypeError:  # a torch without device_id
        dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()

    def fill(tensor):
        index = torch.arange(tensor.numel(), device=device)
        tensor.copy_(((index + rank) % VALUE_SPAN).to(tensor.dtype))

    def wrong_in(tensor):
        index = torch.arange(tensor.numel(), device=device)
        # expected_sum(world, i) in closed form, on the device.
        expected = sum(((index + r) % VALUE_SPAN) for r in range(world)).to(tensor.dtype)
        return int((tensor != expected).sum().item())

    def median_us(call, iters):
        start = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        end = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for i in range(iters):
            start[i].record()
            call()
            end[i].record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(start, end)) * 1000.0

    rows = []
    total_wrong = 0
    for name in args.dtypes:
        element_bytes, torch_name = DTYPES[name]
        dtype = getattr(torch, torch_name)
        for size in args.sizes:
            count = count_of(size, element_bytes)
            if count is None:
                rows.append((name, size, "-", "n/a", f"not a whole number of {name} elements"))
                continue
            tensor = torch.empty(count, dtype=dtype, device=device)

            # Eager: each timed call reduces freshly filled values, checked once.
            fill(tensor)
            dist.all_reduce(tensor)
            torch.cuda.synchronize()
            wrong = wrong_in(tensor)
            for _ in range(args.warmup):
                dist.all_reduce(tensor)
            us = median_us(functools.partial(dist.all_reduce, tensor), args.iters)
            rows.append((name, size, "eager", f"{us:.1f}", wrong))
            total_wrong += wrong

            if args.graph:
                # torch wants the first calls (NCCL's lazy setup) outside
                # the capture, on a side stream.
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(3):
                        dist.all_reduce(tensor)
                torch.cuda.current_stream().wait_stream(side)
                torch.cuda.synchronize()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    dist.all_reduce(tensor)
                fill(tensor)
                torch.cuda.synchronize()
                graph.replay()
                torch.cuda.synchronize()
                wrong = wrong_in(tensor)
                for _ in range(args.warmup):
                    graph.replay()
                us = median_us(graph.replay, args.iters)
                rows.append((name, size, "graph", f"{us:.1f}", wrong))
                total_wrong += wrong
                del graph
            del tensor

    # Every rank's wrong count, so rank 0's verdict covers them all.
    wrong_all = torch.tensor([total_wrong], dtype=torch.int64, device=device)
    dist.all_reduce(wrong_all)
    total_wrong = int(wrong_all.item())
    if rank == 0:
        print(f"# torch.distributed all_reduce, NCCL backend, {world} rank(s), "
              f"LD_PRELOAD={os.environ.get('LD_PRELOAD', '')!r} "
              f"PEERPLAN_NCCL_DECLARE={os.environ.get('PEERPLAN_NCCL_DECLARE', '')!r}")
        print(f"# {'dtype':<5} {'bytes':>10} {'mode':<5} {'us':>10} {'#wrong':>7}  (rank 0's)")
        for name, size, mode, us, wrong in rows:
            print(f"  {name:<5} {size:>10} {mode:<5} {us:>10} {wrong!s:>7}")
        print(f"#wrong {total_wrong}", flush=True)
    dist.destroy_process_group()
    return 1 if total_wrong else 0


if __name__ == "__main__":
    sys.exit(main())
