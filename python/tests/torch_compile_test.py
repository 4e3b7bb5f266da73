# SPDX-License-Identifier: Apache-2.0
"""torch.compile(fullgraph=True) through peerplan.torch's custom ops: a
tensor-parallel MLP (python/examples/tp_mlp.py's: column-parallel linear,
GELU, row-parallel linear, fused all-reduce + residual add + RMSNorm per
layer; then an out-of-place all-reduce) run eagerly and compiled, on the
same inputs, twice (the second call replays the compiled code). The
compiled outputs and residuals must match eager's, dynamo must count no
graph break, and the declared plans must have served the compiled calls
(their hit counters). Rank 0 prints one line; every rank exits 1 on a
wrong result on any rank.

    mpirun -np 2 python3 python/tests/torch_compile_test.py [--cpu]

One rank per GPU (ranks beyond the GPU count share them; each rank's
tensors on comm.cuda_device, the GPU its communicator drives). --cpu: CPU
tensors on the host backend (checks the tracing where there is no GPU).
Exits 77 without PyTorch >= 2.4, or without CUDA unless --cpu."""

import sys


def skip(reason):
    print(f"python_torch_compile_test: SKIPPED: {reason}", flush=True)
    sys.exit(77)


try:
    import torch
except ImportError as e:
    skip(f"no PyTorch ({e})")
try:
    import peerplan.torch as pt
except ImportError as e:
    skip(str(e))
CPU = "--cpu" in sys.argv[1:]
if not CPU and not torch.cuda.is_available():
    skip(f"torch {torch.__version__} sees no CUDA device (--cpu runs on the host backend)")

import peerplan  # noqa: E402

HIDDEN, FFN, LAYERS, TOKENS, EPS = 512, 2048, 2, 4, 1e-6
DTYPE = torch.bfloat16
TOLERANCE = 2e-2  # bf16; compiled code may round GELU's intermediates differently


def main():
    comm = peerplan.Communicator(timeout_ms=60000, **({"backend": "host"} if CPU else {}))
    rank, size = comm.rank, comm.size
    if CPU:
        device = torch.device("cpu")
    else:
        device = torch.device("cuda", comm.cuda_device)  # the GPU the communicator drives
        torch.cuda.set_device(device)

    generator = torch.Generator(device="cpu").manual_seed(1234)
    shard = FFN // size
    w1 = [(torch.randn(HIDDEN, FFN, generator=generator) / HIDDEN**0.5)[:, rank * shard:(rank + 1) * shard]
          .to(DTYPE).to(device) for _ in range(LAYERS)]
    w2 = [(torch.randn(FFN, HIDDEN, generator=generator) / FFN**0.5)[rank * shard:(rank + 1) * shard, :]
          .contiguous().to(DTYPE).to(device) for _ in range(LAYERS)]
    norm_w = [(1 + 0.1 * torch.randn(HIDDEN, generator=generator)).to(DTYPE).to(device)
              for _ in range(LAYERS)]
    comm.declare([peerplan.Declaration.fused_add_rms_norm(f"mlp{l}", "bf16", (TOKENS, HIDDEN),
                                                          norm_w[l], EPS) for l in range(LAYERS)]
                 + [peerplan.Declaration.all_reduce("out", "bf16", (TOKENS, HIDDEN))])
    op = pt.handle(comm)  # an int: what the custom ops take

    def forward(x, residual):
        for l in range(LAYERS):
            partial = torch.nn.functional.gelu(x @ w1[l]) @ w2[l]
            pt.fused_add_rms_norm(op, partial, residual, norm_w[l], EPS)
            x = partial
        return pt.all_reduce(op, x)

    def inputs(seed):
        g = torch.Generator(device="cpu").manual_seed(seed)
        return (torch.randn(TOKENS, HIDDEN, generator=g).to(DTYPE).to(device),
                torch.randn(TOKENS, HIDDEN, generator=g).to(DTYPE).to(device))

    def hits():  # calls that found a declared plan (P2P, or the fallback where P2P is off)
        return sum(p["hits"] + p["fallbacks"] for p in comm.stats()["plans"])

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(forward, fullgraph=True)
    wrong, comparisons, errors = 0, 0, []
    for call in range(2):
        x, residual = inputs(10 + call)
        eager_residual = residual.clone()
        eager_out = forward(x.clone(), eager_residual)
        compiled_residual = residual.clone()
        before = hits()
        compiled_out = compiled(x.clone(), compiled_residual)
        served = hits() - before
        for name, got, want in (("out", compiled_out, eager_out),
                                ("residual", compiled_residual, eager_residual)):
            error = ((got.float() - want.float()).abs().max() / want.float().abs().max()).item()
            errors.append(error)
            comparisons += 1
            if not error < TOLERANCE:
                wrong += 1
                print(f"rank {rank}: call {call} {name}: compiled vs eager max relative error "
                      f"{error:.2e}", file=sys.stderr, flush=True)
        if served != LAYERS + 1:
            wrong += 1
            print(f"rank {rank}: call {call}: the declared plans served {served} compiled calls, "
                  f"expected {LAYERS + 1}", file=sys.stderr, flush=True)
    if not CPU:
        torch.cuda.synchronize()
    graph_breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    if graph_breaks:
        wrong += 1
        print(f"rank {rank}: graph breaks: {dict(torch._dynamo.utils.counters['graph_break'])}",
              file=sys.stderr, flush=True)

    # Every rank's count, through peerplan itself (an undeclared shape: the fallback).
    everyone = torch.tensor([float(wrong), float(graph_breaks)], device=device)
    comm.all_reduce(everyone)
    total_wrong, total_breaks = int(everyone[0].item()), int(everyone[1].item())
    comm.close()
    if rank == 0:
        print(f"python_torch_compile_test: {size} ranks, {'cpu/host' if CPU else 'cuda'}, torch "
              f"{torch.__version__}, {comparisons} comparisons per rank (max relative error "
              f"{max(errors):.1e}), {total_wrong} wrong, {total_breaks} graph breaks", flush=True)
    sys.exit(1 if total_wrong or total_breaks else 0)


if __name__ == "__main__":
    main()
