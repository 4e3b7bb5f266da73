# SPDX-License-Identifier: Apache-2.0
"""Communicator.register_buffers from Python on the cuda backend, pull mode:
an all-reduce whose input lies in a registered PyTorch tensor is read in
place by the peers (a zero-copy call, counted in stats()), its sum is right,
and after deregister_buffers() the same call is staged again. Rank 0 prints
one line; every rank exits 1 on a failed check on any rank.

    mpirun -np 2 python3 python/tests/registered_buffers_cuda_test.py

Exits 77 without PyTorch or CUDA, or where P2P is off (nothing to read in
place)."""

import sys


def skip(reason):
    print(f"python_registered_buffers_cuda_test: SKIPPED: {reason}", flush=True)
    sys.exit(77)


try:
    import torch
    from mpi4py import MPI
except ImportError as e:
    skip(f"no PyTorch or mpi4py ({e})")
if not torch.cuda.is_available():
    skip(f"torch {torch.__version__} sees no CUDA device")

import peerplan  # noqa: E402

with peerplan.Communicator(MPI.COMM_WORLD, timeout_ms=60000, backend="cuda",
                           transfer_mode="pull") as comm:
    torch.cuda.set_device(comm.cuda_device)  # the GPU the library picked
    if comm.cuda_device != comm.rank % torch.cuda.device_count():
        print(f"FAIL: comm.cuda_device {comm.cuda_device} on rank {comm.rank}, not the local "
              f"rank modulo {torch.cuda.device_count()} GPUs")
        sys.exit(1)
    # A tensor on the CPU is refused before anything runs.
    try:
        comm.all_reduce(torch.ones(4, 1024, dtype=torch.bfloat16))
        print("FAIL: a CPU tensor on the cuda backend was taken")
        sys.exit(1)
    except ValueError as e:
        if "host memory" not in str(e):
            print(f"FAIL: a CPU tensor's error does not say host memory: {e}")
            sys.exit(1)
    if not comm.p2p_enabled:
        skip(f"P2P is off: {comm.p2p_disabled_reason}")
    rows, hidden = 4, 1024
    # The input is a view inside a larger registered tensor.
    arena = torch.zeros(2 * rows * hidden, dtype=torch.bfloat16, device="cuda")
    x = arena[rows * hidden:].view(rows, hidden)
    out = torch.empty(rows, hidden, dtype=torch.bfloat16, device="cuda")
    comm.declare([peerplan.Declaration.all_reduce("ar", "bf16", (rows, hidden))])
    comm.register_buffers([arena])
    failures = []

    def call(expect_zero_copy):
        x.fill_(comm.rank + 1)
        before = comm.stats()["zero_copy_calls"]
        route, reason = comm.all_reduce(x, out=out)
        torch.cuda.synchronize()
        zero_copy = comm.stats()["zero_copy_calls"] - before
        want = comm.size * (comm.size + 1) / 2
        if not bool((out.float() == want).all()):
            failures.append(f"sum {out.float().flatten()[:4].tolist()}, want {want} ({route})")
        if zero_copy != int(expect_zero_copy):
            failures.append(f"zero-copy calls {zero_copy}, want {int(expect_zero_copy)} "
                            f"({route}, {reason})")

    call(expect_zero_copy=True)
    comm.deregister_buffers()
    call(expect_zero_copy=False)
    for failure in failures:
        print(f"rank {comm.rank}: check failed: {failure}", file=sys.stderr, flush=True)
    total = MPI.COMM_WORLD.allreduce(len(failures))
    if comm.rank == 0:
        print(f"python_registered_buffers_cuda_test: {comm.size} ranks, {total} failed", flush=True)
sys.exit(1 if total else 0)
