# SPDX-License-Identifier: Apache-2.0
"""A tensor-parallel MLP with PyTorch and peerplan, checked against one GPU.

Two layers, each: a column-parallel linear (W1 split by columns), GELU, a
row-parallel linear (W2 split by rows) whose partial sums peerplan adds up
across ranks in the fused all-reduce + residual add + RMSNorm. Run with one
rank per GPU (ranks beyond the GPU count share them: correctness only):

    mpirun -np 2 python3 python/examples/tp_mlp.py

It runs the declared decode shape eagerly, as a CUDA graph (replayed with
new inputs) and, with PyTorch >= 2.4, compiled by torch.compile(fullgraph=True)
through peerplan.torch's custom ops, and an undeclared prefill shape (the
fallback), and compares
every output with the same model computed whole on this rank's GPU; where
each rank has its own GPU, also with torch.distributed's NCCL all-reduce.
Prints "#wrong 0" on rank 0 when every comparison held.
"""

import os
import sys

import torch

import peerplan

HIDDEN, FFN, LAYERS, EPS = 1024, 4096, 2, 1e-6
DECODE_TOKENS, PREFILL_TOKENS = 4, 24
DTYPE = torch.bfloat16


def rms_norm(x, weight):
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()).to(x.dtype)


def main():
    comm = peerplan.Communicator(timeout_ms=60000)
    rank, size = comm.rank, comm.size
    if comm.cuda_device < 0:
        sys.exit(f"tp_mlp.py needs the cuda backend; this communicator's is {comm.backend}")
    # The GPU the communicator drives (device= / PEERPLAN_DEVICE, else the local
    # rank modulo the GPUs it sees): the calls' tensors must be on it.
    device = torch.device("cuda", comm.cuda_device)
    torch.cuda.set_device(device)
    gpus = torch.cuda.device_count()
    if rank == 0:
        print(f"peerplan {peerplan.__version__}: {size} ranks on {gpus} GPU(s), backend "
              f"{comm.backend}, P2P {'on' if comm.p2p_enabled else 'off: ' + comm.p2p_disabled_reason}")

    # The same full weights on every rank (same seed); each takes its shards.
    generator = torch.Generator(device="cpu").manual_seed(1234)
    full_w1 = [torch.randn(HIDDEN, FFN, generator=generator) / HIDDEN**0.5 for _ in range(LAYERS)]
    full_w2 = [torch.randn(FFN, HIDDEN, generator=generator) / FFN**0.5 for _ in range(LAYERS)]
    norm_w = [(1 + 0.1 * torch.randn(HIDDEN, generator=generator)).to(DTYPE).to(device)
              for _ in range(LAYERS)]
    shard = FFN // size
    w1 = [w[:, rank * shard:(rank + 1) * shard].to(DTYPE).to(device) for w in full_w1]
    w2 = [w[rank * shard:(rank + 1) * shard, :].to(DTYPE).to(device) for w in full_w2]

    comm.declare([peerplan.Declaration.fused_add_rms_norm(f"mlp{l}.t{DECODE_TOKENS}", "bf16",
                                                          (DECODE_TOKENS, HIDDEN), norm_w[l], EPS)
                  for l in range(LAYERS)])

    def forward_tp(x, residual, stream=None):
        """x: normed hidden states; residual: the residual stream (updated)."""
        for l in range(LAYERS):
            partial = torch.nn.functional.gelu(x @ w1[l]) @ w2[l]
            comm.fused_add_rms_norm(partial, residual, norm_w[l], EPS, stream=stream)
            x = partial
        return x

    def forward_whole(x, residual):
        for l in range(LAYERS):
            full = torch.nn.functional.gelu(x.float() @ full_w1[l].to(device)) @ full_w2[l].to(device)
            residual = (residual.float() + full).to(DTYPE)
            x = rms_norm(residual, norm_w[l])
        return x, residual

    def inputs(tokens, seed):
        g = torch.Generator(device="cpu").manual_seed(seed)
        x = torch.randn(tokens, HIDDEN, generator=g).to(DTYPE).to(device)
        return x, torch.randn(tokens, HIDDEN, generator=g).to(DTYPE).to(device)

    wrong = 0

    def compare(name, got, want):
        nonlocal wrong
        error = ((got.float() - want.float()).abs().max() / want.float().abs().max()).item()
        ok = error < 3e-2  # bf16 through two layers, partial sums in another order
        wrong += 0 if ok else 1
        if rank == 0:
            print(f"{name:<40} max relative error {error:.2e} {'ok' if ok else 'WRONG'}")

    # Eager, declared decode shape.
    x, residual = inputs(DECODE_TOKENS, 1)
    want_x, want_r = forward_whole(x, residual)
    r = residual.clone()
    got = forward_tp(x.clone(), r)
    compare("decode eager (declared)", got, want_x)
    compare("decode eager residual", r, want_r)

    # Undeclared prefill: the fallback.
    x, residual = inputs(PREFILL_TOKENS, 2)
    want_x, _ = forward_whole(x, residual)
    compare("prefill eager (undeclared: fallback)", forward_tp(x.clone(), residual.clone()), want_x)

    # CUDA graph of the decode step, replayed with new inputs.
    static_x, static_r = inputs(DECODE_TOKENS, 3)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        forward_tp(static_x.clone(), static_r.clone())  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = forward_tp(static_x, static_r)
    for replay in range(3):
        x, residual = inputs(DECODE_TOKENS, 10 + replay)
        static_x.copy_(x)
        static_r.copy_(residual)
        graph.replay()
        want_x, want_r = forward_whole(x, residual)
        compare(f"decode graph replay {replay}", static_out, want_x)
        compare(f"decode graph replay {replay} residual", static_r, want_r)

    # torch.compile of the decode step: the fused op as a custom op (no graph break).
    try:
        import peerplan.torch as pt
    except ImportError as e:
        pt = None
        if rank == 0:
            print(f"torch.compile comparison skipped: {e}")
    if pt is not None:
        op = pt.handle(comm)  # the int the custom ops take for the communicator

        def forward_ops(x, residual):
            for l in range(LAYERS):
                partial = torch.nn.functional.gelu(x @ w1[l]) @ w2[l]
                pt.fused_add_rms_norm(op, partial, residual, norm_w[l], EPS)
                x = partial
            return x

        compiled = torch.compile(forward_ops, fullgraph=True)
        for call in range(2):
            x, residual = inputs(DECODE_TOKENS, 20 + call)
            want_x, want_r = forward_whole(x, residual)
            r = residual.clone()
            try:
                got = compiled(x.clone(), r)
            except Exception as e:  # noqa: BLE001 - counted as wrong; the other comparisons go on
                wrong += 1
                print(f"rank {rank}: decode torch.compile(fullgraph) failed: {e!r}", file=sys.stderr)
                break
            compare(f"decode torch.compile(fullgraph) {call}", got, want_x)
            compare(f"decode torch.compile(fullgraph) {call} residual", r, want_r)

    # torch.distributed NCCL, where every rank has its own GPU (NCCL refuses shared ones).
    if gpus >= size:
        import torch.distributed as dist

        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        dist.init_process_group("nccl", rank=rank, world_size=size, device_id=device)
        x, residual = inputs(DECODE_TOKENS, 4)
        r_nccl = residual.clone()
        h = x.clone()
        for l in range(LAYERS):
            partial = torch.nn.functional.gelu(h @ w1[l]) @ w2[l]
            dist.all_reduce(partial)
            r_nccl = (r_nccl.float() + partial.float()).to(DTYPE)
            h = rms_norm(r_nccl, norm_w[l])
        r_ours = residual.clone()
        compare("decode vs torch.distributed NCCL", forward_tp(x.clone(), r_ours), h)
        dist.destroy_process_group()
    elif rank == 0:
        print("torch.distributed NCCL comparison skipped: ranks share GPUs")

    stats = comm.stats()
    comm.close()
    total = torch.tensor([wrong], dtype=torch.int64)
    if rank == 0:
        print("plans:", ", ".join(f"{p['name']} {p['route']} hits {p['hits']}" for p in stats["plans"]))
        print(f"#wrong {wrong} (rank 0; every rank checks its own)")
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main()
