# SPDX-License-Identifier: Apache-2.0
"""What the Python wrapper itself costs per call, in one process (1 rank,
host backend, NumPy): each call of the package next to the same C function
called through ctypes with its arguments built once, timed with timeit; the
difference is the wrapper's own cost (describing the tensors, the stream,
the result). Complements call_overhead.py, whose times at several ranks
include the exchange and its noise.

    PEERPLAN_LIBRARY=build/src/libpeerplan.so PYTHONPATH=python \\
        python3 python/benchmarks/wrapper_overhead.py [--number N] [--repeat R]

--noop LIB: the package's all-reduce and fused op call the no-op functions
of LIB (python/benchmarks/noop_capi.c, which says how to build it) instead
of the library's, and so do the ctypes rows: what is left is the wrapper
and ctypes alone, without the collective and its noise.

Prints ns per call: the best of R repeats of N calls (the least disturbed:
on a loaded machine the one to compare), and the median of the R repeats. The clock is this thread's CPU time
(time.thread_time_ns) unless --wall: on a loaded machine the wall clock
also counts the time other processes hold the core (at 1 rank on the host
backend a call never waits for anything, so its CPU time is its time).
"""

import argparse
import ctypes
import statistics
import sys
import time
import timeit

try:
    import numpy as np
except ImportError as e:  # pragma: no cover
    print(f"wrapper_overhead: SKIPPED: {e}")
    sys.exit(77)

import peerplan
from peerplan import _library, _tensors

HIDDEN = 4096
EPS = 1e-6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=2000, help="calls per repeat")
    parser.add_argument("--repeat", type=int, default=15, help="repeats")
    parser.add_argument("--noop", metavar="LIB", help="no-op C functions (noop_capi.c) in place "
                        "of the collectives")
    parser.add_argument("--wall", action="store_true", help="time.perf_counter instead of "
                        "this thread's CPU time")
    args = parser.parse_args()

    comm = peerplan.Communicator(backend="host")
    handle = getattr(comm, "c_handle", None) or comm._handle  # _handle: before c_handle
    weight = np.ones(HIDDEN, np.float16)
    shapes = {"allreduce_1x512": (1, 512), "allreduce_8x4096": (8, HIDDEN),
              "fused_1x4096": (1, HIDDEN)}
    comm.declare([peerplan.Declaration.all_reduce("allreduce_1x512", "f16", (1, 512)),
                  peerplan.Declaration.all_reduce("allreduce_8x4096", "f16", (8, HIDDEN)),
                  peerplan.Declaration.fused_add_rms_norm("fused_1x4096", "f16", (1, HIDDEN),
                                                          weight, EPS)])
    lib = _library.lib
    c_all_reduce, c_fused = lib.peerplan_all_reduce, lib.peerplan_fused_add_rms_norm
    if args.noop:
        noop = ctypes.CDLL(args.noop)
        c_all_reduce, c_fused = noop.noop_all_reduce, noop.noop_fused_add_rms_norm
        for stub, real in ((c_all_reduce, lib.peerplan_all_reduce),
                           (c_fused, lib.peerplan_fused_add_rms_norm)):
            stub.restype, stub.argtypes = real.restype, real.argtypes
        module = sys.modules["peerplan.communicator"]
        if hasattr(module, "_c_all_reduce"):  # the functions the package calls
            module._c_all_reduce, module._c_fused = c_all_reduce, c_fused
        else:  # a package that calls lib.peerplan_* (before these were bound once)
            class Lib:
                def __getattr__(self, name):
                    return getattr(lib, name)

            module.lib = Lib()
            module.lib.peerplan_all_reduce = c_all_reduce
            module.lib.peerplan_fused_add_rms_norm = c_fused
    result = _library.CallResult()
    result_ref = ctypes.byref(result)
    weight_ptr = _tensors.describe(weight).ptr
    rows = []
    for name, shape in shapes.items():
        x, out, residual = np.zeros(shape, np.float16), np.zeros(shape, np.float16), np.zeros(shape, np.float16)
        layout = _library.Layout(2, (ctypes.c_int64 * 2)(*shape), None)
        xp, op, rp = (_tensors.describe(t).ptr for t in (x, out, residual))
        env = dict(comm=comm, x=x, out=out, residual=residual, weight=weight, EPS=EPS, lib=lib,
                   handle=handle, xp=xp, op=op, rp=rp, wp=weight_ptr, layout=layout,
                   ref=result_ref, describe=_tensors.describe)
        if name.startswith("allreduce"):
            cases = [("python", "comm.all_reduce(x, out)"),
                     ("python in place", "comm.all_reduce(x)"),
                     ("ctypes", "f(handle, xp, op, 0, layout, None, ref)"),
                     ("describe", "describe(x)")]
            env["f"] = c_all_reduce
        else:
            cases = [("python", "comm.fused_add_rms_norm(x, residual, weight, EPS)"),
                     ("ctypes", "f(handle, xp, rp, wp, EPS, 0, layout, None, ref)")]
            env["f"] = c_fused
        for api, stmt in cases:
            times = [t / args.number * 1e9 for t in
                     timeit.repeat(stmt, globals=env, number=args.number, repeat=args.repeat,
                                   timer=time.perf_counter if args.wall else time.thread_time)]
            rows.append((name, api, min(times), statistics.median(times)))
    comm.close()
    print(f"# peerplan wrapper overhead: 1 rank, host backend, f16 NumPy, "
          f"{'no-op C functions, ' if args.noop else ''}"
          f"{args.repeat} x {args.number} calls, {'wall' if args.wall else 'thread CPU'} time "
          f"(Python {sys.version.split()[0]})")
    print(f"{'case':<18} {'api':<16} {'best ns':>10} {'median ns':>10}")
    for name, api, best, median in rows:
        print(f"{name:<18} {api:<16} {best:>10.0f} {median:>10.0f}")
    best = {(n, a): b for n, a, b, _ in rows}
    median = {(n, a): m for n, a, _, m in rows}
    for name in shapes:
        print(f"wrapper (python - ctypes) {name}: {best[(name, 'python')] - best[(name, 'ctypes')]:.0f} "
              f"ns of the best, {median[(name, 'python')] - median[(name, 'ctypes')]:.0f} ns of "
              "the medians")


if __name__ == "__main__":
    main()
