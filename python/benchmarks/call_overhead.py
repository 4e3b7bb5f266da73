# SPDX-License-Identifier: Apache-2.0
"""Host time per eager call from Python: the cases of
benchmarks/call_overhead_bench.cpp, timed the same way, through the Python
package; benchmarks/compare_call_overhead.py sets the two side by side (the
issue's requirement: a call from Python costs at most ~3 us more than the
same call from C++).

    mpirun -np 2 python3 python/benchmarks/call_overhead.py --json py.json

Each case twice:
  python  the package's call: comm.all_reduce(x, out),
          comm.fused_add_rms_norm(x, residual, weight, eps), comm.rank
          (the empty case: the floor of a call into the library);
  ctypes  the same C function through the package's loaded library
          (peerplan._library.lib), its arguments built once, outside the
          loop: what the wrapper itself costs is python - ctypes.
Tensors: PyTorch CUDA tensors on the cuda backend (the package's fast path:
data_ptr, shape, stride; calls on a torch.cuda.Stream made current, as an
application's would be), NumPy arrays on the host backend (f16: NumPy has no
bf16, so --dtype auto means bf16 on cuda and f16 on host, in both programs).

Method (as in C++): -w untimed calls, then --batches batches of -n
back-to-back calls; before each batch, outside the timed region, the GPU is
drained (torch.cuda.synchronize) and the ranks meet (a barrier). A batch is
timed with time.perf_counter_ns and divided by its calls; the row is the
median batch, the slowest rank's. The garbage collector stays on: what the
wrapper allocates per call is part of its cost. On the host backend every
call returns when its exchange is done, so the host time includes it.

Barriers and the gathering of the ranks' medians go through mpi4py where it
is installed, else through peerplan itself (an undeclared all-reduce).
Exits 77 when neither PyTorch with CUDA nor NumPy can give it tensors.
"""

import argparse
import ctypes
import json
import os
import platform
import sys
import time

import peerplan
from peerplan import _library, _tensors
from peerplan.communicator import ROUTES

HIDDEN = 4096
EPS = 1e-6
# (name, op, rows, hidden): the same list as benchmarks/call_overhead_bench.cpp.
CASES = [
    ("empty", "empty", 0, 0),
    ("allreduce_1x512", "allreduce", 1, 512),
    ("allreduce_8x4096", "allreduce", 8, HIDDEN),
    ("fused_1x4096", "fused", 1, HIDDEN),
    ("fused_16x4096", "fused", 16, HIDDEN),
]
ITEMSIZE = {"f16": 2, "bf16": 2, "f32": 4}
C_DTYPE = {"f16": 0, "bf16": 1, "f32": 2}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--calls", type=int, default=32, help="calls per timed batch (collectives)")
    parser.add_argument("--empty-calls", type=int, default=1000, help="calls per timed batch (the empty case)")
    parser.add_argument("-b", "--batches", type=int, default=50, help="timed batches (median)")
    parser.add_argument("-w", "--warmup", type=int, default=64, help="untimed calls before the batches")
    parser.add_argument("-d", "--dtype", default="auto", choices=["auto", "f16", "bf16", "f32"],
                        help="auto: bf16 on the cuda backend, f16 on host")
    parser.add_argument("--json", help="write the rows as JSON to this file (rank 0)")
    args = parser.parse_args()
    for name in ("calls", "empty_calls", "batches"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 0:
        parser.error("--warmup must be at least 0")
    return args


def local_rank_and_size(mpi, rank, size):
    """This rank's index among the ranks of its machine, and their number."""
    if mpi is not None:
        local = mpi.COMM_WORLD.Split_type(mpi.COMM_TYPE_SHARED)
        result = local.Get_rank(), local.Get_size()
        local.Free()
        return result
    for rank_var, size_var in (("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
                               ("MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
                               ("SLURM_LOCALID", "SLURM_NTASKS_PER_NODE")):
        if rank_var in os.environ and size_var in os.environ:
            return int(os.environ[rank_var]), int(os.environ[size_var])
    return rank, size


class Tensors:
    """Zero-filled tensors of one kind: PyTorch on this rank's GPU, or NumPy."""

    def __init__(self, kind, dtype, device=None):
        self.kind = kind
        self.device = device
        if kind == "torch":
            import torch

            self.torch = torch
            self.dtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dtype]
        else:
            import numpy

            if dtype == "bf16":
                raise SystemExit("call_overhead: NumPy has no bf16; use --dtype f16 or f32 on the "
                                 "host backend")
            self.numpy = numpy
            self.dtype = {"f16": numpy.float16, "f32": numpy.float32}[dtype]

    def zeros(self, shape, dtype=None):
        if self.kind == "torch":
            return self.torch.zeros(shape, dtype=dtype or self.dtype, device=self.device)
        return self.numpy.zeros(shape, dtype=dtype or self.dtype)

    def f32_values(self, values):
        if self.kind == "torch":
            return self.torch.tensor(values, dtype=self.torch.float32, device=self.device)
        return self.numpy.array(values, dtype=self.numpy.float32)

    def to_list(self, tensor):
        return tensor.tolist()


class Ranks:
    """Barrier and all-gather of one float per rank: mpi4py's, or where it is
    missing, peerplan's own (an undeclared f32 all-reduce, each rank adding
    its value at its own index into zeros: exact, every other term is 0)."""

    def __init__(self, mpi, comm, tensors, drain):
        self.mpi, self.comm, self.tensors, self.drain = mpi, comm, tensors, drain

    def barrier(self):
        if self.mpi is not None:
            self.mpi.COMM_WORLD.Barrier()
            return
        token = self.tensors.f32_values([0.0] * 3)  # 3 elements: declared by no case
        self.comm.all_reduce(token)
        self.drain()

    def allgather(self, value):
        if self.mpi is not None:
            return [float(v) for v in self.mpi.COMM_WORLD.allgather(value)]
        values = [0.0] * self.comm.size
        values[self.comm.rank] = value
        gathered = self.tensors.f32_values(values)
        self.comm.all_reduce(gathered)
        self.drain()
        return [float(v) for v in self.tensors.to_list(gathered)]


def time_batches(batch, calls, batches, warmup, drain, ranks):
    """The method of the docstring: batch(n) makes n calls. Returns the
    slowest rank's median ns per call, and every rank's median."""
    if warmup:
        batch(warmup)
    per_call = []
    clock = time.perf_counter_ns
    for _ in range(batches):
        drain()
        ranks.barrier()
        t0 = clock()
        batch(calls)
        t1 = clock()
        per_call.append((t1 - t0) / calls)
    drain()
    per_call.sort()
    rank_ns = ranks.allgather(per_call[len(per_call) // 2])
    return max(rank_ns), rank_ns


def fail(function, result):
    lib = _library.lib
    raise SystemExit(f"{function}: {lib.peerplan_result_string(result).decode()}: "
                     f"{lib.peerplan_last_error().decode()}")


def main():
    args = parse_args()
    try:
        from mpi4py import MPI as mpi
    except ImportError:
        mpi = None  # the package initialises MPI itself

    comm = peerplan.Communicator(mpi.COMM_WORLD if mpi is not None else None)
    rank, size, backend = comm.rank, comm.size, comm.backend
    _, local_size = local_rank_and_size(mpi, rank, size)  # ranks sharing this machine

    # Tensors that this backend takes: PyTorch CUDA on cuda, NumPy on host.
    gpus_shared = False
    device_name = "host"
    try:
        if backend == "cuda":
            import torch

            if not torch.cuda.is_available():
                raise ImportError("PyTorch sees no GPU")
            gpus = torch.cuda.device_count()
            # The GPU peerplan drives (device= / PEERPLAN_DEVICE, else the local
            # rank modulo the GPUs), for torch too.
            device = torch.device("cuda", comm.cuda_device)
            torch.cuda.set_device(device)
            device_name = torch.cuda.get_device_name(device)
            gpus_shared = local_size > gpus
            dtype = "bf16" if args.dtype == "auto" else args.dtype
            tensors = Tensors("torch", dtype, device)
        else:
            dtype = "f16" if args.dtype == "auto" else args.dtype
            tensors = Tensors("numpy", dtype)
    except ImportError as e:
        need = "PyTorch with CUDA" if backend == "cuda" else "NumPy"
        if rank == 0:
            print(f"call_overhead: SKIPPED: the {backend} backend needs {need} tensors here ({e})",
                  flush=True)
        comm.close()
        sys.exit(77)

    if tensors.kind == "torch":
        stream = tensors.torch.cuda.Stream(device=tensors.device)
        stream_handle = stream.cuda_stream

        def drain():
            tensors.torch.cuda.synchronize()
    else:
        stream = None
        stream_handle = 0

        def drain():
            pass

    ranks = Ranks(mpi, comm, tensors, drain)
    itemsize = ITEMSIZE[dtype]
    weight = tensors.zeros((HIDDEN,))
    declarations = []
    for name, op, rows, hidden in CASES:
        if op == "allreduce":
            declarations.append(peerplan.Declaration.all_reduce(name, dtype, (rows, hidden)))
        elif op == "fused":
            declarations.append(peerplan.Declaration.fused_add_rms_norm(name, dtype, (rows, hidden),
                                                                        weight, EPS))
    comm.declare(declarations)

    lib = _library.lib
    handle = comm.c_handle  # the communicator's peerplan_comm_t (an int)
    weight_ptr = _tensors.weight_pointer(weight)
    c_dtype = C_DTYPE[dtype]
    note = ("cuda backend: host time until each call returns (launch), not GPU completion"
            if backend == "cuda" else
            "host backend: every call returns when its exchange is done, so the host time "
            "includes the exchange")
    if rank == 0:
        print(f"# peerplan call overhead (Python {platform.python_version()}, {tensors.kind}): "
              f"{backend} backend ({device_name}), {size} ranks, {dtype}, {args.batches} batches of "
              f"{args.calls} calls (empty: {args.empty_calls}), {args.warmup} warm-up calls"
              f"{', GPUs SHARED by ranks' if gpus_shared else ''}\n# {note}", flush=True)
        print(f"{'case':<18} {'op':<10} {'shape':<10} {'bytes':>8} {'api':<7} {'route':<15} "
              f"{'ns/call':>12}", flush=True)

    rows_out = []
    for name, op, rows, hidden in CASES:
        shape = (rows, hidden)
        nbytes = rows * hidden * itemsize
        x = out = residual = None
        if op != "empty":
            x, out, residual = tensors.zeros(shape), tensors.zeros(shape), tensors.zeros(shape)
        # The ctypes rows' arguments, built once: a Layout of the contiguous shape.
        shape_array = (ctypes.c_int64 * 2)(rows, hidden)
        layout = _library.Layout(2, shape_array, None)
        result = _library.CallResult()
        result_ref = ctypes.byref(result)
        x_ptr = _tensors.describe(x).ptr if x is not None else None
        out_ptr = _tensors.describe(out).ptr if out is not None else None
        residual_ptr = _tensors.describe(residual).ptr if residual is not None else None
        route_seen = {}

        # One function per (case, api) making n calls, the loop written out
        # as an application's would be (no extra Python call per call).
        if op == "empty":
            def python_batch(n):
                c = comm
                for _ in range(n):
                    c.rank

            def ctypes_batch(n):
                f = lib.peerplan_comm_rank
                for _ in range(n):
                    f(handle)
        elif op == "allreduce":
            def python_batch(n):
                f = comm.all_reduce
                for _ in range(n):
                    r = f(x, out)
                route_seen["python"] = r[0]

            def ctypes_batch(n):
                f = lib.peerplan_all_reduce
                for _ in range(n):
                    status = f(handle, x_ptr, out_ptr, c_dtype, layout, stream_handle, result_ref)
                    if status:
                        fail("peerplan_all_reduce", status)
                route_seen["ctypes"] = ROUTES.get(result.route, "unknown")
        else:
            def python_batch(n):
                f = comm.fused_add_rms_norm
                for _ in range(n):
                    r = f(x, residual, weight, EPS)
                route_seen["python"] = r[0]

            def ctypes_batch(n):
                f = lib.peerplan_fused_add_rms_norm
                for _ in range(n):
                    status = f(handle, x_ptr, residual_ptr, weight_ptr, EPS, c_dtype, layout,
                               stream_handle, result_ref)
                    if status:
                        fail("peerplan_fused_add_rms_norm", status)
                route_seen["ctypes"] = ROUTES.get(result.route, "unknown")

        for api, batch in (("python", python_batch), ("ctypes", ctypes_batch)):
            n = args.empty_calls if op == "empty" else args.calls
            if stream is not None:
                with tensors.torch.cuda.stream(stream):
                    batch(1)  # the route, before timing
                    ns, rank_ns = time_batches(batch, n, args.batches, args.warmup, drain, ranks)
            else:
                batch(1)
                ns, rank_ns = time_batches(batch, n, args.batches, args.warmup, drain, ranks)
            route = route_seen.get(api, "-")
            if rank == 0:
                shape_text = "-" if op == "empty" else f"{rows}x{hidden}"
                print(f"{name:<18} {op:<10} {shape_text:<10} {nbytes:>8} {api:<7} {route:<15} "
                      f"{ns:>12.1f}", flush=True)
                rows_out.append({"case": name, "op": op, "api": api,
                                 "dtype": "-" if op == "empty" else dtype,
                                 "shape": [] if op == "empty" else [rows, hidden],
                                 "bytes": nbytes, "route": route, "calls_per_batch": n,
                                 "batches": args.batches, "ns_per_call": ns,
                                 "rank_ns_per_call": rank_ns})

    if rank == 0 and args.json:
        doc = {"tool": "python/benchmarks/call_overhead.py", "language": "python",
               "python_version": platform.python_version(), "tensors": tensors.kind,
               "peerplan_version": peerplan.__version__, "backend": backend,
               "device": device_name, "ranks": size, "dtype": dtype,
               "gpus_shared": gpus_shared, "mpi4py": mpi is not None,
               "calls_per_batch": args.calls, "empty_calls_per_batch": args.empty_calls,
               "batches": args.batches, "warmup": args.warmup, "note": note, "rows": rows_out}
        if tensors.kind == "torch":
            doc["torch_version"] = tensors.torch.__version__
        else:
            doc["numpy_version"] = tensors.numpy.__version__
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
    comm.close()


if __name__ == "__main__":
    main()
