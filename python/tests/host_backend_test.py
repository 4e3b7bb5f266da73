# SPDX-License-Identifier: Apache-2.0
"""The Python package on the host backend with NumPy and mpi4py, run under
mpirun at 2, 3 and 4 ranks (ctest python_host_test.npN): declare, probes,
strict lookups, declared and undeclared all-reduces (in place, out of
place, strided views) and the fused op against exact or float64
references, stats (with the undeclared keys of track_undeclared), errors,
close. Exits 77 (ctest: skipped, visibly) when
NumPy or mpi4py is missing."""

import sys

try:
    import numpy as np
    from mpi4py import MPI
except ImportError as e:  # pragma: no cover - environment without the packages
    print(f"python_host_test: SKIPPED: {e} (install python3-numpy and python3-mpi4py)")
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


def expect_raises(kind, call, what):
    try:
        call()
    except kind as e:
        check(len(str(e)) > 0, f"{what}: the error has a message")
        return e
    except Exception as e:  # noqa: BLE001 - any other type is the failure
        check(False, f"{what}: raised {type(e).__name__}: {e}")
        return None
    check(False, f"{what}: did not raise {kind.__name__}")
    return None


ranks_sum = size * (size + 1) / 2  # each rank contributes (rank + 1) * base

with peerplan.Communicator(comm_world, timeout_ms=20000, backend="host") as comm:
    check(comm.rank == rank and comm.size == size, "rank and size")
    check(comm.backend == "host", f"backend {comm.backend}")
    handle = comm.c_handle
    check(type(handle) is int and handle != 0, f"c_handle {handle!r}")
    check(peerplan._lib.peerplan_comm_rank(handle) == rank, "the C interface through c_handle")
    expect_raises(AttributeError, lambda: setattr(comm, "c_handle", 1), "c_handle is read-only")
    weight = (0.5 + np.arange(64, dtype=np.float32) / 64).astype(np.float32)
    comm.declare([
        peerplan.Declaration.all_reduce("ar32", "f32", (4, 64)),
        peerplan.Declaration.all_reduce("ar16", "f16", (2, 128)),
        peerplan.Declaration.fused_add_rms_norm("norm", "f32", (2, 64), weight, 1e-6),
    ])

    base32 = (np.arange(256, dtype=np.float32) % 13).reshape(4, 64)
    x = base32 * (rank + 1)
    check(comm.has_plan_for(x), "declared key found")
    check(not comm.has_plan_for(x.astype(np.float16)), "another dtype misses")
    route, reason, index = comm.plan_for(x)
    check(index == 0, f"plan index {index}")
    expect_raises(peerplan.UndeclaredPlan, lambda: comm.plan_for(np.zeros(7, np.float32)),
                  "strict lookup of an undeclared key")

    # Declared, in place.
    route, reason = comm.all_reduce(x)
    check(np.array_equal(x, base32 * ranks_sum), "declared f32 all-reduce in place")
    check((route != "fallback") == comm.p2p_enabled, f"declared route {route}")

    # Declared f16, out of place: the input stays.
    base16 = (np.arange(256) % 7).astype(np.float16).reshape(2, 128)
    a = base16 * np.float16(rank + 1)
    before = a.copy()
    out = np.full_like(a, np.nan)
    comm.all_reduce(a, out)
    check(np.array_equal(out, base16 * np.float16(ranks_sum)), "declared f16 out of place")
    check(np.array_equal(a, before), "the input was not modified")

    # Undeclared: an odd count, and a strided view whose padding must stay.
    odd = np.arange(11, dtype=np.float32) * (rank + 1)
    route, reason = comm.all_reduce(odd)
    check(route == "fallback" and reason == "undeclared", f"undeclared: {route} {reason}")
    check(np.array_equal(odd, np.arange(11, dtype=np.float32) * ranks_sum), "undeclared values")
    wide = np.full((3, 72), -5.0, dtype=np.float32)
    view = wide[:, :64]
    view[:] = (np.arange(192, dtype=np.float32) % 5).reshape(3, 64) * (rank + 1)
    comm.all_reduce(view)
    check(np.array_equal(view, (np.arange(192, dtype=np.float32) % 5).reshape(3, 64) * ranks_sum),
          "strided view reduced")
    check(np.all(wide[:, 64:] == -5.0), "the padding of the strided view was not touched")

    # Fused: residual = sum(x) + residual; x = rmsnorm(residual) * weight.
    xs = ((np.arange(128, dtype=np.float32) % 5) + 1).reshape(2, 64) * (rank + 1)
    residual = (np.arange(128, dtype=np.float32) % 3).reshape(2, 64)
    route, reason = comm.fused_add_rms_norm(xs, residual, weight, 1e-6)
    r = ((np.arange(128) % 5) + 1).reshape(2, 64) * ranks_sum + (np.arange(128) % 3).reshape(2, 64)
    check(np.array_equal(residual, r.astype(np.float32)), "fused residual (exact integer sums)")
    expected = r / np.sqrt((r * r).mean(axis=1, keepdims=True) + 1e-6) * weight.astype(np.float64)
    check(np.allclose(xs, expected, rtol=1e-5, atol=1e-6), "fused output vs float64")
    check((route != "fallback") == comm.p2p_enabled, f"fused route {route}")

    # Errors: types and values the package or the library refuses.
    expect_raises(TypeError, lambda: comm.all_reduce(np.zeros(8, np.float64)), "float64")
    frozen = np.zeros(8, np.float32)
    frozen.setflags(write=False)
    expect_raises(ValueError, lambda: comm.all_reduce(frozen), "a read-only array")
    expect_raises(TypeError, lambda: comm.all_reduce([1.0, 2.0]), "a list")

    stats = comm.stats()
    check(stats["fallback_undeclared"] == 2, f"undeclared count {stats['fallback_undeclared']}")
    check([p["name"] for p in stats["plans"]] == ["ar32", "ar16", "norm"], "plan names")
    check(all(p["hits"] + p["fallbacks"] == 1 for p in stats["plans"]), "one call per plan")
    check(stats["undeclared"] == [], f"no undeclared keys without track_undeclared: "
                                     f"{stats['undeclared']}")
    # The host backend stages every P2P route; the launch text names the dtype.
    for p in stats["plans"]:
        if p["route"] == "fallback":
            check(p["protocol"] == "none" and p["launch"] == "", f"fallback plan {p}")
        else:
            check(p["protocol"] == "staged", f"protocol of {p['name']}: {p['protocol']}")
            check(p["launch"].startswith(("f32 ", "f16 ", "bf16 ")), f"launch of {p['name']}: {p['launch']}")

expect_raises(peerplan.Error, lambda: comm.all_reduce(np.zeros(8, np.float32)), "after close")

# track_undeclared: three undeclared calls of one shape are one key with 3
# calls, in the C++ text of the key; reset_stats empties the table.
with peerplan.Communicator(comm_world, timeout_ms=20000, backend="host",
                           track_undeclared=16) as tracking:
    check(tracking.stats()["undeclared"] == [], "no keys before any call")
    for _ in range(3):
        y = np.ones(300, np.float32)
        route, reason = tracking.all_reduce(y)
        check(reason == "undeclared" and y[299] == size, f"undeclared call: {route} {reason}")
    undeclared = tracking.stats()["undeclared"]
    check(undeclared == [{"key": "all_reduce f32 [300] strides [1]", "calls": 3, "overcount": 0}],
          f"the undeclared keys: {undeclared}")
    # A second, less called shape comes after it (most calls first).
    tracking.all_reduce(np.ones((3, 5), np.float32))
    keys = [k["key"] for k in tracking.stats()["undeclared"]]
    check(len(keys) == 2 and "[300]" in keys[0] and "[3, 5]" in keys[1], f"order: {keys}")
    # The C function refuses an index past the table (ValueError from the package).
    c_key = peerplan._lib.peerplan_undeclared_key
    check(c_key(tracking.c_handle, 2, None, 0, None, None, None) == 1,
          "index past the table: PEERPLAN_ERROR_INVALID_ARGUMENT")
    tracking.reset_stats()
    check(tracking.stats()["undeclared"] == [], "reset_stats empties the table")
# check_calls=True (PEERPLAN_CHECK_CALLS): calls that differ between ranks
# raise Error "mismatch" on every rank, naming each rank's call; the same
# calls run as usual afterwards.
if size > 1:
    with peerplan.Communicator(comm_world, timeout_ms=20000, backend="host",
                               check_calls=True) as checking:
        mine = np.ones(16 if rank == 0 else 24, np.float32)
        try:
            checking.all_reduce(mine)
            check(False, "different calls must raise")
        except peerplan.Error as e:
            check(e.code == "mismatch" and "rank 0: all_reduce f32 [16]" in str(e),
                  f"check_calls: {e.code}: {e}")
        check(np.all(mine == 1.0), "nothing ran before the comparison")
        same = np.ones(16, np.float32)
        checking.all_reduce(same)
        check(np.all(same == size), "the same calls run after a mismatch")
try:
    peerplan.Communicator(comm_world, timeout_ms="soon")
    check(False, "an invalid setting must fail")
except ValueError as e:
    check("PEERPLAN_TIMEOUT_MS" in str(e), f"the message names the setting: {e}")

total = comm_world.allreduce(failures)
if rank == 0:
    print(f"python_host_test: {checks} checks per rank, {total} failed over {size} ranks",
          flush=True)
sys.exit(0 if total == 0 else 1)
