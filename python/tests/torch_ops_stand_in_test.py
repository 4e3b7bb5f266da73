# SPDX-License-Identifier: Apache-2.0
"""peerplan.torch where PyTorch is not installed (this machine, CI):
 - `import peerplan` works without torch; `import peerplan.torch` fails
   with an ImportError that says what it needs, without torch and with a
   torch too old for custom ops (a stand-in that says 2.1.0);
 - the op handles (peerplan._op_handles): one int per communicator, the
   same every time, refused once the communicator is gone; registering
   while the cyclic GC frees another registered communicator (whose
   weakref callback then runs inside register()) does not deadlock;
 - the ops' own code, at 2 ranks on the host backend, through a stand-in
   torch whose torch.library.custom_op keeps the functions and whose
   tensors are NumPy arrays: all_reduce returns a new array of the sum and
   leaves its input alone (a non-dense view too: its out has the view's
   strides), all_reduce_ sums in place, fused_add_rms_norm
   updates x and residual as the Communicator's call does (and refuses an
   eps of None or text with peerplan's TypeError), and each fake
   (meta) implementation gives an output of the input's shape and dtype.
Every rank prints its own count and exits 1 on a failed check (ctest judges
by the exit status). Exits 77 without NumPy."""

import faulthandler
import gc
import sys
import types

try:
    import numpy as np
except ImportError as e:  # pragma: no cover
    print(f"python_torch_ops_stand_in_test: SKIPPED: {e}")
    sys.exit(77)

failures = 0
checks = 0


def check(condition, what):
    global failures, checks
    checks += 1
    if not condition:
        failures += 1
        print(f"FAIL: {what}", file=sys.stderr, flush=True)


def import_error_of(module_name):
    sys.modules.pop(module_name, None)
    try:
        __import__(module_name)
    except ImportError as e:
        return str(e)
    return None


# 1. No torch at all.
sys.modules["torch"] = None
import peerplan  # noqa: E402 - after torch is made unimportable

message = import_error_of("peerplan.torch")
check(message is not None and "PyTorch >= 2.4" in message, f"without torch: {message}")

# 2. A torch too old for custom ops.
old = types.ModuleType("torch")
old.__version__ = "2.1.0"
old.library = types.SimpleNamespace()
sys.modules["torch"] = old
message = import_error_of("peerplan.torch")
check(message is not None and "2.1.0" in message and "PyTorch >= 2.4" in message,
      f"with torch 2.1.0: {message}")

# 3. The handles.
from peerplan import _op_handles  # noqa: E402


class StandInCommunicator:
    pass


a, b = StandInCommunicator(), StandInCommunicator()
ha, hb = _op_handles.register(a), _op_handles.register(b)
check(isinstance(ha, int) and ha > 0 and ha != hb, "one int handle per communicator")
check(_op_handles.register(a) == ha and _op_handles.handle_of(a) == ha, "the same every time")
check(_op_handles.handle_of(7) == 7, "an int is its own handle")
check(_op_handles.lookup(ha) is a and _op_handles.lookup(hb) is b, "lookup")
del a
gc.collect()
try:
    _op_handles.lookup(ha)
    check(False, "a collected communicator's handle is refused")
except RuntimeError as e:
    check(str(ha) in str(e), f"the message names the handle: {e}")

# A communicator in a reference cycle is freed by the cyclic GC, which any
# allocation may run, e.g. register()'s own of another communicator's weakref:
# the freed one's weakref callback then runs inside register(). A deadlock
# there ends the process (faulthandler) with the stacks.
faulthandler.dump_traceback_later(30, exit=True)
thresholds = gc.get_threshold()
for threshold in range(1, 21):
    gc.disable()
    gc.collect()
    cyclic = StandInCommunicator()
    cyclic.me = cyclic
    _op_handles.register(cyclic)
    del cyclic
    gc.set_threshold(threshold)
    gc.enable()
    _op_handles.register(StandInCommunicator())
gc.set_threshold(*thresholds)
faulthandler.cancel_dump_traceback_later()
check(True, "register() while the GC frees registered communicators: no deadlock")


# 4. The ops through a stand-in torch of NumPy arrays, at 2 ranks.
class StandInOp:
    def __init__(self, name, function):
        self.name, self.function, self.fake = name, function, None

    def register_fake(self, fake):
        self.fake = fake
        return fake

    def __call__(self, *args):
        return self.function(*args)


class Tensor(np.ndarray):
    """A stand-in tensor (the stand-in torch's Tensor, so the package reads
    it as PyTorch's): a NumPy array with PyTorch's stride() (elements),
    data_ptr() and a CPU device."""

    device = types.SimpleNamespace(type="cpu", index=None)  # torch.device("cpu")'s
    is_cuda = False

    def stride(self):
        return tuple(s // self.itemsize for s in self.strides)

    def data_ptr(self):
        return self.__array_interface__["data"][0]

    def get_device(self):
        return -1


def empty_strided(shape, stride, dtype, device):
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, stride)) if 0 not in shape else 0
    memory = np.empty(extent, dtype)
    return np.lib.stride_tricks.as_strided(
        memory, shape, [s * memory.itemsize for s in stride]).view(Tensor)


def stand_in_torch():
    torch = types.ModuleType("torch")
    torch.__version__ = "2.11.0+standin"
    torch.Tensor = Tensor
    torch.float16, torch.float32 = np.dtype(np.float16), np.dtype(np.float32)  # Tensor.dtype's
    torch.empty_like = np.empty_like  # as PyTorch's: a non-dense input's copy is contiguous
    torch.empty_strided = empty_strided
    torch.ops = types.SimpleNamespace(peerplan=types.SimpleNamespace())
    registered = {}

    def custom_op(name, mutates_args):
        def wrap(function):
            op = StandInOp(name, function)
            op.mutates_args = tuple(mutates_args)
            registered[name] = op
            setattr(torch.ops.peerplan, name.split("::", 1)[1], op)
            return op
        return wrap

    torch.library = types.SimpleNamespace(custom_op=custom_op, register_fake=lambda *a: None)
    return torch, registered


torch, registered = stand_in_torch()
sys.modules["torch"] = torch
sys.modules.pop("peerplan.torch", None)
import peerplan.torch as pt  # noqa: E402

check(set(registered) == {"peerplan::all_reduce", "peerplan::all_reduce_in_place",
                          "peerplan::fused_add_rms_norm"}, f"the ops: {sorted(registered)}")
check(registered["peerplan::all_reduce"].mutates_args == ()
      and registered["peerplan::all_reduce_in_place"].mutates_args == ("tensor",)
      and registered["peerplan::fused_add_rms_norm"].mutates_args == ("x", "residual"),
      "what each op says it mutates")
check(all(op.fake is not None for op in registered.values()), "every op has a fake")

comm = peerplan.Communicator(backend="host", timeout_ms=20000)
n, me = comm.size, comm.rank
op = pt.handle(comm)
check(pt.handle(comm) == op, "handle() is stable")
hidden, eps = 64, 1e-5
weight = (1 + 0.01 * np.arange(hidden)).astype(np.float32)
comm.declare([peerplan.Declaration.all_reduce("ar", "f32", (2, hidden)),
              peerplan.Declaration.fused_add_rms_norm("fused", "f32", (2, hidden), weight, eps)])

x = (np.arange(2 * hidden, dtype=np.float32).reshape(2, hidden) * (me + 1)).view(Tensor)
before = x.copy()
total = np.arange(2 * hidden, dtype=np.float32).reshape(2, hidden) * (n * (n + 1) / 2)
y = pt.all_reduce(op, x)
check(y is not x and np.array_equal(y, total) and np.array_equal(x, before),
      "all_reduce: a new array of the sum, the input unchanged")
fake = registered["peerplan::all_reduce"].fake(op, x)
check(fake.shape == x.shape and fake.dtype == x.dtype, "all_reduce's fake: the input's shape")
# Rows of a padded buffer (strides (hidden + 8, 1)): the out has the view's
# strides, which the call needs (one layout for both).
padded = np.full((2, hidden + 8), -5.0, np.float32)
padded[:, :hidden] = np.arange(2 * hidden, dtype=np.float32).reshape(2, hidden) * (me + 1)
view = padded.view(Tensor)[:, :hidden]
try:
    y = pt.all_reduce(op, view)
    check(np.array_equal(y, total) and y.stride() == view.stride(),
          f"all_reduce of a padded view: the sum, strides {y.stride()}")
    check(np.all(padded[:, hidden:] == -5.0) and np.array_equal(padded[:, :hidden], before),
          "all_reduce of a padded view: the input unchanged")
except ValueError as e:
    check(False, f"all_reduce of a padded view: {e}")
fake = registered["peerplan::all_reduce"].fake(op, view)
check(fake.shape == view.shape and fake.stride() == view.stride(),
      "all_reduce's fake: the input's strides")
check(pt.all_reduce_(comm, x) is x and np.array_equal(x, total),
      "all_reduce_: in place, through the Communicator itself")

x = np.full((2, hidden), me + 1.0, dtype=np.float32)
residual = np.full((2, hidden), 0.5, dtype=np.float32)
want_residual = residual + n * (n + 1) / 2
want_x = want_residual / np.sqrt((want_residual ** 2).mean(-1, keepdims=True) + eps) * weight
got_x, got_residual = pt.fused_add_rms_norm(op, x, residual, weight, eps)
check(got_x is x and got_residual is residual, "fused: in place")
check(np.allclose(residual, want_residual) and np.allclose(x, want_x, rtol=1e-5),
      f"fused: residual {residual[0, :2]}, x {x[0, :2]}")
# eps=None (or text): peerplan's TypeError naming the fix, before the op
# runs (float()'s bare one before); x and residual are not written.
for bad_eps, given in ((None, "not None;"), ("abc", "not str;")):
    x_before, residual_before = x.copy(), residual.copy()
    try:
        pt.fused_add_rms_norm(op, x, residual, weight, bad_eps)
        check(False, f"fused with eps={bad_eps!r}: accepted")
    except TypeError as e:
        check(str(e).startswith("peerplan: fused_add_rms_norm: eps must be a real number")
              and given in str(e) and "pass the RMS norm's epsilon" in str(e),
              f"fused with eps={bad_eps!r}: {e}")
    except Exception as e:  # noqa: BLE001 - any other type is the failure
        check(False, f"fused with eps={bad_eps!r}: {type(e).__name__}: {e}")
    check(np.array_equal(x, x_before) and np.array_equal(residual, residual_before),
          f"fused with eps={bad_eps!r}: nothing written")
stats = comm.stats()
hits = {p["name"]: p["hits"] for p in stats["plans"]}
check(hits.get("ar") == 2 and hits.get("fused") == 1, f"the declared plans served the ops: {hits}")
comm.close()
del comm
gc.collect()
try:
    pt.all_reduce(op, x)
    check(False, "a handle outlives its communicator: refused")
except RuntimeError:
    pass

# Each rank's own verdict: ctest judges by the exit status, which mpiexec
# makes non-zero when any rank's is (no mpi4py is needed to sum them here).
print(f"python_torch_ops_stand_in_test: rank {me}: {checks} checks, {failures} failed", flush=True)
sys.exit(1 if failures else 0)
