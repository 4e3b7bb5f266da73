# SPDX-License-Identifier: Apache-2.0
"""The communicator over the C interface: collective calls on every rank
in the same order, as in C++ (docs/api-cpp.md)."""

import ctypes
import operator
import sys
import threading

from . import _tensors
from ._library import (CallResult, Declaration as _CDeclaration, PlanInfo, PlanStats, Stats,
                       check_mpi, enum_names, lib)

# The names of the C enums, as the library spells them ({code: name}).
ROUTES = enum_names(lib.peerplan_route_name)
PROTOCOLS = enum_names(lib.peerplan_protocol_name)
REASONS = enum_names(lib.peerplan_reason_name)

# The hot paths' functions, bound once (argtypes and restype: _library).
# all_reduce and fused_add_rms_norm call a tensor type's reader themselves
# (_readers.get(type(t)) or _reader_for(type(t)), as _tensors.read does),
# one Python frame fewer per tensor, and know from it whether the first
# tensor is PyTorch's (its current stream) without asking again.
_read = _tensors.read
_readers = _tensors._readers
_reader_for = _tensors._reader_for
_read_torch = _tensors._read_torch
_device_stream = _tensors.device_stream
_current_stream = _tensors.current_stream
_HOST = _tensors.HOST_MEMORY
_CUDA = _tensors.CUDA_MEMORY
_c_all_reduce = lib.peerplan_all_reduce
_c_fused = lib.peerplan_fused_add_rms_norm
_c_has_plan_all_reduce = lib.peerplan_has_plan_all_reduce
_c_has_plan_fused = lib.peerplan_has_plan_fused
_c_plan_all_reduce = lib.peerplan_plan_all_reduce
_c_plan_fused = lib.peerplan_plan_fused
_c_comm_rank = lib.peerplan_comm_rank
_c_comm_size = lib.peerplan_comm_size
_route_name = ROUTES.get
_reason_name = REASONS.get


_DTYPE_NAMES = {0: "f16", 1: "bf16", 2: "f32"}
# The tensors the calls write, as a read-only array's ValueError names them
# (the readers' `written`).
_INP_IN_PLACE = "all_reduce: inp (in place: out is None or inp)"
_RESIDUAL = "fused_add_rms_norm: residual"
_FUSED = 1  # Declaration.operation of the fused op (PEERPLAN_FUSED_ADD_RMS_NORM)

# Pairs of Layouts already found alike: (id, id) -> the two Layouts, kept
# alive so that their ids are not reused. Layouts come from the tensor
# readers' caches, so a loop over the same tensors compares them once.
_alike_layouts = {}
# (id of x's Layout, id of the weight's Layout) -> both: weights found right.
_weights_checked = {}


def _contiguous_strides(shape):
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


def _layout_values(layout):
    """(shape, strides) of a C Layout, contiguous strides spelled out."""
    shape = tuple(layout.shape[i] for i in range(layout.ndim))
    if layout.strides:
        return shape, tuple(layout.strides[i] for i in range(layout.ndim))
    return shape, _contiguous_strides(shape)


def _key_values(layout):
    """(shape, strides) as the library's plan key compares them: the stride
    of a size-1 dimension never moves to another element, so it is 0."""
    shape, strides = _layout_values(layout)
    return shape, tuple(0 if extent == 1 else stride for extent, stride in zip(shape, strides))


def _describe(dtype, layout):
    shape, strides = _layout_values(layout)
    return f"{_DTYPE_NAMES.get(dtype, dtype)} shape {shape} strides {strides}"


def _require_alike(call, name, first, dtype, layout, other_dtype, other_layout):
    """The C call takes one dtype and layout for every tensor it is given, so
    `name` must match `first` in dtype, shape and strides; ValueError else."""
    if other_dtype == dtype and (other_layout is layout
                                 or (id(layout), id(other_layout)) in _alike_layouts):
        return
    if other_dtype != dtype or _key_values(other_layout) != _key_values(layout):
        raise ValueError(f"peerplan: {call}: {name} is {_describe(other_dtype, other_layout)}, "
                         f"{first} is {_describe(dtype, layout)}; pass a {name} of {first}'s "
                         "dtype, shape and strides")
    if len(_alike_layouts) >= 256:
        _alike_layouts.clear()
    _alike_layouts[(id(layout), id(other_layout))] = (layout, other_layout)


def _last_extent(shape):
    return shape[-1] if shape else 1


def _require_weight(call, of, dtype, hidden, weight_dtype, weight_layout):
    """The fused op reads `hidden` (the last extent of `of`: x, or the
    declared shape) contiguous elements of that dtype from the weight;
    anything else would be read past its end."""
    shape, strides = _layout_values(weight_layout)
    elements = 1
    for extent in shape:
        elements *= extent
    contiguous = all(extent == 1 or stride == expected for extent, stride, expected
                     in zip(shape, strides, _contiguous_strides(shape)))
    if weight_dtype != dtype or elements != hidden or not contiguous:
        raise ValueError(f"peerplan: {call}: weight is {_describe(weight_dtype, weight_layout)}; "
                         f"pass {hidden} contiguous {_DTYPE_NAMES.get(dtype, dtype)} elements "
                         f"({of} last extent and dtype)")


def _require_call_weight(dtype, layout, weight_dtype, weight_layout):
    hidden = layout.shape[layout.ndim - 1] if layout.ndim else 1
    _require_weight("fused_add_rms_norm", "x's", dtype, hidden, weight_dtype, weight_layout)


class Error(RuntimeError):
    """A failed peerplan call: `code` is the C result's name (e.g. "timeout")."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class UndeclaredPlan(Error):
    pass


class Timeout(Error):
    pass


def _check(result):
    if result == 0:
        return
    code = lib.peerplan_result_string(result).decode()
    message = lib.peerplan_last_error().decode()
    kind = {"undeclared_plan": UndeclaredPlan, "timeout": Timeout}.get(code, Error)
    if code == "invalid_argument":
        raise ValueError(message)
    raise kind(code, message)


_STREAM_FIX = ("pass a cudaStream_t as an int from 0 to 2**64 - 1 (0: the default stream), a "
               "stream object (torch.cuda.Stream, CuPy's or Numba's) or None (PyTorch's current "
               "stream)")


def _stream_value(call, what, value):
    """`value` (the stream argument, or the handle attribute of a stream
    object: `what` names it) as a cudaStream_t int. ctypes would wrap an
    int outside 0 to 2**64 - 1 silently (2**64 into 0, the default stream;
    2**70 into NULL) and take True as 1 (cudaStreamLegacy): ValueError and
    TypeError instead, naming `call` and `what`."""
    if not isinstance(value, bool):
        try:
            handle = operator.index(value)
        except TypeError:
            pass
        else:
            if 0 <= handle < 2**64:
                return handle
            raise ValueError(f"peerplan: {call}: {what} is {handle}, outside a cudaStream_t "
                             f"(0 to 2**64 - 1); {_STREAM_FIX}")
    raise TypeError(f"peerplan: {call}: {what} is {type(value).__name__} {value!r}, not a CUDA "
                    f"stream; {_STREAM_FIX}")


def _stream_handle(stream, tensor, call="stream"):
    """A cudaStream_t as an int: the given stream (a torch.cuda.Stream, an
    object with .cuda_stream, .ptr or .handle, or an int from 0 to 2**64 -
    1, not a bool), else for PyTorch CUDA tensors the current stream, else 0
    (the default stream). Anything else raises TypeError or ValueError
    naming `call` and the stream argument."""
    if stream is None:
        return _current_stream(tensor)
    if type(stream) is int and 0 <= stream < 2**64:  # the common case, checked inline
        return stream
    if isinstance(stream, int):  # a bool, an int out of range, an int subclass
        return _stream_value(call, "stream", stream)
    for attribute in ("cuda_stream", "ptr", "handle"):
        if hasattr(stream, attribute):
            value = getattr(stream, attribute)
            # Numba's handle is a ctypes c_void_p, whose value is None for stream 0.
            value = getattr(value, "value", value)
            if value is None:
                value = 0
            return _stream_value(call, f"stream.{attribute}", value)
    return _stream_value(call, "stream", stream)  # an integer-like object (NumPy's), else TypeError


def _buffer_region(buffer, index):
    """(address, bytes, place) of a tensor's extent in memory (any element
    type; 0 bytes when empty: the library names the empty buffer), or of an
    (address, bytes) pair (place None: not known)."""
    if isinstance(buffer, tuple):
        if len(buffer) != 2 or not all(isinstance(v, int) for v in buffer):
            raise TypeError(f"peerplan: buffer {index} is a tuple but not (address, bytes) ints")
        for what, value in zip(("address", "bytes"), buffer):
            if not 0 <= value < 2**64:  # ctypes would wrap it silently
                raise ValueError(f"peerplan: register_buffers: buffer {index}'s {what} is "
                                 f"{value}; pass a value from 0 to 2**64 - 1")
        return buffer[0], buffer[1], None
    return _tensors.region(buffer)


def _int64_values(values, what, name):
    """`values` (a declaration's shape or strides) as a tuple of ints, each
    in int64: ctypes would wrap a larger one silently."""
    try:
        values = tuple(operator.index(v) for v in values)
    except TypeError:
        raise TypeError(f"peerplan: declaration {name!r}: {what} must be a sequence of ints, "
                        f"not {values!r}") from None
    for value in values:
        if not -2**63 <= value < 2**63:
            raise ValueError(f"peerplan: declaration {name!r}: {what} {values} holds {value}, "
                             "outside int64 (-2**63 to 2**63 - 1)")
    return values


def _eps_value(call, eps):
    """eps as the C float the fused op and its plan key take, from a real
    number (a float, an int, a NumPy scalar). None, text and other objects
    raise TypeError naming `call`: float() alone would say neither the call
    nor the fix (and would read the text "1e-6" as a number). A NaN or
    negative eps is the library's to refuse (ValueError)."""
    if not isinstance(eps, (str, bytes, bytearray)):
        try:
            return float(eps)
        except (TypeError, ValueError):
            pass
    given = "None" if eps is None else type(eps).__name__
    raise TypeError(f"peerplan: {call}: eps must be a real number (a float or int), not {given}; "
                    "pass the RMS norm's epsilon, e.g. 1e-6")


def _fused_key_eps(call, weight, eps):
    """A fused plan's key holds the weight's address and eps: a lookup gives
    both (the fused op) or neither (the all-reduce, returning None). eps
    alone would answer silently for the all-reduce's plan."""
    if weight is None:
        if eps is not None:
            raise TypeError(f"peerplan: {call}: eps was given without a weight; the fused op's "
                            "plan is keyed by both: pass the weight too (or neither, for the "
                            "all-reduce)")
        return None
    if eps is None:
        raise TypeError(f"peerplan: {call}: a weight was given without eps; the fused op's plan "
                        "is keyed by both: pass eps too (or neither, for the all-reduce)")
    return _eps_value(call, eps)


def _memory_name(place):
    if place == _HOST:
        return "host memory"
    return "CUDA device memory" if place == _CUDA else f"the memory of CUDA device {place}"


class Declaration:
    """One plan to declare. all_reduce(name, dtype, shape) or
    fused_add_rms_norm(name, dtype, shape, weight, eps); dtype is "f16",
    "bf16" or "f32"; strides (elements) optional."""

    _DTYPES = {"f16": 0, "float16": 0, "bf16": 1, "bfloat16": 1, "f32": 2, "float32": 2}

    def __init__(self, name, operation, dtype, shape, strides=None, weight=None, eps=0.0):
        if not isinstance(name, str):
            raise ValueError(f"peerplan: a declaration's name must be a str, not "
                             f"{type(name).__name__}")
        if dtype not in self._DTYPES:
            raise ValueError(f"peerplan: dtype {dtype!r}; use one of {sorted(self._DTYPES)}")
        self.name = name
        self.operation = operation
        self.dtype = self._DTYPES[dtype]
        self.shape = _int64_values(shape, "shape", name)
        self.strides = _int64_values(strides, "strides", name) if strides is not None else None
        if self.strides is not None and len(self.strides) != len(self.shape):
            raise ValueError(f"peerplan: declaration {name!r}: strides {self.strides} give "
                             f"{len(self.strides)} values for the {len(self.shape)} dimensions of "
                             f"shape {self.shape}; give one stride per dimension")
        self.weight = weight
        self.eps = _eps_value(f"declaration {name!r}", eps)

    @classmethod
    def all_reduce(cls, name, dtype, shape, strides=None):
        return cls(name, 0, dtype, shape, strides)

    @classmethod
    def fused_add_rms_norm(cls, name, dtype, shape, weight, eps, strides=None):
        return cls(name, _FUSED, dtype, shape, strides, weight, eps)


def _world_handle():
    """MPI_COMM_WORLD's Fortran handle: through mpi4py when it is there,
    else from the library, which initialises MPI (and finalises it at exit)."""
    try:
        from mpi4py import MPI

        return MPI.COMM_WORLD.py2f()
    except ImportError:
        import atexit

        world = ctypes.c_int()
        _check(lib.peerplan_mpi_world(ctypes.byref(world)))
        atexit.register(lib.peerplan_mpi_finalize)
        return world.value


def _fortran_handle(value):
    """`value` as an MPI_Fint (a C int): ctypes would wrap a larger int
    silently, into another communicator's handle."""
    try:
        handle = operator.index(value)
    except TypeError:
        raise TypeError(f"peerplan: comm must be an mpi4py communicator, a Fortran handle (int) "
                        f"or None, not {type(value).__name__}") from None
    if not -2**31 <= handle < 2**31:
        raise ValueError(f"peerplan: the Fortran communicator handle {handle} is outside int32 "
                         "(-2**31 to 2**31 - 1); pass MPI_Comm_c2f of a live communicator")
    return handle


def _comm_handle(comm):
    """The Fortran handle of an mpi4py communicator, or `comm` as an int."""
    if hasattr(comm, "py2f"):
        # mpi4py's Info, Group, Datatype... have py2f too: their handle read
        # as a communicator's names another communicator, silently.
        MPI = sys.modules.get("mpi4py.MPI")
        if MPI is not None and not isinstance(comm, MPI.Comm):
            raise TypeError(f"peerplan: comm is an mpi4py {type(comm).__name__}, not an "
                            "mpi4py communicator (MPI.Comm)")
        return comm.py2f()
    return _fortran_handle(comm)


class Communicator:
    """peerplan.Communicator(comm=None, **config): collective. `comm`: an
    mpi4py communicator, a Fortran handle (int), or None for MPI_COMM_WORLD
    (without mpi4py the library initialises MPI). Settings are PEERPLAN_*
    names without the prefix, lower case: timeout_ms=5000, backend="host",
    debug="INFO"."""

    def __init__(self, comm=None, **config):
        if comm is None:
            handle = _world_handle()
        else:
            handle = _comm_handle(comm)
        check_mpi()  # mpi4py, if it is imported, must run on the library's MPI
        cfg = ctypes.c_void_p()
        _check(lib.peerplan_config_create(ctypes.byref(cfg)))
        try:
            for key, value in config.items():
                if value is None:  # unset: the default (or the environment) applies
                    continue
                if isinstance(value, bool):
                    value = int(value)
                _check(lib.peerplan_config_set(cfg, f"PEERPLAN_{key.upper()}".encode(),
                                               str(value).encode()))
            self._handle = ctypes.c_void_p()
            _check(lib.peerplan_comm_create_f(handle, cfg, ctypes.byref(self._handle)))
        finally:
            lib.peerplan_config_destroy(cfg)
        self._declared = []  # keeps the declarations' weights alive
        # stats() reads several values of the library's per-handle snapshot,
        # which another thread's stats() would replace midway.
        self._stats_lock = threading.Lock()
        # The memory the backend's calls read: host memory, or the memory of
        # the GPU the library drives (_CUDA: device memory that names no
        # device, whose kind alone can be checked).
        self._cuda = self.backend == "cuda"
        self._device = self.cuda_device if self._cuda else None
        if self._cuda and self._device < 0:  # -1 is also _HOST: never take it as a GPU
            raise RuntimeError(f"peerplan: the cuda backend names no GPU (cuda_device "
                               f"{self._device}); the library and the package do not match")
        self._places = {_CUDA, self._device} if self._cuda else {_HOST}

    def _check_place(self, call, name, place, first_place=None, first=None):
        """ValueError unless `name`'s memory (`place`) suits the backend and
        device, and is on `first`'s device when both name one."""
        if first is not None and place >= 0 and first_place >= 0 and place != first_place:
            raise ValueError(f"peerplan: {call}: {name} is in {_memory_name(place)}, {first} in "
                             f"{_memory_name(first_place)}; pass tensors of one device")
        if place in self._places:
            return
        if not self._cuda:
            backend, wanted = "host", "host memory (NumPy arrays, CPU tensors)"
        elif place == _HOST:
            backend, wanted = "cuda", "device memory (its kernels cannot read host memory)"
        else:
            backend = f"cuda on CUDA device {self._device}"
            wanted = f"tensors on CUDA device {self._device}"
        raise ValueError(f"peerplan: {call}: {name} is in {_memory_name(place)}, but the "
                         f"communicator's backend is {backend}; pass {wanted}")

    # -- queries
    @property
    def c_handle(self):
        """The C interface's peerplan_comm_t of this communicator, as an int
        (read-only): for calling libpeerplan directly, e.g. through ctypes.
        The handle lives as long as this object (close() ends the
        communicator's calls, not the handle)."""
        handle = self._handle
        return (handle.value or 0) if handle is not None else 0

    @property
    def rank(self):
        return _c_comm_rank(self._handle)

    @property
    def size(self):
        return _c_comm_size(self._handle)

    @property
    def backend(self):
        return lib.peerplan_comm_backend(self._handle).decode()

    @property
    def cuda_device(self):
        """The CUDA device this rank drives (PEERPLAN_DEVICE / device=, else
        the local rank modulo the GPUs it sees): tensors passed to calls must
        be on it. -1 on the host backend."""
        return lib.peerplan_comm_cuda_device(self._handle)

    @property
    def p2p_enabled(self):
        return bool(lib.peerplan_comm_p2p_enabled(self._handle))

    @property
    def p2p_disabled_reason(self):
        return lib.peerplan_comm_p2p_disabled_reason(self._handle).decode()

    # -- plans
    def declare(self, declarations):
        """Collective: replaces the declared set. A fused declaration's weight
        is checked as the calls check it (dtype, length, contiguity, memory):
        a weight refused on any rank fails the declare on every rank at once,
        as the library's own checks do, and raises its ValueError here."""
        declarations = list(declarations)
        array = (_CDeclaration * max(len(declarations), 1))()
        keep, refusal = [], None
        for i, d in enumerate(declarations):
            shape = (ctypes.c_int64 * max(len(d.shape), 1))(*d.shape)
            strides = (ctypes.c_int64 * max(len(d.shape), 1))(*d.strides) if d.strides else None
            keep += [shape, strides]
            array[i].name = d.name.encode()
            array[i].operation = d.operation
            array[i].dtype = d.dtype
            array[i].layout.ndim = len(d.shape)
            array[i].layout.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
            array[i].layout.strides = (ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
                                       if strides is not None else None)
            array[i].weight, problem = self._declared_weight(d)
            refusal = refusal or problem
            array[i].eps = d.eps
        try:
            _check(lib.peerplan_declare(self._handle, array, len(declarations)))
        except ValueError:
            if refusal is None:
                raise
            # The library's message here is of the null weight sent in its place.
            raise refusal from None
        self._declared = declarations

    def _declared_weight(self, declaration):
        """(address, refusal) of a declaration's weight. A fused one that a
        call would refuse gives (None, the error): the library refuses a
        null weight on every rank together, where raising here alone would
        leave the other ranks in declare until the timeout."""
        weight = declaration.weight
        if weight is None or declaration.operation != _FUSED:
            return (_tensors.weight_pointer(weight) if weight is not None else None), None
        call = f"declare: declaration {declaration.name!r}"
        try:
            ptr, dtype, layout, place = _read(weight)
            _require_weight(call, "the declared shape's", declaration.dtype,
                            _last_extent(declaration.shape), dtype, layout)
            self._check_place(call, "weight", place)
        except (TypeError, ValueError) as refusal:
            return None, refusal
        return ptr, None

    def has_plan_for(self, tensor, weight=None, eps=None):
        """Whether a call on `tensor` (with `weight` and `eps`: the fused op)
        would find a declared plan. Raises only for a tensor or weight
        peerplan does not take, or one of weight and eps without the other
        (TypeError)."""
        _, dtype, layout, _ = _read(tensor)
        eps = _fused_key_eps("has_plan_for", weight, eps)
        if weight is None:
            return bool(_c_has_plan_all_reduce(self._handle, dtype, layout))
        return bool(_c_has_plan_fused(self._handle, dtype, layout, _read(weight)[0], eps))

    def plan_for(self, tensor, weight=None, eps=None):
        """(route, reason, index) of the declared plan (with `weight` and
        `eps`: the fused op's); UndeclaredPlan if none. One of weight and
        eps without the other raises TypeError."""
        _, dtype, layout, _ = _read(tensor)
        eps = _fused_key_eps("plan_for", weight, eps)
        info = PlanInfo()
        if weight is None:
            _check(_c_plan_all_reduce(self._handle, dtype, layout, info))
        else:
            _check(_c_plan_fused(self._handle, dtype, layout, _read(weight)[0], eps, info))
        return ROUTES.get(info.route, "unknown"), REASONS.get(info.reason, "unknown"), info.index

    # -- collectives
    def all_reduce(self, inp, out=None, stream=None):
        """out = sum over ranks of inp (in place when out is None or inp).
        Returns (route, reason)."""
        in_place = out is None or out is inp
        reader = _readers.get(type(inp)) or _reader_for(type(inp))
        # Written only when it is the out (`written`: what a read-only error names).
        ptr, dtype, layout, place = reader(inp, in_place and _INP_IN_PLACE)
        if place not in self._places:
            self._check_place("all_reduce", "inp", place)
        if in_place:
            out_ptr = ptr
        else:
            out_ptr, out_dtype, out_layout, out_place = (
                _readers.get(type(out)) or _reader_for(type(out)))(out, "all_reduce: out")
            if out_place != place:
                self._check_place("all_reduce", "out", out_place, place, "inp")
            _require_alike("all_reduce", "out", "inp", dtype, layout, out_dtype, out_layout)
        if stream is None:
            stream = _device_stream(place) if reader is _read_torch and place >= 0 else 0
        else:
            stream = _stream_handle(stream, inp, "all_reduce")
        result = CallResult()  # per call: another thread may call next (docs/api-cpp.md: one thread at a time)
        status = _c_all_reduce(self._handle, ptr, out_ptr, dtype, layout, stream, result)
        if status:
            _check(status)
        return _route_name(result.route, "unknown"), _reason_name(result.reason, "unknown")

    def fused_add_rms_norm(self, x, residual, weight, eps, stream=None):
        """residual = allreduce(x) + residual; x = rmsnorm(residual) * weight.
        Returns (route, reason)."""
        reader = _readers.get(type(x)) or _reader_for(type(x))
        ptr, dtype, layout, place = reader(x, "fused_add_rms_norm: x")
        if place not in self._places:
            self._check_place("fused_add_rms_norm", "x", place)
        residual_ptr, residual_dtype, residual_layout, residual_place = (
            _readers.get(type(residual)) or _reader_for(type(residual)))(residual, _RESIDUAL)
        if residual_place != place:
            self._check_place("fused_add_rms_norm", "residual", residual_place, place, "x")
        if residual_layout is not layout or residual_dtype != dtype:
            _require_alike("fused_add_rms_norm", "residual", "x", dtype, layout, residual_dtype,
                           residual_layout)
        # The weight's address is read every call: the plan key holds it.
        weight_ptr, weight_dtype, weight_layout, weight_place = (
            _readers.get(type(weight)) or _reader_for(type(weight)))(weight, False)
        if weight_place != place:
            self._check_place("fused_add_rms_norm", "weight", weight_place, place, "x")
        if (id(layout), id(weight_layout)) not in _weights_checked:
            _require_call_weight(dtype, layout, weight_dtype, weight_layout)
            if len(_weights_checked) >= 256:
                _weights_checked.clear()
            _weights_checked[(id(layout), id(weight_layout))] = (layout, weight_layout)
        elif weight_dtype != dtype:
            _require_call_weight(dtype, layout, weight_dtype, weight_layout)
        if type(eps) is not float:  # a float as it is: no frame more on the hot path
            eps = _eps_value("fused_add_rms_norm", eps)
        if stream is None:
            stream = _device_stream(place) if reader is _read_torch and place >= 0 else 0
        else:
            stream = _stream_handle(stream, x, "fused_add_rms_norm")
        result = CallResult()
        status = _c_fused(self._handle, ptr, residual_ptr, weight_ptr, eps, dtype, layout, stream,
                          result)
        if status:
            _check(status)
        return _route_name(result.route, "unknown"), _reason_name(result.reason, "unknown")

    # -- registered buffers (pull mode's zero copy)
    def register_buffers(self, buffers):
        """Collective: this rank's device buffers that the peers may read in
        place in pull mode (an all-reduce input lying wholly inside one: no
        staging copy), e.g. a CUDA graph's inputs. Each is a tensor (its
        extent in memory) or an (address, bytes) pair. Registrations add up;
        the memory must stay allocated until deregister_buffers() or close()."""
        regions = [_buffer_region(buffer, i) for i, buffer in enumerate(buffers)]
        for i, (_, _, place) in enumerate(regions):
            if place is not None:
                self._check_place("register_buffers", f"buffer {i}", place)
        data = (ctypes.c_void_p * max(len(regions), 1))(*(address for address, _, _ in regions))
        sizes = (ctypes.c_size_t * max(len(regions), 1))(*(size for _, size, _ in regions))
        _check(lib.peerplan_register_buffers(self._handle, data, sizes, len(regions)))

    def deregister_buffers(self):
        """Collective: forgets every registered buffer."""
        _check(lib.peerplan_deregister_buffers(self._handle))

    # -- counters and lifetime
    def stats(self):
        """The counters as a dict; "plans": one dict per declared plan;
        "undeclared": the most frequent undeclared keys (track_undeclared=N),
        most calls first, as {"key", "calls", "overcount"} dicts."""
        with self._stats_lock:
            s = Stats()
            _check(lib.peerplan_stats(self._handle, ctypes.byref(s)))
            plans = []
            for i in range(s.plans):
                p = PlanStats()
                _check(lib.peerplan_plan_stats(self._handle, i, ctypes.byref(p)))
                plans.append({"name": p.name.decode(), "route": ROUTES.get(p.route, "unknown"),
                              "reason": REASONS.get(p.reason, "unknown"), "hits": p.hits,
                              "fallbacks": p.fallbacks,
                              "protocol": PROTOCOLS.get(p.protocol, "unknown"),
                              "launch": p.launch.decode() if p.launch else ""})
            undeclared = self._undeclared_keys()
        return {
            "p2p_calls": s.p2p_calls,
            "zero_copy_calls": s.zero_copy_calls,
            "fallback_undeclared": s.fallback_undeclared,
            "fallback_over_cutoff": s.fallback_over_cutoff,
            "fallback_p2p_disabled": s.fallback_p2p_disabled,
            "fallback_node_layout": s.fallback_node_layout,
            "plans": plans,
            "undeclared": undeclared,
        }

    def _undeclared_keys(self):
        """The undeclared keys of the snapshot peerplan_stats just took."""
        count = ctypes.c_size_t()
        _check(lib.peerplan_undeclared_key_count(self._handle, ctypes.byref(count)))
        keys = []
        # Fits all but long 8-D keys, which are read again at their length.
        text = ctypes.create_string_buffer(256)
        length, calls, overcount = ctypes.c_size_t(), ctypes.c_uint64(), ctypes.c_uint64()
        for i in range(count.value):
            args = (ctypes.byref(length), ctypes.byref(calls), ctypes.byref(overcount))
            result = lib.peerplan_undeclared_key(self._handle, i, text, len(text), *args)
            if result != 0 and length.value >= len(text):  # too small: `length` says how long
                text = ctypes.create_string_buffer(length.value + 1)
                result = lib.peerplan_undeclared_key(self._handle, i, text, len(text), *args)
            _check(result)
            keys.append({"key": text.value.decode(), "calls": calls.value,
                         "overcount": overcount.value})
        return keys

    def reset_stats(self):
        _check(lib.peerplan_reset_stats(self._handle))

    def close(self):
        """Collective, idempotent."""
        if self._handle:
            _check(lib.peerplan_comm_close(self._handle))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle:
            lib.peerplan_comm_destroy(handle)  # local; close() is the collective part
            self._handle = None
