# SPDX-License-Identifier: Apache-2.0
"""The package's per-call caches (python/peerplan/_tensors.py) on the host
backend, under mpirun (ctest python_layout_cache_test.npN): what is cached
per (dtype, shape, strides) must never stand in for what is read per call.

  - more distinct shapes than the cache holds: every result right, the
    cache never larger than its limit, early shapes right again after it
    was emptied;
  - a cache hit reuses the Layout (the cache works at all);
  - equal shapes with other strides (a padded view, a transpose) or another
    dtype get entries of their own: results right, padding untouched, and a
    declared contiguous plan found for the contiguous array only;
  - the address and the read-only flag are read per call: an array made
    read-only after a cached call is refused; a weight at another address
    (another array, or the same object now pointing elsewhere) is not taken
    for the declared one: its own values are used and the declared route
    only for the declared address;
  - NumPy calls never import torch; the PyTorch path (data_ptr(), shape,
    stride(), dtype; the current stream of a CUDA tensor's device) checked
    with a stand-in torch module when PyTorch is not installed (its 'CUDA'
    tensors on a communicator that says cuda), with real CPU tensors when
    it is.
Exits 77 (skipped) without NumPy or mpi4py."""

import sys
import types

try:
    import numpy as np
    from mpi4py import MPI
except ImportError as e:  # pragma: no cover
    print(f"python_layout_cache_test: SKIPPED: {e} (install python3-numpy and python3-mpi4py)")
    sys.exit(77)

import peerplan
from peerplan import _tensors

comm_world = MPI.COMM_WORLD
rank, size = comm_world.Get_rank(), comm_world.Get_size()
ranks_sum = size * (size + 1) / 2  # each rank contributes (rank + 1) * base
checks = 0
failures = 0


def check(condition, what):
    global checks, failures
    checks += 1
    if not condition:
        failures += 1
        print(f"rank {rank}: check failed: {what}", file=sys.stderr, flush=True)


def raises(kind, call):
    try:
        call()
    except kind:
        return True
    except Exception as e:  # noqa: BLE001 - another type is a failure
        print(f"rank {rank}: raised {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return False
    return False


def base(shape, modulus=7):
    n = int(np.prod(shape))
    return (np.arange(n, dtype=np.float32) % modulus).reshape(shape)


def rms_reference(x_sum_plus_residual, weight, eps):
    r = x_sum_plus_residual.astype(np.float64)
    return r / np.sqrt((r * r).mean(axis=-1, keepdims=True) + eps) * weight.astype(np.float64)


torch_was_imported = "torch" in sys.modules
limit = _tensors.CACHE_LIMIT
_tensors.clear_caches()

with peerplan.Communicator(comm_world, timeout_ms=20000, backend="host") as comm:
    eps = 1e-6
    hidden = 64
    w1 = (0.5 + np.arange(hidden, dtype=np.float32) / hidden).astype(np.float32)
    w2 = (2.0 - np.arange(hidden, dtype=np.float32) / hidden).astype(np.float32)  # other values
    comm.declare([
        peerplan.Declaration.all_reduce("ar", "f32", (4, hidden)),
        peerplan.Declaration.fused_add_rms_norm("norm", "f32", (2, hidden), w1, eps),
    ])
    declared_route_expected = comm.p2p_enabled  # else every call is the fallback

    # -- more distinct shapes than the cache holds
    shapes = [(1 + i % 3, 1 + i) for i in range(limit + 40)]
    wrong, largest = [], 0
    for shape in shapes:
        x = base(shape) * (rank + 1)
        comm.all_reduce(x)
        if not np.array_equal(x, base(shape) * ranks_sum):
            wrong.append(shape)
        largest = max(largest, len(_tensors._numpy_layouts))
    check(not wrong, f"{len(shapes)} distinct shapes, wrong results for {wrong[:5]}")
    check(largest <= limit, f"cache size {largest} over its limit {limit}")
    for shape in shapes[:8]:  # evicted by now (emptied when full): built again, still right
        x = base(shape, 5) * (rank + 1)
        comm.all_reduce(x)
        check(np.array_equal(x, base(shape, 5) * ranks_sum), f"again, shape {shape}")

    # -- a hit reuses the entry; equal shapes with other strides or dtypes do not share it
    a = np.zeros((3, hidden), np.float32)
    b = np.ones((3, hidden), np.float32)
    check(_tensors.read(a)[2] is _tensors.read(b)[2], "same (dtype, shape, strides): one Layout")
    padded = np.full((3, hidden + 8), -5.0, np.float32)
    view = padded[:, :hidden]
    transposed_base = np.zeros((hidden, 3), np.float32)
    transposed = transposed_base.T
    half = np.zeros((3, hidden), np.float16)
    layouts = [_tensors.read(t)[2] for t in (a, view, transposed)]
    check(len({id(layout) for layout in layouts}) == 3, "other strides: entries of their own")
    check(layouts[0].strides is None or not layouts[0].strides, "contiguous: NULL strides")
    check(list(layouts[1].strides[:2]) == [hidden + 8, 1], "padded view: its element strides")
    check(list(layouts[2].strides[:2]) == [1, 3], "transpose: its element strides")
    check(_tensors.read(half)[1] != _tensors.read(a)[1], "another dtype: another entry")
    for round_ in range(3):  # alternate, so that each call follows a hit of the other layout
        for order in ((view, a, transposed), (transposed, a, view)):
            for t in order:
                expected = None
                if t is view:
                    padded[:, hidden:] = -5.0
                    view[:] = base((3, hidden), 5) * (rank + 1)
                    expected = base((3, hidden), 5) * ranks_sum
                elif t is a:
                    a[:] = base((3, hidden), 3) * (rank + 1)
                    expected = base((3, hidden), 3) * ranks_sum
                else:
                    transposed[:] = base((3, hidden), 11) * (rank + 1)
                    expected = base((3, hidden), 11) * ranks_sum
                comm.all_reduce(t)
                check(np.array_equal(t, expected), f"round {round_}: values of {t.strides}")
                check(np.all(padded[:, hidden:] == -5.0), "padding untouched")
    half[:] = base((3, hidden)).astype(np.float16) * np.float16(rank + 1)
    comm.all_reduce(half)
    check(np.array_equal(half, (base((3, hidden)) * ranks_sum).astype(np.float16)),
          "f16 of the same shape as a cached f32")

    # Declared (4, hidden) contiguous: found for the contiguous array only.
    contiguous = np.zeros((4, hidden), np.float32)
    padded4 = np.zeros((4, hidden + 8), np.float32)
    for _ in range(3):
        check(comm.has_plan_for(contiguous), "declared contiguous found")
        check(not comm.has_plan_for(padded4[:, :hidden]), "padded view of the same shape: not")
        check(not comm.has_plan_for(contiguous.astype(np.float16)), "f16: not")
    contiguous[:] = base((4, hidden)) * (rank + 1)
    route, reason = comm.all_reduce(contiguous)
    check((route != "fallback") == declared_route_expected, f"declared route {route} {reason}")
    check(np.array_equal(contiguous, base((4, hidden)) * ranks_sum), "declared values")
    padded4[:, hidden:] = -1.0
    padded4[:, :hidden] = base((4, hidden)) * (rank + 1)
    route, reason = comm.all_reduce(padded4[:, :hidden])
    check(reason == "undeclared", f"padded view after the declared one: {route} {reason}")
    check(np.array_equal(padded4[:, :hidden], base((4, hidden)) * ranks_sum), "padded values")
    check(np.all(padded4[:, hidden:] == -1.0), "padded4's padding untouched")

    # -- read per call: the read-only flag
    flag = np.zeros(16, np.float32)
    comm.all_reduce(flag)  # cached now
    flag.setflags(write=False)
    check(raises(ValueError, lambda: comm.all_reduce(flag)), "read-only after a cached call")
    check(raises(ValueError, lambda: comm.all_reduce(flag)), "and again")
    check(raises(TypeError, lambda: comm.all_reduce(np.zeros(16, np.float64))), "float64")
    check(raises(TypeError, lambda: comm.all_reduce(np.zeros(16, np.float64))), "float64 again")
    # Same shape, same byte strides, another dtype of the same size: refused,
    # though a float32 / float16 entry of that shape and strides is cached.
    comm.all_reduce(np.zeros(16, np.float32))
    comm.all_reduce(np.zeros(16, np.float16))
    check(raises(TypeError, lambda: comm.all_reduce(np.zeros(16, np.int32))), "int32 after f32")
    check(raises(TypeError, lambda: comm.all_reduce(np.zeros(16, np.int16))), "int16 after f16")

    # -- read per call: the weight's address
    class Pointing:
        """One object whose array interface points at one array, then
        another: the same object, another address."""

        def __init__(self, target):
            self.target = target

        @property
        def __array_interface__(self):
            return self.target.__array_interface__

    def fused(weight, weight_values, expect_declared):
        xs = (base((2, hidden), 5) + 1) * (rank + 1)
        residual = base((2, hidden), 3)
        route, reason = comm.fused_add_rms_norm(xs, residual, weight, eps)
        summed = (base((2, hidden), 5) + 1) * ranks_sum + base((2, hidden), 3)
        check(np.array_equal(residual, summed), "fused residual")
        check(np.allclose(xs, rms_reference(summed, weight_values, eps), rtol=1e-5, atol=1e-6),
              "fused output with this call's weight")
        if expect_declared:
            check((route != "fallback") == declared_route_expected, f"w1: {route} {reason}")
        else:
            check(route == "fallback" and reason == "undeclared", f"not w1: {route} {reason}")

    x2 = np.zeros((2, hidden), np.float32)
    pointing = Pointing(w1)
    for _ in range(3):  # alternate: each call follows one with the other address
        check(comm.has_plan_for(x2, w1, eps), "has_plan_for with w1")
        check(not comm.has_plan_for(x2, w2, eps), "has_plan_for with w2")
        fused(w1, w1, True)
        fused(w2, w2, False)
        pointing.target = w1
        check(comm.has_plan_for(x2, pointing, eps), "the object pointing at w1")
        fused(pointing, w1, True)
        pointing.target = w2
        check(not comm.has_plan_for(x2, pointing, eps), "the same object, now at w2")
        fused(pointing, w2, False)

    # -- the NumPy address reader (the array struct's data field where it
    # agrees with the array interface) against the interface itself
    grid = np.arange(240, dtype=np.float32).reshape(12, 20)
    arrays = [grid, grid[3:], grid[:, 7:], grid[2:9:3, 1::4], grid.T, grid[::-1], grid[5],
              np.zeros(0, np.float16), np.frombuffer(bytearray(64), np.float32)[3:],
              np.ones((4, 6), np.float16)[1:, ::2]]
    agree = [_tensors.read(t)[0] == t.__array_interface__["data"][0] for t in arrays]
    check(all(agree), f"NumPy addresses ({_tensors._numpy_pointer.__name__}): {agree}")

    check(("torch" in sys.modules) == torch_was_imported, "NumPy calls imported torch")

    # -- the PyTorch path
    try:
        import torch  # noqa: F401 - real PyTorch where installed
        real_torch = True
    except ImportError:
        real_torch = False

    if not real_torch:
        # A stand-in: the attributes the package reads of a PyTorch tensor,
        # over NumPy memory (the host backend reads host memory). Checks the
        # package's own logic, not PyTorch's.
        stream_calls = []

        class FakeStream:
            cuda_stream = 0  # the host backend ignores streams

        class Dtype:  # hashable by identity, as torch.dtype
            def __init__(self, name):
                self.name = name

            def __repr__(self):
                return f"stand-in {self.name}"

        fake = types.ModuleType("torch")
        fake.float16, fake.bfloat16, fake.float32, fake.float64 = (
            Dtype(n) for n in ("float16", "bfloat16", "float32", "float64"))
        fake.cuda = types.SimpleNamespace(
            current_stream=lambda device=None: stream_calls.append(device) or FakeStream())

        class Tensor:
            """The stand-in's torch.Tensor (the package takes its instances
            for PyTorch's)."""

            __module__ = "torch"

            def __init__(self, array, dtype, cuda_device=-1):
                self.array, self.dtype, self.device_index = array, dtype, cuda_device

            @property
            def shape(self):
                return tuple(self.array.shape)

            def stride(self):
                return tuple(s // self.array.itemsize for s in self.array.strides)

            def data_ptr(self):
                return self.array.__array_interface__["data"][0]

            @property
            def is_cuda(self):
                return self.device_index >= 0

            def get_device(self):
                return self.device_index

            @property
            def device(self):  # torch.device's type and index
                return types.SimpleNamespace(type="cuda" if self.is_cuda else "cpu",
                                             index=self.device_index if self.is_cuda else None)

        fake.Tensor = Tensor

        class CudaStandIn(peerplan.Communicator):
            """Says its backend is cuda on GPU 1 (the host library under it):
            it takes the stand-in's 'CUDA' tensors, which are host memory."""

            backend = "cuda"
            cuda_device = 1

        sys.modules["torch"] = fake
        _tensors._torch_dtypes = None  # as if torch was first seen now
        cuda_comm = CudaStandIn(comm_world, timeout_ms=20000, backend="host")
        try:
            # The weight as the calls pass it: a 'CUDA' tensor of the
            # communicator's GPU (declare refuses memory the calls would).
            wt = Tensor(w1, fake.float32, cuda_device=1)
            cuda_comm.declare([peerplan.Declaration.fused_add_rms_norm("norm", "f32", (2, hidden),
                                                                      wt, eps)])
            arr = base((4, hidden)) * (rank + 1)
            t = Tensor(arr, fake.float32)
            check(comm.has_plan_for(t), "stand-in tensor: declared plan found")
            route, reason = comm.all_reduce(t)
            check(np.array_equal(arr, base((4, hidden)) * ranks_sum), "stand-in all-reduce")
            check(stream_calls == [], "a CPU tensor asks for no stream")
            padded_t = np.full((4, hidden + 8), -3.0, np.float32)
            padded_t[:, :hidden] = base((4, hidden)) * (rank + 1)
            pt = Tensor(padded_t[:, :hidden], fake.float32, cuda_device=1)
            check(not comm.has_plan_for(pt), "stand-in strided: not the contiguous plan")
            route, reason = cuda_comm.all_reduce(pt)
            check(reason == "undeclared", f"stand-in strided: {route} {reason}")
            check(np.array_equal(padded_t[:, :hidden], base((4, hidden)) * ranks_sum),
                  "stand-in strided values")
            check(np.all(padded_t[:, hidden:] == -3.0), "stand-in padding untouched")
            check(stream_calls == [1], f"a 'CUDA' tensor: its device's stream ({stream_calls})")
            cuda_comm.all_reduce(pt, stream=0)
            check(stream_calls == [1], "stream= given: no lookup")
            xs = Tensor((base((2, hidden), 5) + 1) * (rank + 1), fake.float32, cuda_device=1)
            residual = Tensor(base((2, hidden), 3), fake.float32, cuda_device=1)
            route, reason = cuda_comm.fused_add_rms_norm(xs, residual, wt, eps)
            summed = (base((2, hidden), 5) + 1) * ranks_sum + base((2, hidden), 3)
            check(np.allclose(xs.array, rms_reference(summed, w1, eps), rtol=1e-5, atol=1e-6),
                  "stand-in fused")
            check((route != "fallback") == declared_route_expected, f"stand-in fused {route}")
            check(stream_calls == [1, 1], f"stand-in fused: x's device's stream ({stream_calls})")
            wt.array = w2  # the same tensor object, now at another address
            check(not cuda_comm.has_plan_for(xs, wt, eps), "stand-in weight moved: not declared")
            # Element strides: f32, f16 and f64 tensors of one shape have
            # the same strides; only the dtype tells them apart.
            comm.all_reduce(Tensor(np.zeros(4, np.float32), fake.float32))
            check(raises(TypeError, lambda: comm.all_reduce(Tensor(np.zeros(4), fake.float64))),
                  "stand-in float64 after a float32 of its shape")
            check(not comm.has_plan_for(Tensor(np.zeros((4, hidden), np.float16), fake.float16)),
                  "stand-in f16 of the declared f32 shape: not declared")
        finally:
            cuda_comm.close()
            del sys.modules["torch"]
            _tensors._torch_dtypes = None
            _tensors.clear_caches()
    else:
        arr = torch.from_numpy(base((4, hidden)) * (rank + 1))
        check(comm.has_plan_for(arr), "torch: declared plan found")
        comm.all_reduce(arr)
        check(np.array_equal(arr.numpy(), base((4, hidden)) * ranks_sum), "torch all-reduce")
        padded_t = torch.full((4, hidden + 8), -3.0)
        view_t = padded_t[:, :hidden]
        view_t.copy_(torch.from_numpy(base((4, hidden)) * (rank + 1)))
        check(not comm.has_plan_for(view_t), "torch strided: not the contiguous plan")
        comm.all_reduce(view_t)
        check(np.array_equal(view_t.numpy(), base((4, hidden)) * ranks_sum), "torch strided")
        check(bool((padded_t[:, hidden:] == -3.0).all()), "torch padding untouched")
        wt = torch.nn.Parameter(torch.from_numpy(w1.copy()), requires_grad=False)
        check(not comm.has_plan_for(torch.zeros(2, hidden), wt, eps),
              "torch weight at another address than w1: not declared")
        check(raises(TypeError, lambda: comm.all_reduce(torch.zeros(4, dtype=torch.float64))),
              "torch float64")

total = comm_world.allreduce(failures)
if rank == 0:
    print(f"python_layout_cache_test: {checks} checks per rank, {total} failed over {size} ranks "
          f"(NumPy addresses: {_tensors._numpy_pointer.__name__})", flush=True)
sys.exit(0 if total == 0 else 1)
