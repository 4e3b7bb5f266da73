# SPDX-License-Identifier: Apache-2.0
"""Every tensor argument of the Python calls is checked like the input:
an `out` of another dtype or shape, a `residual` unlike `x`, and a weight
of the wrong dtype or length raise ValueError on the calling rank before
anything is written or read (the C call takes one dtype and layout for all
of them, so a mismatch would write past `out`'s end or read past the
weight's). Also: memory the backend cannot read (device memory on the host
backend, host memory or another GPU's on a stand-in cuda communicator),
out and residual whose size-1 dimensions have other strides (alike),
read-only arrays (refused only where written, naming the call and the
argument), a c_void_p stream handle, streams that are no cudaStream_t
(ints outside 0 to 2**64 - 1, bools, floats, text: refused, not wrapped),
declarations (a name None, shapes and strides, a fused declaration's
weight checked as the calls check it, on every rank at once), mpi4py
objects that are not communicators, Fortran handles outside int32 or not
ints, settings given as None (unset), lookups with a weight but no eps or
with eps but no weight, an eps that is no real number (None, text) in
declarations, calls and lookups, registered buffers' extents and pairs, and stats
read from two threads at once. PyTorch tensors through a stand-in torch
module (sys.modules["torch"], whose Tensor is StandInTensor below):
subclasses of its Tensor are read as PyTorch's, other objects of torch*
modules are not, and tensors on devices other than CPU and CUDA are
refused. Under mpirun at 2 ranks, host backend; exits 77 (skipped) without
NumPy or mpi4py."""

import ctypes
import sys
import threading
import types

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


def expect_error(kind, call, what, words):
    try:
        call()
    except kind as e:
        check(all(w in str(e) for w in words), f"{what}: message {e!s} names {words}")
        return
    except Exception as e:  # noqa: BLE001 - any other type is the failure
        check(False, f"{what}: raised {type(e).__name__}: {e}")
        return
    check(False, f"{what}: did not raise {kind.__name__}")


def expect_value_error(call, what, words):
    expect_error(ValueError, call, what, words)


def expect_type_error(call, what, words):
    expect_error(TypeError, call, what, words)


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
    check(_buffer_region(block, 0)[:2] == (block.ctypes.data, 128),
          "a (4, 8) f32 buffer is 128 bytes")
    view = block[:, :4]  # from element 0 to element 3 * 8 + 3
    check(_buffer_region(view, 0)[:2] == (block.ctypes.data, 28 * 4),
          f"a (4, 4) view of (4, 8) spans 28 elements: {_buffer_region(view, 0)[:2]}")
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

    class StandInDevice:
        """torch.device's type and index, printed as PyTorch prints it."""

        def __init__(self, kind, index):
            self.type, self.index = kind, (index if index >= 0 else None)

        def __str__(self):
            return self.type if self.index is None else f"{self.type}:{self.index}"

    class StandInTensor:
        """The stand-in torch module's Tensor: what the package reads of a
        PyTorch tensor on `kind` (by default a CUDA one on `device` >= 0, else
        a CPU one), over host memory: strides as PyTorch gives them, size-1
        dimensions' included (NumPy's interface drops them when contiguous)."""

        __module__ = "torch"  # as torch.Tensor's: its subclasses' are their own
        dtype = "torch.float32"

        def __init__(self, array, device=-1, kind=None):
            self.array, self.index = array, device
            self.kind = kind or ("cuda" if device >= 0 else "cpu")

        @property
        def device(self):
            return StandInDevice(self.kind, self.index)

        @property
        def __cuda_array_interface__(self):
            """A CUDA tensor's, as PyTorch gives it (AttributeError otherwise):
            what a tensor that is not taken for PyTorch's is read through."""
            if not self.is_cuda:
                raise AttributeError("not a CUDA tensor")
            return {"data": (self.data_ptr(), False), "shape": self.shape, "typestr": "<f4",
                    "strides": self.array.strides, "version": 3}

        @property
        def shape(self):
            return tuple(self.array.shape)

        def stride(self):
            return tuple(s // self.array.itemsize for s in self.array.strides)

        def data_ptr(self):
            return self.array.ctypes.data

        @property
        def is_cuda(self):
            return self.kind == "cuda"

        def get_device(self):
            return self.index

        def element_size(self):
            return self.array.itemsize

    stream_calls = []  # the devices whose current stream the package asked for
    torch_stand_in = types.ModuleType("torch")
    torch_stand_in.Tensor = StandInTensor
    torch_stand_in.cuda = types.SimpleNamespace(
        current_stream=lambda index: stream_calls.append(index) or types.SimpleNamespace(
            cuda_stream=0))  # the host library under the stand-ins ignores streams
    sys.modules["torch"] = torch_stand_in

    # A size-1 dimension's stride is never used: the library's plan key
    # ignores it, so an out or residual that differs only there is alike.
    # (h[:, -1:, :] of a (1, S, H) tensor against a fresh (1, 1, H) x.)
    x1 = StandInTensor(np.full((1, 1, hidden), rank + 1.0, np.float32))
    last_rows = np.zeros((1, 7, hidden), np.float32)
    last = StandInTensor(last_rows[:, -1:, :])
    check(last.stride() == (7 * hidden, hidden, 1) and x1.stride() == (hidden, hidden, 1),
          f"strides that differ in size-1 dimensions: {last.stride()}, {x1.stride()}")
    try:
        comm.all_reduce(x1, out=last)
        check(bool((last.array == size * (size + 1) / 2).all()),
              "out of other size-1 strides: the sum")
        last.array[:] = 0.5
        comm.fused_add_rms_norm(x1, last, weight, 1e-6)
        check(bool((last.array == 0.5 + size * (size + 1) / 2).all()),
              "residual of other size-1 strides: residual + the sum")
        check(bool((last_rows[:, :-1] == 0).all()), "nothing written outside the view")
    except ValueError as e:
        check(False, f"size-1 dimensions of other strides refused: {e}")

    # Read-only arrays are refused only where the call writes them.
    frozen_in = np.full((4, hidden), 2.0, np.float32)
    frozen_in.setflags(write=False)
    sums = np.zeros((4, hidden), np.float32)
    try:
        comm.all_reduce(frozen_in, out=sums)
        check(bool((sums == 2 * size).all()), "read-only inp with an out: the sum")
    except ValueError as e:
        check(False, f"a read-only inp with a separate out refused: {e}")
    # The error names the call and the argument, and says what to pass.
    fix = ["read-only", "pass a writable array", "np.array(arr)"]
    expect_value_error(lambda: comm.all_reduce(frozen_in), "read-only inp in place",
                       ["all_reduce: inp (in place"] + fix)
    expect_value_error(lambda: comm.all_reduce(frozen_in, out=frozen_in),
                       "read-only inp given as its own out", ["all_reduce: inp (in place"] + fix)
    sums[:] = 5
    expect_value_error(lambda: comm.all_reduce(sums, out=frozen_in), "read-only out",
                       ["all_reduce: out is read-only"] + fix)
    check(bool((frozen_in == 2).all()) and bool((sums == 5).all()),
          "a refused read-only out: nothing written")

    class ReadOnlyInterface:
        """A read-only array through the NumPy array interface (the
        interfaces' reader, not NumPy's)."""

        def __init__(self, array):
            self.array = array
            self.__array_interface__ = dict(array.__array_interface__, data=(
                array.__array_interface__["data"][0], True))

    expect_value_error(lambda: comm.all_reduce(sums, out=ReadOnlyInterface(np.zeros_like(sums))),
                       "read-only out through the array interface",
                       ["all_reduce: out is read-only"] + fix)
    frozen_weight = np.ones(hidden, np.float32)
    frozen_weight.setflags(write=False)
    xw = np.ones((4, hidden), np.float32)
    rw = np.zeros((4, hidden), np.float32)
    try:
        comm.fused_add_rms_norm(xw, rw, frozen_weight, 1e-6)
        check(bool((rw == size).all()), "read-only weight: the residual")
    except ValueError as e:
        check(False, f"a read-only weight refused: {e}")
    frozen_residual = np.zeros((4, hidden), np.float32)
    frozen_residual.setflags(write=False)
    expect_value_error(lambda: comm.fused_add_rms_norm(xw, frozen_residual, weight, 1e-6),
                       "read-only residual", ["fused_add_rms_norm: residual is read-only"] + fix)
    frozen_x = np.ones((4, hidden), np.float32)
    frozen_x.setflags(write=False)
    expect_value_error(lambda: comm.fused_add_rms_norm(frozen_x, rw, weight, 1e-6),
                       "read-only x", ["fused_add_rms_norm: x is read-only"] + fix)

    # A stream handle that is a ctypes c_void_p (Numba's stream.handle):
    # its value, None for the default stream.
    from peerplan.communicator import _stream_handle

    class NumbaLikeStream:
        def __init__(self, handle):
            self.handle = handle

    check(_stream_handle(NumbaLikeStream(ctypes.c_void_p(0x1234)), x) == 0x1234,
          "a c_void_p stream handle: its value")
    check(_stream_handle(NumbaLikeStream(ctypes.c_void_p()), x) == 0,
          "a null c_void_p stream handle: stream 0")
    try:
        comm.all_reduce(np.ones(8, np.float32), stream=NumbaLikeStream(ctypes.c_void_p()))
        check(True, "a call with a c_void_p stream")
    except Exception as e:  # noqa: BLE001 - any error is the failure
        check(False, f"a call with a c_void_p stream: {type(e).__name__}: {e}")

    # A stream that is no cudaStream_t is refused before the call: ctypes
    # would wrap it silently (2**64 into 0, the default stream; 2**70 into
    # NULL; -1 into 2**64 - 1; True into 1, cudaStreamLegacy). Nothing is
    # written.
    class CuPyLikeStream:
        def __init__(self, ptr):
            self.ptr = ptr

    class TorchLikeStream:
        def __init__(self, cuda_stream):
            self.cuda_stream = cuda_stream

    stream_fix = ["pass a cudaStream_t as an int from 0 to 2**64 - 1"]
    untouched = np.full(8, 3.0, np.float32)
    fused_x, fused_residual = np.ones((4, hidden), np.float32), np.zeros((4, hidden), np.float32)
    for bad in (2**70, 2**64, 2**64 + 5, -1):
        expect_value_error(lambda: comm.all_reduce(untouched, stream=bad), f"stream={bad}",
                           ["all_reduce: stream is", str(bad), "outside"] + stream_fix)
        expect_value_error(lambda: comm.fused_add_rms_norm(fused_x, fused_residual, weight, 1e-6,
                                                           stream=bad),
                           f"fused stream={bad}",
                           ["fused_add_rms_norm: stream is", str(bad)] + stream_fix)
    for bad in (True, False):
        expect_type_error(lambda: comm.all_reduce(untouched, stream=bad), f"stream={bad}",
                          ["all_reduce: stream is bool", str(bad)] + stream_fix)
    for bad in (1.0, "0", ctypes.c_void_p(0)):
        expect_type_error(lambda: comm.all_reduce(untouched, stream=bad), f"stream={bad!r}",
                          ["all_reduce: stream is", type(bad).__name__] + stream_fix)
    expect_value_error(lambda: comm.all_reduce(untouched, stream=CuPyLikeStream(2**64)),
                       "a stream object's ptr of 2**64",
                       ["all_reduce: stream.ptr is", str(2**64)] + stream_fix)
    expect_value_error(lambda: comm.all_reduce(untouched, stream=TorchLikeStream(-5)),
                       "a stream object's cuda_stream of -5",
                       ["all_reduce: stream.cuda_stream is -5"] + stream_fix)
    expect_type_error(lambda: comm.all_reduce(untouched, stream=TorchLikeStream(True)),
                      "a stream object's cuda_stream of True",
                      ["all_reduce: stream.cuda_stream is bool"] + stream_fix)
    check(bool((untouched == 3).all()) and bool((fused_residual == 0).all()),
          "refused streams: nothing written")
    # Streams in range still work (the host backend ignores them): ints from
    # 0 to 2**64 - 1, NumPy's integers, stream objects.
    for good in (0, 1, 2**64 - 1, np.uint64(2**64 - 1), np.int64(7), CuPyLikeStream(0),
                 TorchLikeStream(2**63)):
        try:
            check(_stream_handle(good, x) == int(getattr(good, "ptr", getattr(good, "cuda_stream",
                                                                             good))),
                  f"stream {good!r}: its value")
            ones = np.ones(8, np.float32)
            comm.all_reduce(ones, stream=good)
            check(bool((ones == size).all()), f"a call with stream {good!r}: the sum")
        except Exception as e:  # noqa: BLE001 - any error is the failure
            check(False, f"a call with stream {good!r}: {type(e).__name__}: {e}")

    # Memory the backend cannot read: device memory (__cuda_array_interface__,
    # a CUDA tensor) on the host backend is refused before the call, which
    # would read it as host memory (a segfault).
    class DeviceArray:
        """What CuPy or Numba present: device memory (at an address that is not
        mapped in host memory here)."""

        def __init__(self, shape):
            self.__cuda_array_interface__ = {"data": (0x7f0000000000, False), "shape": shape,
                                             "typestr": "<f4", "strides": None, "version": 3}

    expect_value_error(lambda: comm.all_reduce(DeviceArray((4, hidden))), "device memory inp",
                       ["all_reduce", "inp", "CUDA device memory", "backend is host"])
    expect_value_error(lambda: comm.all_reduce(x, out=DeviceArray((4, hidden))),
                       "device memory out", ["out", "CUDA device memory", "backend is host"])
    expect_value_error(lambda: comm.fused_add_rms_norm(x, residual,
                                                       DeviceArray((hidden,)), 1e-6),
                       "device memory weight", ["weight", "CUDA device memory", "backend is host"])
    expect_value_error(lambda: comm.all_reduce(StandInTensor(np.ones(8, np.float32), 0),
                                               stream=0),
                       "a CUDA tensor", ["inp", "CUDA device 0", "backend is host"])
    expect_value_error(lambda: comm.register_buffers([DeviceArray((64,))]), "a device buffer",
                       ["register_buffers", "buffer 0", "backend is host"])

    # A cuda communicator (a stand-in: the host library under a communicator
    # that says cuda, on GPU 0) refuses host memory, which its kernels cannot
    # read; another GPU's tensors; and the tensors of one call on two GPUs.
    check(comm.cuda_device == -1, f"the host backend drives no GPU: {comm.cuda_device}")

    class CudaStandIn(peerplan.Communicator):
        backend = "cuda"
        cuda_device = 0

    # A cuda communicator that names no GPU (-1, which is also host memory's
    # place) would take host arrays: refused at once.
    class NoGpuStandIn(peerplan.Communicator):
        backend = "cuda"
        cuda_device = -1

    try:
        NoGpuStandIn(comm_world, timeout_ms=20000, backend="host")
        check(False, "a cuda communicator naming no GPU was taken")
    except RuntimeError as e:
        check("names no GPU" in str(e), f"the error says the GPU is unknown: {e}")

    def ones_on(device, shape=(4, hidden)):
        return StandInTensor(np.ones(shape, np.float32), device)

    with CudaStandIn(comm_world, timeout_ms=20000, backend="host") as cuda:
        expect_value_error(lambda: cuda.all_reduce(np.ones((4, hidden), np.float32)),
                           "a NumPy array on the cuda backend",
                           ["all_reduce", "inp", "host memory", "backend is cuda"])
        expect_value_error(lambda: cuda.all_reduce(ones_on(0), out=np.ones((4, hidden), np.float32),
                                                   stream=0),
                           "a NumPy out on the cuda backend", ["out", "host memory", "cuda"])
        expect_value_error(lambda: cuda.fused_add_rms_norm(ones_on(0), ones_on(0), weight, 1e-6,
                                                           stream=0),
                           "a NumPy weight on the cuda backend", ["weight", "host memory", "cuda"])
        expect_value_error(lambda: cuda.all_reduce(ones_on(0), out=ones_on(1), stream=0),
                           "inp and out on two GPUs", ["out", "CUDA device 1", "inp", "device 0"])
        expect_value_error(lambda: cuda.all_reduce(ones_on(1), stream=0),
                           "a tensor of another GPU", ["inp", "CUDA device 1", "device 0"])
        expect_value_error(lambda: cuda.fused_add_rms_norm(ones_on(0), ones_on(0),
                                                           ones_on(1, (hidden,)), 1e-6, stream=0),
                           "a weight of another GPU", ["weight", "CUDA device 1", "device 0"])
        t = ones_on(0)
        cuda.all_reduce(t, stream=0)
        check(bool((t.array == size).all()), "a tensor of the communicator's GPU: the sum")

        # A subclass of torch.Tensor defined outside torch (a user's own) is a
        # PyTorch tensor: its GPU checked, its call on that GPU's current
        # stream (not stream 0, as through __cuda_array_interface__).
        class UserTensor(StandInTensor):
            pass

        expect_value_error(lambda: cuda.all_reduce(UserTensor(np.ones(8, np.float32), 1)),
                           "a torch.Tensor subclass on another GPU",
                           ["inp", "CUDA device 1", "device 0"])
        stream_calls.clear()
        mine = UserTensor(np.ones(8, np.float32), 0)
        try:
            cuda.all_reduce(mine)
            check(stream_calls == [0] and bool((mine.array == size).all()),
                  f"a torch.Tensor subclass: the sum on GPU 0's current stream ({stream_calls})")
        except Exception as e:  # noqa: BLE001 - any error is the failure
            check(False, f"a torch.Tensor subclass on the cuda stand-in: {type(e).__name__}: {e}")

    # A CPU tensor of a torch.Tensor subclass on the host backend; an object
    # of a torch* package that is no tensor goes through its array interface.
    class TorchPackageArray:
        __module__ = "torchvision.io"  # a torch* module, not a torch.Tensor

        def __init__(self, array):
            self.array = array

        @property
        def __array_interface__(self):
            return self.array.__array_interface__

    for make, what in ((UserTensor, "a CPU torch.Tensor subclass"),
                       (TorchPackageArray, "an array of a torch* module")):
        made = make(np.full(8, rank + 1.0, np.float32))
        try:
            comm.all_reduce(made)
            check(bool((made.array == size * (size + 1) / 2).all()), f"{what}: the sum")
        except Exception as e:  # noqa: BLE001 - any error is the failure
            check(False, f"{what}: {type(e).__name__}: {e}")

    # A PyTorch tensor on a device other than CPU and CUDA: its data_ptr() is
    # no host address. Refused, naming the device, before any call.
    for kind, index, name in (("meta", -1, "meta"), ("xpu", 0, "xpu:0"), ("mps", 0, "mps:0")):
        elsewhere = StandInTensor(np.ones(8, np.float32), index, kind)
        expect_value_error(lambda: comm.all_reduce(elsewhere), f"a tensor on {name}",
                           [f"device {name}", "CPU and CUDA"])
        expect_value_error(lambda: comm.register_buffers([elsewhere]),
                           f"a buffer on {name}", [f"device {name}"])
        check(bool((elsewhere.array == 1).all()), f"the tensor on {name} was not written")

    # Registered buffers: the extent of any element type and of negative
    # strides (the lowest address to the highest byte); (address, bytes)
    # pairs outside 0 to 2**64 - 1 refused, not wrapped.
    ones = np.ones(1000, np.float32)
    check(_buffer_region(ones[::-1], 0)[:2] == (ones.ctypes.data, 4000),
          f"reversed 1000 f32: {_buffer_region(ones[::-1], 0)[:2]}")
    pair = np.ones(2, np.float32)
    check(_buffer_region(pair[::-1], 0)[:2] == (pair.ctypes.data, 8), "reversed 2 f32: 8 bytes")
    grid = np.zeros((4, 8), np.float16)
    # Elements (1, 1), (1, 2), (3, 1), (3, 2): bytes 18 to 54 of grid.
    check(_buffer_region(grid[::-2, 1:3], 0)[:2] == (grid.ctypes.data + 18, 36),
          f"rows reversed by 2 of (4, 8) f16: {_buffer_region(grid[::-2, 1:3], 0)[:2]}")
    check(_buffer_region(StandInTensor(ones[::-1]), 0) == (ones.ctypes.data, 4000, -1),
          "a reversed PyTorch tensor: its extent, host memory")
    pool = np.zeros(4096, np.uint8)
    check(_buffer_region(pool, 0)[:2] == (pool.ctypes.data, 4096), "a uint8 pool: 4096 bytes")
    check(_buffer_region(np.zeros((3, 0), np.uint8), 0)[1] == 0, "an empty array: 0 bytes")
    try:
        comm.register_buffers([pool, ones[::-1]])
        comm.deregister_buffers()
        check(True, "a uint8 pool and a reversed view registered")
    except (TypeError, ValueError) as e:
        check(False, f"a uint8 pool and a reversed view: {e}")
    for bad, what in [((block.ctypes.data, -1), "bytes"), ((block.ctypes.data, 2**64), "bytes"),
                      ((-64, 64), "address"), ((2**64, 64), "address")]:
        expect_value_error(lambda: comm.register_buffers([bad]), f"the pair {bad}",
                           ["buffer 0", what, str(bad[0] if what == "address" else bad[1])])

    # A declaration's shape and strides: one stride per dimension, int64 values.
    D = peerplan.Declaration
    expect_value_error(lambda: D.all_reduce("a", "f32", (4, hidden), strides=(hidden,)),
                       "fewer strides than dimensions", ["strides", "(256,)", "(4, 256)"])
    expect_value_error(lambda: D.all_reduce("a", "f32", (hidden,), strides=(1, 1)),
                       "more strides than dimensions", ["strides", "(1, 1)", "(256,)"])
    expect_value_error(lambda: D.all_reduce("a", "f32", (2**64 + 1024,)),
                       "a shape past int64", ["shape", str(2**64 + 1024), "int64"])
    expect_value_error(lambda: D.all_reduce("a", "f32", (4,), strides=(-2**63 - 1,)),
                       "a stride below int64", ["strides", str(-2**63 - 1), "int64"])
    check(D.all_reduce("a", "f32", (np.int64(4), 8), strides=(np.int32(8), 1)).shape == (4, 8),
          "NumPy ints in a shape")

    # A fused declaration's weight, checked as the calls check it: a plan
    # whose weight no call may pass is refused, and the declared set stays.
    for bad_weight, what, words in (
            (np.ones(hidden, np.float16), "an f16 weight", ["f16", "256"]),
            (np.ones(hidden // 2, np.float32), "a weight of half the length", ["(128,)"]),
            (np.ones(2 * hidden, np.float32)[::2], "a strided weight", ["contiguous"]),
            (DeviceArray((hidden,)), "a device weight", ["CUDA device memory", "backend is host"])):
        expect_value_error(lambda: comm.declare([D.fused_add_rms_norm("bad", "f32", (4, hidden),
                                                                      bad_weight, 1e-6)]),
                           f"declaring {what}", ["declare", "'bad'", "weight"] + words)
    # Refused on one rank only: every rank raises at once (none waits in
    # declare for the others), this rank's message or the library's naming it.
    own_weight = weight if rank == 0 else np.ones(hidden, np.float16)
    words = ["rank 1", "'one_rank'" if rank else '"one_rank"', "weight"]
    expect_value_error(lambda: comm.declare([D.fused_add_rms_norm("one_rank", "f32", (4, hidden),
                                                                  own_weight, 1e-6)]),
                       "a weight refused on rank 1 only", words if rank == 0 else words[1:])
    check(comm.has_plan_for(x) and comm.has_plan_for(x, weight, 1e-6)
          and [p["name"] for p in comm.stats()["plans"]] == ["ar", "norm"],
          "the declared set stays after refused declarations")

    # A lookup with a weight needs eps (the fused plan's key holds both), and
    # eps needs a weight: alone, it answered for the all-reduce's plan ("ar").
    # eps=0.0 too: a falsy eps is still given.
    for lookup in (comm.has_plan_for, comm.plan_for):
        try:
            lookup(x, weight)
            check(False, f"{lookup.__name__} with a weight and no eps answered")
        except TypeError as e:
            check("eps" in str(e) and lookup.__name__ in str(e),
                  f"{lookup.__name__} without eps: {e}")
        for args, kwargs in (((), {"eps": 1e-6}), ((None, 1e-6), {}), ((), {"eps": 0.0})):
            try:
                answer = lookup(x, *args, **kwargs)
                check(False, f"{lookup.__name__} with eps and no weight answered {answer!r}")
            except TypeError as e:
                check("without a weight" in str(e) and "pass the weight" in str(e)
                      and lookup.__name__ in str(e), f"{lookup.__name__} without a weight: {e}")

    # eps that is no real number (None, text, an object): our TypeError naming
    # the call and the fix, not float()'s bare one, nor "1e-6" read as 1e-6.
    # Nothing is written. Floats, ints and NumPy scalars still work, and a NaN
    # eps is still the library's ValueError.
    eps_words = ["eps must be a real number (a float or int)", "pass the RMS norm's epsilon"]
    xe = np.ones((4, hidden), np.float32)
    residual_e = np.full((4, hidden), 3.0, np.float32)
    for bad_eps, given in ((None, "not None;"), ("abc", "not str;"), ("1e-6", "not str;"),
                           (object(), "not object;"), ([1e-6], "not list;")):
        expect_type_error(lambda: D.fused_add_rms_norm("norm", "f32", (4, hidden), weight,
                                                       bad_eps),
                          f"Declaration.fused_add_rms_norm with eps={bad_eps!r}",
                          ["peerplan: declaration 'norm': "] + eps_words + [given])
        expect_type_error(lambda: comm.fused_add_rms_norm(xe, residual_e, weight, bad_eps),
                          f"comm.fused_add_rms_norm with eps={bad_eps!r}",
                          ["peerplan: fused_add_rms_norm: "] + eps_words + [given])
        if bad_eps is not None:  # None with a weight: "a weight was given without eps" (above)
            for lookup in (comm.has_plan_for, comm.plan_for):
                expect_type_error(lambda: lookup(x, weight, bad_eps),
                                  f"{lookup.__name__} with eps={bad_eps!r}",
                                  [f"peerplan: {lookup.__name__}: "] + eps_words + [given])
    check(bool((xe == 1).all()) and bool((residual_e == 3).all()),
          "x and residual not written by the calls refused for their eps")
    check(D.fused_add_rms_norm("n", "f32", (4, hidden), weight, 0).eps == 0.0
          and D.fused_add_rms_norm("n", "f32", (4, hidden), weight, np.float32(1e-6)).eps
          == float(np.float32(1e-6)), "an int and a NumPy eps in a declaration")
    check(comm.has_plan_for(x, weight, np.float32(1e-6)) and comm.has_plan_for(x, weight, 1e-6)
          and not comm.has_plan_for(x, weight, 1), "lookups with NumPy, float and int eps")
    try:
        comm.fused_add_rms_norm(xe, residual_e, weight, np.float64(1e-6))
        check(bool((residual_e == 3 + size).all()), "a NumPy float64 eps: the fused call runs")
    except Exception as e:  # noqa: BLE001 - any error is the failure
        check(False, f"a NumPy float64 eps: {type(e).__name__}: {e}")
    expect_value_error(lambda: comm.fused_add_rms_norm(xe, residual_e, weight, float("nan")),
                       "a NaN eps", ["eps", "nan"])

    try:
        D.all_reduce("a", "f32", (4.5,))
        check(False, "a float extent was accepted")
    except TypeError as e:
        check("shape" in str(e), f"a float extent: {e}")

    # An mpi4py object that is not a communicator (Info, Group) has py2f too:
    # refused, not taken for another communicator.
    for not_a_comm in (MPI.INFO_ENV, comm_world.Get_group()):
        try:
            peerplan.Communicator(not_a_comm, timeout_ms=20000, backend="host").close()
            check(False, f"an mpi4py {type(not_a_comm).__name__} taken for a communicator")
        except TypeError as e:
            check(type(not_a_comm).__name__ in str(e), f"not a communicator: {e}")

    # A Fortran handle must be an int of MPI_Fint's range: ctypes would wrap
    # 2**32 into handle 0 (MPI_COMM_WORLD in Open MPI), and int() would take
    # "0" or 1.5.
    for handle, kind, word in ((2**32, ValueError, "int32"), (-2**31 - 1, ValueError, "int32"),
                               ("0", TypeError, "str"), (1.5, TypeError, "float")):
        try:
            peerplan.Communicator(handle, timeout_ms=20000, backend="host").close()
            check(False, f"the Fortran handle {handle!r} was taken")
        except kind as e:
            check(word in str(e) and "handle" in str(e), f"the Fortran handle {handle!r}: {e}")
        except Exception as e:  # noqa: BLE001 - another type is the failure
            check(False, f"the Fortran handle {handle!r}: {type(e).__name__}: {e}")

    # A setting given as None is unset (the default applies), not the text "None".
    try:
        with peerplan.Communicator(comm_world, timeout_ms=None, debug=None,
                                   backend="host") as unset:
            check(unset.backend == "host", "settings given as None: the others still apply")
    except Exception as e:  # noqa: BLE001 - any error is the failure
        check(False, f"settings given as None: {type(e).__name__}: {e}")

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
