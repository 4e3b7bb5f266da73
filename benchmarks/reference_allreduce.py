#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Reference timings for peerplan's collective benchmark, on the same GPUs.

Measures, per message size and dtype, in eager mode and under CUDA graph replay:
  - NCCL all-reduce through torch.distributed (in place);
  - PyTorch symmetric-memory one-shot and two-shot all-reduce
    (torch.ops.symm_mem.one_shot_all_reduce / two_shot_all_reduce_ on a
    buffer from symm_mem.empty + symm_mem.rendezvous, peer loads over P2P);
  - the unfused baseline of peerplan's fused op: NCCL all-reduce, then a
    separate residual add + RMSNorm in PyTorch (fp32 variance, as in a
    typical model), for sizes up to --fused-max.

Timing follows benchmarks/collective_bench.cpp so the ratios are fair:
eager = mean per call over a batch of N back-to-back calls on one stream
(CUDA events), graph = a CUDA graph of 20 captured calls replayed N/20 times;
median over 7 batches, each after a barrier; the slowest rank's median.

    python3 benchmarks/reference_allreduce.py --out ref.json
    python3 benchmarks/reference_allreduce.py --out ref.json --dtypes bf16 -b 1K -e 64M --hidden 7168

One process per visible GPU (or --world N). Rank 0 prints every row as a JSON
line and rewrites --out after every size, so a run cut short keeps what it
measured ("complete": false until the end). --dry-run prints the plan without
touching a GPU (no torch needed). The default run (3 dtypes, 1K..256M by 4,
eager and graph) took 25 s on 2x H200 with torch 2.11. With torch 2.11 the
symmetric-memory ops support bf16 and f32 only: f16 rows record the error.
"""
import os

# Peer-to-peer only: never NVLS / multicast, for NCCL nor for symmetric memory
# (as scripts/gpu-check.sh). Set before torch.distributed is imported, since
# both read them once at initialisation.
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"

import argparse
import datetime
import gc
import json
import socket
import statistics
import sys
import traceback
import warnings

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError:  # --dry-run and py_compile work without torch
    torch = dist = mp = None

# The C++ benchmark's constants (time_calls in collective_bench.cpp).
CALLS_PER_GRAPH = 20
BATCHES = 7

# name -> (torch dtype attribute, element size in bytes)
DTYPES = {"bf16": ("bfloat16", 2), "f16": ("float16", 2), "f32": ("float32", 4)}
MODES = ("eager", "graph")
RMS_EPS = 1e-6
MIB = 1 << 20


# ---------------------------------------------------------------------------
# Plan: sizes, iterations, fused rows (pure Python, shared with --dry-run)
# ---------------------------------------------------------------------------

def parse_size(text):
    """'1K', '256M', '1.5G', '1024' -> bytes (1024-based, as the C++ -b/-e)."""
    text = text.strip()
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    scale = units.get(text[-1:].upper(), 1)
    number = text[:-1] if scale != 1 else text
    return int(float(number) * scale)


def plan_sizes(min_bytes, max_bytes, factor):
    """Message sizes from min to max, times factor each step (the C++ loop)."""
    sizes, b = [], float(min_bytes)
    while b <= max_bytes * 1.0000001:
        sizes.append(int(b))
        if factor <= 1:
            break
        b *= factor
    return sizes


def iters_for(nbytes, iters):
    """Fewer calls for large messages keep a default run to a few minutes;
    multiples of 20 keep every graph replay a whole graph."""
    if nbytes <= MIB:
        return iters
    if nbytes <= 16 * MIB:
        return min(iters, 40)
    return min(iters, 20)


def fused_rows_for(nbytes, hidden, esize):
    """Rows of the fused op for a message size: at least one row."""
    return max(1, nbytes // (hidden * esize))


def format_bytes(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} B"


def print_plan(opts, world):
    print(f"# plan: world {world}, modes {','.join(opts.modes)}, hidden {opts.hidden}, "
          f"fused up to {format_bytes(opts.fused_max)}, warmup {opts.warmup}")
    for name in opts.dtypes:
        esize = DTYPES[name][1]
        for nbytes in plan_sizes(opts.min_bytes, opts.max_bytes, opts.factor):
            count = nbytes // esize
            if count < 1:
                continue
            fused = (f"fused rows {fused_rows_for(count * esize, opts.hidden, esize)}"
                     if count * esize <= opts.fused_max else "no fused")
            print(f"{name:5s} {format_bytes(count * esize):>10s} count {count:>10d} "
                  f"iters {iters_for(count * esize, opts.iters):>4d}  {fused}")


# ---------------------------------------------------------------------------
# Per-rank context and cross-rank agreement
# ---------------------------------------------------------------------------

class Ctx:
    """What every measurement needs: rank, device, the timing stream, a CPU
    (gloo) group for barriers and agreement, the symmetric-memory module."""

    def __init__(self, rank, world, opts):
        self.rank, self.world, self.opts = rank, world, opts
        self.device = torch.device("cuda", rank)
        self.stream = torch.cuda.Stream(device=self.device)
        # Host-side barriers and result exchange go through gloo so they put
        # no work on the GPU streams being timed (the C++ uses MPI_Barrier).
        self.cpu_group = dist.new_group(backend="gloo",
                                        timeout=datetime.timedelta(seconds=opts.timeout))
        self.group_name = dist.group.WORLD.group_name
        self.symm, self.symm_error = load_symmetric_memory(self.group_name)


def load_symmetric_memory(group_name):
    """The symmetric-memory module, or None and why not."""
    try:
        import torch.distributed._symmetric_memory as symm
    except Exception as e:  # noqa: BLE001 - recorded, never fatal
        return None, describe(e)
    # Needed before rendezvous up to torch 2.7; deprecated (a warning) since.
    enable = getattr(symm, "enable_symm_mem_for_group", None)
    if enable is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                enable(group_name)
            except Exception as e:  # noqa: BLE001
                return None, describe(e)
    return symm, None


def describe(exc):
    """One line for the JSON: the type and the first 300 characters."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:300]


def attempt(ctx, fn):
    """Run fn on every rank; (value, None) if it worked everywhere, else
    (None, 'rank r: error'). Every rank learns of a failure on any rank, so
    all of them skip the next collective step together instead of one rank
    waiting forever in a rendezvous the other never reaches."""
    value, err = None, None
    try:
        value = fn()
    except Exception as e:  # noqa: BLE001 - one failure must never kill the run
        err = describe(e)
        if ctx.opts.verbose:
            traceback.print_exc()
    errors = [None] * ctx.world
    dist.all_gather_object(errors, err, group=ctx.cpu_group)
    for r, e in enumerate(errors):
        if e:
            return None, f"rank {r}: {e}"
    return value, None


def max_over_ranks(ctx, value):
    """The largest value over the ranks: for times, every rank reports the
    slowest rank's median, as the C++ benchmark (and nccl-tests) does."""
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=ctx.cpu_group)
    return float(t.item())


def batch_barrier(ctx):
    torch.cuda.synchronize(ctx.device)
    dist.barrier(group=ctx.cpu_group)


# ---------------------------------------------------------------------------
# Timing (the method of time_calls in collective_bench.cpp)
# ---------------------------------------------------------------------------

def time_op(ctx, fn, iters, graph):
    """Median over BATCHES of the mean µs per call of fn, slowest rank.
    Eager: `iters` back-to-back calls per batch. Graph: a CUDA graph of
    CALLS_PER_GRAPH captured calls, replayed iters/CALLS_PER_GRAPH times."""
    stream, warmup = ctx.stream, max(1, ctx.opts.warmup)
    replays = max(1, iters // CALLS_PER_GRAPH)
    # Inputs were written on the default stream, on every rank: let them land
    # before the timing stream (or a peer) reads them.
    batch_barrier(ctx)
    with torch.cuda.stream(stream):
        for _ in range(warmup):  # also creates lazily built state before capture
            fn()
    stream.synchronize()
    g = None
    if graph:
        g = torch.cuda.CUDAGraph()
        # thread_local, as the C++ capture: other threads (NCCL's watchdog)
        # may keep querying events while this thread captures.
        with torch.cuda.graph(g, stream=stream, capture_error_mode="thread_local"):
            for _ in range(CALLS_PER_GRAPH):
                fn()
        with torch.cuda.stream(stream):
            for _ in range(warmup):
                g.replay()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    per_call = []
    for _ in range(BATCHES):
        batch_barrier(ctx)
        with torch.cuda.stream(stream):
            start.record(stream)
            if graph:
                for _ in range(replays):
                    g.replay()
            else:
                for _ in range(iters):
                    fn()
            stop.record(stream)
        stop.synchronize()
        calls = replays * CALLS_PER_GRAPH if graph else iters
        per_call.append(start.elapsed_time(stop) * 1000.0 / calls)
    del g
    stream.synchronize()
    return max_over_ranks(ctx, statistics.median(per_call))


def time_both_modes(ctx, rows, field, key, fn, iters):
    """Time fn in every requested mode; the time or the error goes in the rows."""
    for mode in ctx.opts.modes:
        value, err = attempt(ctx, lambda: time_op(ctx, fn, iters, mode == "graph"))
        rows[mode][field] = value
        if err:
            rows[mode]["errors"][key] = err


def record_error(rows, key, err):
    for row in rows.values():
        row["errors"][key] = err


def count_wrong(actual, expected):
    """Elements differing from an exact expected value (small integers are
    exact in every dtype, as the C++ benchmark's inputs)."""
    return int((actual.float() != expected).sum().item())


def check_note(ctx, wrong, count):
    """Agree on the worst rank's #wrong; a note for the errors, or None."""
    worst = int(max_over_ranks(ctx, float(wrong)))
    return f"check: {worst} of {count} elements wrong" if worst else None


# ---------------------------------------------------------------------------
# The measured operations
# ---------------------------------------------------------------------------

def measure_nccl(ctx, rows, dtype, count, iters):
    x, err = attempt(ctx, lambda: torch.empty(count, dtype=dtype, device=ctx.device))
    if err:
        record_error(rows, "nccl", err)
        return
    expected = ctx.world * (ctx.world + 1) / 2

    def check():
        x.fill_(ctx.rank + 1)
        dist.all_reduce(x)
        return count_wrong(x, expected)

    wrong, err = attempt(ctx, check)
    note = err or check_note(ctx, wrong, count)
    if note:
        record_error(rows, "nccl", note)
    # Zeros: the in-place sums then stay finite over thousands of calls.
    x.zero_()
    time_both_modes(ctx, rows, "nccl_us", "nccl", lambda: dist.all_reduce(x), iters)
    del x


def measure_symm(ctx, rows, dtype, count, iters):
    keys = ("symm_one_shot", "symm_two_shot")
    if ctx.symm is None:
        for key in keys:
            record_error(rows, key, f"import: {ctx.symm_error}")
        return
    buf, err = attempt(ctx, lambda: ctx.symm.empty(count, dtype=dtype, device=ctx.device))
    if err:
        for key in keys:
            record_error(rows, key, f"alloc: {err}")
        return
    handle, err = attempt(ctx, lambda: ctx.symm.rendezvous(buf, ctx.group_name))
    if err:
        for key in keys:
            record_error(rows, key, f"rendezvous: {err}")
        del buf
        return
    expected = ctx.world * (ctx.world + 1) / 2
    group = ctx.group_name

    def one_shot():
        return torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", group)

    def two_shot():
        return torch.ops.symm_mem.two_shot_all_reduce_(buf, "sum", group)

    for key, field, op in (("symm_one_shot", "symm_one_shot_us", one_shot),
                           ("symm_two_shot", "symm_two_shot_us", two_shot)):
        def check():
            buf.fill_(ctx.rank + 1)
            out = op()  # one-shot returns a new tensor, two-shot reduces in place
            return count_wrong(out, expected)

        wrong, err = attempt(ctx, check)
        if err:  # unsupported dtype, size or world: no point timing it
            record_error(rows, key, err)
            continue
        note = check_note(ctx, wrong, count)
        if note:
            record_error(rows, key, note)
        batch_barrier(ctx)  # peers finished reading before the buffer changes
        buf.zero_()
        time_both_modes(ctx, rows, field, key, op, iters)
    batch_barrier(ctx)  # no peer still reads this buffer when it is freed
    del handle, buf


def rms_norm(h, weight, eps):
    """RMSNorm as a typical model writes it: variance in fp32, scale in the
    input dtype (e.g. Llama's RMSNorm)."""
    hf = h.float()
    variance = hf.pow(2).mean(-1, keepdim=True)
    return weight * (hf * torch.rsqrt(variance + eps)).to(h.dtype)


def measure_fused_baseline(ctx, rows, dtype, nrows, iters):
    hidden = ctx.opts.hidden

    def alloc():
        x = torch.zeros(nrows, hidden, dtype=dtype, device=ctx.device)
        residual = torch.randn(nrows, hidden, dtype=dtype, device=ctx.device)
        weight = torch.ones(hidden, dtype=dtype, device=ctx.device)
        return x, residual, weight

    bufs, err = attempt(ctx, alloc)
    if err:
        record_error(rows, "nccl_plus_norm", err)
        return
    x, residual, weight = bufs

    def unfused():
        # What peerplan fuses: all-reduce, residual add (the new residual is
        # kept for the next layer), RMSNorm of the sum.
        dist.all_reduce(x)
        h = x + residual
        return rms_norm(h, weight, RMS_EPS), h

    time_both_modes(ctx, rows, "nccl_plus_norm_us", "nccl_plus_norm", unfused, iters)
    del x, residual, weight, bufs


def measure_size(ctx, name, nbytes):
    """Every operation at one size and dtype: one row per mode."""
    attr, esize = DTYPES[name]
    dtype = getattr(torch, attr)
    count = nbytes // esize
    if count < 1:
        return []
    nbytes = count * esize
    iters = iters_for(nbytes, ctx.opts.iters)
    fused = nbytes <= ctx.opts.fused_max
    nrows = fused_rows_for(nbytes, ctx.opts.hidden, esize) if fused else None
    rows = {mode: {"dtype": name, "bytes": nbytes, "count": count, "mode": mode,
                   "iters": iters, "nccl_us": None, "symm_one_shot_us": None,
                   "symm_two_shot_us": None, "nccl_plus_norm_us": None,
                   "fused_rows": nrows,
                   "fused_bytes": nrows * ctx.opts.hidden * esize if fused else None,
                   "errors": {}}
            for mode in ctx.opts.modes}
    measure_nccl(ctx, rows, dtype, count, iters)
    measure_symm(ctx, rows, dtype, count, iters)
    if fused:
        measure_fused_baseline(ctx, rows, dtype, nrows, iters)
    # Give the memory back before the next (4x larger) size.
    gc.collect()
    torch.cuda.synchronize(ctx.device)
    torch.cuda.empty_cache()
    return list(rows.values())


# ---------------------------------------------------------------------------
# Output (rank 0)
# ---------------------------------------------------------------------------

def header(ctx):
    nccl = None
    try:
        nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception:  # noqa: BLE001
        pass
    backend = None
    if ctx.symm is not None and hasattr(ctx.symm, "get_backend"):
        try:
            backend = ctx.symm.get_backend(ctx.device)
        except Exception:  # noqa: BLE001
            pass
    o = ctx.opts
    return {"tool": "reference_allreduce", "torch": torch.__version__, "nccl": nccl,
            "gpu": torch.cuda.get_device_name(ctx.device), "world": ctx.world,
            "symm_backend": backend, "symm_error": ctx.symm_error,
            "hidden": o.hidden, "fused_max": o.fused_max, "warmup": o.warmup,
            "iters": o.iters, "calls_per_graph": CALLS_PER_GRAPH, "batches": BATCHES,
            "modes": list(o.modes), "dtypes": list(o.dtypes),
            "env": {k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                                                   "NVSHMEM_DISABLE_NVLS", "TORCH_SYMMMEM",
                                                   "CUDA_VISIBLE_DEVICES")},
            "command": " ".join(sys.argv),
            "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "complete": False, "rows": []}


def write_json(path, doc):
    """Atomic rewrite: a run killed mid-write still leaves the previous file."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


# ---------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------

def worker(rank, world, port, opts):
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, device_id=torch.device("cuda", rank),
                            timeout=datetime.timedelta(seconds=opts.timeout))
    ctx = Ctx(rank, world, opts)
    doc = header(ctx) if rank == 0 else None
    if rank == 0:
        print(f"# reference_allreduce: {doc['gpu']} x{world}, torch {doc['torch']}, NCCL {doc['nccl']}, "
              f"symm backend {doc['symm_backend']}{', symm error: ' + ctx.symm_error if ctx.symm_error else ''}",
              flush=True)
        write_json(opts.out, doc)
    for name in opts.dtypes:
        for nbytes in plan_sizes(opts.min_bytes, opts.max_bytes, opts.factor):
            rows = measure_size(ctx, name, nbytes)
            if rank == 0 and rows:
                for row in rows:
                    print(json.dumps(row), flush=True)
                doc["rows"].extend(rows)
                write_json(opts.out, doc)
    if rank == 0:
        doc["complete"] = True
        write_json(opts.out, doc)
    dist.barrier(group=ctx.cpu_group)
    dist.destroy_process_group()


def free_port():
    """A port nobody holds now, so two runs on one host never collide."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", help="JSON output file (rewritten after every size)")
    p.add_argument("--dtypes", default="bf16,f16,f32", help="comma list of bf16, f16, f32")
    p.add_argument("-b", "--minbytes", default="1K", help="smallest message (K/M/G suffixes)")
    p.add_argument("-e", "--maxbytes", default="256M", help="largest message")
    p.add_argument("-f", "--stepfactor", type=float, default=4, help="size multiplier between rows")
    p.add_argument("--hidden", type=int, default=7168, help="fused baseline: row length")
    p.add_argument("--fused-max", default="4M", help="fused baseline up to this message size")
    p.add_argument("-n", "--iters", type=int, default=100,
                   help="calls per batch up to 1 MiB (at most 40 up to 16 MiB, 20 above)")
    p.add_argument("-w", "--warmup", type=int, default=10,
                   help="warm-up calls (and graph replays), as the C++ -w")
    p.add_argument("--modes", default="eager,graph", help="eager, graph or both")
    p.add_argument("--world", type=int, default=0, help="processes (default: every visible GPU)")
    p.add_argument("--timeout", type=int, default=300, help="seconds before a stuck collective fails")
    p.add_argument("--dry-run", action="store_true", help="print the sizes and exit")
    p.add_argument("-v", "--verbose", action="store_true", help="tracebacks of recorded errors")
    opts = p.parse_args(argv)
    opts.dtypes = [d.strip() for d in opts.dtypes.split(",") if d.strip()]
    opts.modes = [m.strip() for m in opts.modes.split(",") if m.strip()]
    bad = [d for d in opts.dtypes if d not in DTYPES] + [m for m in opts.modes if m not in MODES]
    if bad:
        p.error(f"unknown dtype or mode: {', '.join(bad)}")
    opts.min_bytes, opts.max_bytes = parse_size(opts.minbytes), parse_size(opts.maxbytes)
    opts.fused_max = parse_size(opts.fused_max)
    opts.factor = opts.stepfactor
    if not opts.dry_run and not opts.out:
        p.error("--out FILE is required")
    return opts


def main():
    opts = parse_args()
    if opts.dry_run:
        print_plan(opts, opts.world or "all GPUs")
        return 0
    if torch is None:
        print("reference_allreduce: PyTorch is not installed", file=sys.stderr)
        return 1
    devices = torch.cuda.device_count()
    world = opts.world or devices
    if world < 1 or world > devices:
        print(f"reference_allreduce: --world {world} but {devices} GPUs visible", file=sys.stderr)
        return 1
    opts.out = os.path.abspath(opts.out)
    print_plan(opts, world)
    mp.spawn(worker, args=(world, free_port(), opts), nprocs=world, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
