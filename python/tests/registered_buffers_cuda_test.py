# SPDX-License-Identifier: Apache-2.0
"""Communicator.register_buffers from Python on the cuda backend, pull mode:
an all-reduce whose input lies in a registered PyTorch tensor is read in
place by the peers (a zero-copy call, counted in stats()), its sum is right,
and after deregister_buffers() the same call is staged again. First,
comm.cuda_device must be the GPU the library's rule gives: the local rank
(among the ranks of this rank's node) modulo the GPUs, as on several nodes.
Rank 0 prints one line; every rank exits 1 on a failed check on any rank.

    mpirun -np 2 python3 python/tests/registered_buffers_cuda_test.py

Exits 77 without PyTorch or CUDA, or where P2P is off (nothing to read in
place). With --device-rule, checks only that rule's helper on made-up
placements over several nodes: one process, no MPI, PyTorch or GPU."""

import os
import socket
import sys


def skip(reason):
    print(f"python_registered_buffers_cuda_test: SKIPPED: {reason}", flush=True)
    sys.exit(77)


def node_key():
    """This process's node as the library names it (bootstrap::detail::
    node_key): PEERPLAN_HOST_ID when set and not empty (one machine posing
    as several nodes), else the host name and the kernel's boot id."""
    host_id = os.environ.get("PEERPLAN_HOST_ID", "")
    if host_id:
        return "host id " + host_id
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot_id = f.readline().rstrip("\n ")
    except OSError:
        boot_id = ""
    return f"{socket.gethostname()}/{boot_id}"


def configured_device():
    """PEERPLAN_DEVICE as the library reads it: empty or unset is -1."""
    return int(os.environ.get("PEERPLAN_DEVICE") or -1)


def expected_device(rank, node_keys, gpus, configured=-1):
    """The GPU the library gives `rank` (transport::cuda::select_device):
    `configured` when >= 0, else its local rank (its place among the ranks
    whose node key is its own, by rank) modulo the `gpus` it sees. Not the
    global rank: that is the local one on one node only."""
    if configured >= 0:
        return configured
    local_rank = node_keys[:rank].count(node_keys[rank])
    return local_rank % gpus if gpus > 0 else 0


def check_device_rule():
    """expected_device on placements over several nodes, and node_key."""
    failures = []
    cases = (  # node keys by rank, GPUs per node, configured device, devices by rank
        (["a"] * 4, 2, -1, [0, 1, 0, 1]),  # one node: the global rank would do too
        (["a", "a", "b", "b"], 4, -1, [0, 1, 0, 1]),  # 2 nodes x 2 ranks, by block
        (["a", "b", "a", "b"], 2, -1, [0, 0, 1, 1]),  # 2 nodes x 2 ranks, round robin
        (["a", "b", "b", "c", "b"], 8, -1, [0, 0, 1, 0, 2]),  # uneven nodes
        (["a", "a", "b", "b"], 4, 1, [1, 1, 1, 1]),  # PEERPLAN_DEVICE=1
    )
    for keys, gpus, configured, want in cases:
        got = [expected_device(r, keys, gpus, configured) for r in range(len(keys))]
        if got != want:
            failures.append(f"nodes {keys}, {gpus} GPUs, device {configured}: {got}, want {want}")
    saved = {name: os.environ.get(name) for name in ("PEERPLAN_HOST_ID", "PEERPLAN_DEVICE")}
    try:
        os.environ.update(PEERPLAN_HOST_ID="node1", PEERPLAN_DEVICE="")
        if node_key() != "host id node1" or configured_device() != -1:
            failures.append(f"with PEERPLAN_HOST_ID=node1: {node_key()!r}, {configured_device()}")
        os.environ.update(PEERPLAN_HOST_ID="", PEERPLAN_DEVICE="3")
        if not node_key().startswith(socket.gethostname() + "/") or configured_device() != 3:
            failures.append(f"with PEERPLAN_HOST_ID empty: {node_key()!r}, {configured_device()}")
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    for failure in failures:
        print(f"check failed: {failure}", file=sys.stderr, flush=True)
    print(f"python_registered_buffers_device_rule_test: {len(cases) + 2} checks, "
          f"{len(failures)} failed", flush=True)
    return 1 if failures else 0


if sys.argv[1:] == ["--device-rule"]:
    sys.exit(check_device_rule())

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
    # The node-local rank modulo the GPUs, not the global rank's: they differ
    # past one node. Judged on every rank together (no rank left in a call).
    want_device = expected_device(comm.rank, MPI.COMM_WORLD.allgather(node_key()),
                                  torch.cuda.device_count(), configured_device())
    if comm.cuda_device != want_device:
        print(f"FAIL: comm.cuda_device {comm.cuda_device} on rank {comm.rank}, want "
              f"{want_device}: PEERPLAN_DEVICE, else the local rank modulo "
              f"{torch.cuda.device_count()} GPUs", flush=True)
    if MPI.COMM_WORLD.allreduce(int(comm.cuda_device != want_device)):
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
