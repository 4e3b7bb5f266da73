# SPDX-License-Identifier: Apache-2.0
"""peerplan's collectives as PyTorch custom ops (torch.library, PyTorch >=
2.4), so that torch.compile traces them into its graph (fullgraph=True
holds) instead of breaking the graph at every call:

    import peerplan.torch as pt
    op = pt.handle(comm)                    # an int: what a custom op can take
    y = pt.all_reduce(op, x)                # a new tensor: the sum over ranks
    pt.all_reduce_(op, x)                   # in place (peerplan::all_reduce_in_place)
    pt.fused_add_rms_norm(op, x, residual, weight, eps)   # x and residual in place

or torch.ops.peerplan.<name> directly. Each op runs on the current CUDA
stream of its tensors' device, as the Communicator's calls do; their fake
implementations give torch.compile the outputs' shapes without running
anything. No autograd: inference only. Importing this module needs
PyTorch; `import peerplan` does not import it. See docs/python.md."""

from . import _op_handles
from .communicator import _eps_value

MINIMUM_TORCH = (2, 4)

try:
    import torch
except ImportError as e:
    raise ImportError(f"peerplan.torch needs PyTorch >= {MINIMUM_TORCH[0]}.{MINIMUM_TORCH[1]}, "
                      f"which cannot be imported here ({e}); the rest of peerplan works "
                      "without it") from e


def _torch_version(text):
    parts = []
    for piece in text.split("+")[0].split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


_library = getattr(torch, "library", None)
if _torch_version(getattr(torch, "__version__", "0")) < MINIMUM_TORCH or not hasattr(
        _library, "custom_op") or not hasattr(_library, "register_fake"):
    raise ImportError(f"peerplan.torch needs PyTorch >= {MINIMUM_TORCH[0]}.{MINIMUM_TORCH[1]} "
                      f"(torch.library.custom_op); this is torch "
                      f"{getattr(torch, '__version__', '?')}. Upgrade PyTorch, or call the "
                      "Communicator's methods (eager only)")


def handle(comm):
    """The int that stands for `comm` in the ops (the same for one
    communicator every time). Take it outside the compiled function."""
    return _op_handles.register(comm)


def _empty_as(tensor):
    """A new tensor of `tensor`'s strides: the call takes one layout for both
    (empty_like makes a non-dense tensor's copy contiguous)."""
    return torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype,
                               device=tensor.device)


@torch.library.custom_op("peerplan::all_reduce", mutates_args=())
def _all_reduce(comm: int, tensor: torch.Tensor) -> torch.Tensor:
    communicator = _op_handles.lookup(comm)  # first: a stale handle's error, not another
    out = _empty_as(tensor)
    communicator.all_reduce(tensor, out)
    return out


@_all_reduce.register_fake
def _(comm, tensor):
    return _empty_as(tensor)


@torch.library.custom_op("peerplan::all_reduce_in_place", mutates_args=("tensor",))
def _all_reduce_in_place(comm: int, tensor: torch.Tensor) -> None:
    _op_handles.lookup(comm).all_reduce(tensor)


@_all_reduce_in_place.register_fake
def _(comm, tensor):
    return None


@torch.library.custom_op("peerplan::fused_add_rms_norm", mutates_args=("x", "residual"))
def _fused_add_rms_norm(comm: int, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                        eps: float) -> None:
    _op_handles.lookup(comm).fused_add_rms_norm(x, residual, weight, eps)


@_fused_add_rms_norm.register_fake
def _(comm, x, residual, weight, eps):
    return None


def all_reduce(comm, tensor):
    """A new tensor: the sum of `tensor` over the ranks of `comm` (a handle()
    int, or a Communicator already given one)."""
    return torch.ops.peerplan.all_reduce(_op_handles.handle_of(comm), tensor)


def all_reduce_(comm, tensor):
    """`tensor` = the sum over ranks, in place; returns `tensor`."""
    torch.ops.peerplan.all_reduce_in_place(_op_handles.handle_of(comm), tensor)
    return tensor


def fused_add_rms_norm(comm, x, residual, weight, eps):
    """residual += allreduce(x); x = rmsnorm(residual) * weight, in place
    (Communicator.fused_add_rms_norm). Returns (x, residual)."""
    torch.ops.peerplan.fused_add_rms_norm(_op_handles.handle_of(comm), x, residual, weight,
                                          _eps_value("fused_add_rms_norm", eps))
    return x, residual


__all__ = ["handle", "all_reduce", "all_reduce_", "fused_add_rms_norm", "MINIMUM_TORCH"]
