# SPDX-License-Identifier: Apache-2.0
"""Communicators as small ints, for the torch.library custom ops of
peerplan.torch: an op's arguments may be tensors, numbers and strings, not
a Python object, so a communicator is passed as the handle register()
gives it. The table holds communicators weakly (registering one does not
keep it alive). Pure Python: no PyTorch needed."""

import itertools
import weakref

# No lock: next() of the counter and the dict's get, set and pop are atomic
# under the GIL. A lock here would deadlock: allocating the weakref may run
# the cyclic GC, whose weakref callbacks (_forget) run on this thread.
_communicators = {}  # handle -> weakref to the Communicator
_next_handle = itertools.count(1)


def register(comm):
    """The handle (an int > 0) of `comm`, the same on every call for one
    communicator; kept on it as comm._op_handle."""
    handle = getattr(comm, "_op_handle", None)
    if handle is not None and lookup_or_none(handle) is comm:
        return handle
    handle = next(_next_handle)
    _communicators[handle] = weakref.ref(comm, lambda _ref, h=handle: _forget(h))
    comm._op_handle = handle
    return handle


def _forget(handle):
    _communicators.pop(handle, None)


def lookup_or_none(handle):
    ref = _communicators.get(handle)
    return ref() if ref is not None else None


def lookup(handle):
    """The communicator of `handle`; RuntimeError naming it when there is none
    (never registered, or the communicator was garbage-collected)."""
    comm = lookup_or_none(handle)
    if comm is None:
        raise RuntimeError(f"peerplan: no communicator has op handle {handle!r}; pass the int "
                           "peerplan.torch.handle(comm) returned, while comm is alive")
    return comm


def handle_of(comm):
    """`comm` itself when it is an int handle, else its handle (registering it)."""
    if isinstance(comm, int):
        return comm
    handle = getattr(comm, "_op_handle", None)
    return handle if handle is not None else register(comm)
