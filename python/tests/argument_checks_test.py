# SPDX-License-Identifier: Apache-2.0
"""Every tensor argument of the Python calls is checked like the input:
an `out` of another dtype or shape, a `residual` unlike `x`, and a weight
of the wrong dtype or length raise ValueError on the calling rank before
anything is written or read (the C call takes one dtype and layout for all
of them, so a mismatch would write past `out`'s end or read past the
weight's). Also: a declaration named None, registered buffers, and stats
read from two threads at once. Under mpirun at 2 ranks, host backend; exits 77 (skipped) without
NumPy or mpi4py."""

import sys
import threading

try:
    import numpy as np
    from mpi4py import MPI
except ImportError as e:  # pragma: no cover - environment without the packages
    print(f"python_argument_checks_test: SKIPPED: {e} (install python3-numpy and python3-mpi4py)")
    sys.exit(77)

import peerplan

comm_world = MPI.COMM_WORLD
rank, size = comm_world.Get_rank(), comm_world.Get_size()
checks = 0
failures = 0


def check(condition, what):
    global checks, failures
    checks += 1
    if not condition:
        failures += 1
        print(f"rank {rank}: check failed: {what}", file=sys.stderr, flush=True)


def expect_value_error(call, what, words):
    try:
        call()
    except ValueError as e:
        check(all(w in str(e) for w in words), f"{what}: message {e!s} names {words}")
        return
    except Exception as e:  # noqa: BLE001 - any other type is the failure
        check(False, f"{what}: raised {type(e).__name__}: {e}")
        return
    check(False, f"{what}: did not raise ValueError")


with peerplan.Communicator(comm_world, timeout_ms=20000, backend="host") as comm:
    hidden = 256
    weight = np.ones(hidden, np.float32)
    comm.declare([
        peerplan.Declaration.all_reduce("ar", "f32", (4, hidden)),
        peerplan.Declaration.fused_add_rms_norm("norm", "f32", (4, hidden), weight, 1e-6),
    ])
    x = np.ones((4, hidden), np.float32)

    # out: another dtype, fewer rows, other strides. Nothing may be written.
    wrong_dtype = np.full((4, hidden), 7, np.float16)
    expect_value_error(lambda: comm.all_reduce(x, out=wrong_dtype), "out of another dtype",
                       ["out", "f16", "f32"])
    check(bool((wrong_dtype == 7).all()), "the f16 out was not written")
    guard = np.full((4, hidden), 7, np.float32)
    short = guard[:2]  # a (2, hidden) view: the rows past it must stay untouched
    expect_value_error(lambda: comm.all_reduce(x, out=short), "out of fewer rows",
                       ["out", "(2, 256)", "(4, 256)"])
    check(bool((guard == 7).all()), "nothing written past the short out")
    padded_rows = np.ones((4, 2 * hidden), np.float32)[:, :hidden]
    expect_value_error(lambda: comm.all_reduce(x, out=padded_rows), "out of other strides",
                       ["out", "strides (512, 1)"])

    # A right out still works, and gives the sum.
    good = np.zeros((4, hidden), np.float32)
    route, _ = comm.all_reduce(x, out=good)
    check(bool((good == size).all()), f"out of the same layout holds the sum ({route})")

    # residual unlike x; weights of the wrong dtype, length or layout.
    residual = np.ones((4, hidden), np.float32)
    expect_value_error(lambda: comm.fused_add_rms_norm(x, np.ones((4, hidden), np.float16),
                                                       weight, 1e-6),
                       "residual of another dtype", ["residual", "f16"])
    expect_value_error(lambda: comm.fused_add_rms_norm(x, residual[:3], weight, 1e-6),
                       "residual of fewer rows", ["residual", "(3, 256)"])
    expect_value_error(lambda: comm.fused_add_rms_norm(x, residual, np.ones(hidden, np.float16),
                                                       1e-6),
                       "an f16 weight on an f32 call", ["weight", "f16", "256"])
    expect_value_error(lambda: comm.fused_add_rms_norm(x, residual, np.ones(hidden // 2,
                                                                            np.float32), 1e-6),
                       "a weight of half the length", ["weight", "(128,)"])
    expect_value_error(lambda: comm.fused_add_rms_norm(x, residual,
                                                       np.ones(2 * hidden, np.float32)[::2], 1e-6),
                       "a strided weight", ["weight", "contiguous"])
    check(bool((residual == 1).all()), "the residual was not written by the refused calls")
    route, _ = comm.fused_add_rms_norm(x, residual, weight, 1e-6)
    check(bool((residual == size + 1).all()), f"the right fused call still runs ({route})")

    # A declaration named None: a peerplan error, not AttributeError.
    try:
        peerplan.Declaration.all_reduce(None, "f32", (4, hidden))
        check(False, "a declaration named None was accepted")
    except ValueError as e:
        check("name" in str(e), f"a declaration named None: {e}")

    # Registered buffers: a tensor's whole extent, strided views included; a
    # null or empty buffer is refused on every rank; (address, bytes) pairs.
    from peerplan.communicator import _buffer_region
    block = np.zeros((4, 8), np.float32)
    check(_buffer_region(block, 0) == (block.ctypes.data, 128), "a (4, 8) f32 buffer is 128 bytes")
    view = block[:, :4]  # from element 0 to element 3 * 8 + 3
    check(_buffer_region(view, 0) == (block.ctypes.data, 28 * 4),
          f"a (4, 4) view of (4, 8) spans 28 elements: {_buffer_region(view, 0)}")
    comm.register_buffers([block, (block.ctypes.data, 64)])
    comm.deregister_buffers()
    expect_value_error(lambda: comm.register_buffers([(0, 64)]), "a null buffer",
                       ["register_buffers", "null pointer"])
    expect_value_error(lambda: comm.register_buffers([np.zeros(0, np.float32)]), "an empty buffer",
                       ["register_buffers", "0 bytes"])
    try:
        comm.register_buffers([(block.ctypes.data,)])
        check(False, "a one-element tuple was accepted as a buffer")
    except TypeError as e:
        check("(address, bytes)" in str(e), f"a one-element tuple: {e}")

    # Stats from two threads at once, while this one reads them too.
    errors = []

    def read_stats():
        try:
            for _ in range(500):
                names = [p["name"] for p in comm.stats()["plans"]]
                if names != ["ar", "norm"]:
                    errors.append(f"plan names {names}")
                    return
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"{type(e).__name__}: {e}")

    readers = [threading.Thread(target=read_stats) for _ in range(2)]
    for t in readers:
        t.start()
    for t in readers:
        t.join()
    check(not errors, f"stats from two threads: {errors[:1]}")

total = comm_world.allreduce(failures)
if rank == 0:
    print(f"python_argument_checks_test: {checks} checks per rank, {total} failed over {size} ranks",
          flush=True)
sys.exit(1 if total else 0)
