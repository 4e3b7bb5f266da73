# SPDX-License-Identifier: Apache-2.0
"""What peerplan needs to know of a tensor: its address, dtype, shape and
element strides. PyTorch tensors are read directly (data_ptr(), shape,
stride(), dtype): building __cuda_array_interface__ costs microseconds on
every call. NumPy arrays through their attributes (dtype, shape, strides,
flags) and their data address (_numpy_pointer). Anything else through
__cuda_array_interface__ (CuPy, Numba) or the NumPy array interface.

The hot path is read(tensor, written) -> (address, dtype, Layout, place),
where place says whose memory the tensor is in (HOST_MEMORY, a CUDA device
index, or CUDA_MEMORY: device memory of a device the object does not say),
so that a call can refuse memory its backend cannot read. What follows from
a tensor's dtype, shape and strides alone (the peerplan dtype, the ctypes
Layout and its shape and stride arrays) is built once per distinct
(dtype, shape, strides) and kept in a small cache (at most CACHE_LIMIT
entries; a full cache is emptied, not searched); the address and the
read-only flag are read on every call, never cached: an object's address
can change (a resized array, a tensor given new storage), and another
tensor of the same layout has another one. A read-only array is refused
only where `written` (the call writes it): `written` is then the call and
argument ("all_reduce: out") that the ValueError names, or True."""

import ctypes
import sys

from ._library import Layout

F16, BF16, F32 = 0, 1, 2

# NumPy typestrs (little-endian) of the element types; bf16 has none in
# NumPy itself: ml_dtypes' bfloat16 reports "<V2" and names itself.
_TYPESTR = {"<f2": F16, "<f4": F32}
_TORCH = {"torch.float16": F16, "torch.bfloat16": BF16, "torch.float32": F32}
ITEMSIZE = {F16: 2, BF16: 2, F32: 4}

# Where a tensor's memory is, besides a CUDA device index (>= 0):
HOST_MEMORY = -1
CUDA_MEMORY = -2  # device memory, device unknown (__cuda_array_interface__ names none)

CACHE_LIMIT = 256
# key -> (dtype, Layout, shape array, strides array); one dict per kind of
# tensor, so that keys of different libraries are never compared. Entries
# are never modified: a caller holding one is safe while another thread
# empties the dict.
_numpy_layouts = {}
_torch_layouts = {}
_interface_layouts = {}
# type(tensor) -> its reader (below)
_readers = {}


def _remember(cache, key, entry):
    if len(cache) >= CACHE_LIMIT:
        cache.clear()
    cache[key] = entry
    return entry


def _layout_entry(dtype, shape, strides):
    """(dtype, Layout, shape array, strides array): the Layout points into the
    arrays, which the entry keeps alive. `strides` None: contiguous."""
    ndim = len(shape)
    shape_array = (ctypes.c_int64 * max(ndim, 1))(*shape)
    strides_array = (ctypes.c_int64 * max(ndim, 1))(*strides) if strides is not None else None
    return dtype, Layout(ndim, shape_array, strides_array), shape_array, strides_array


class TensorInfo:
    """A tensor's address, peerplan dtype and Layout (describe())."""

    __slots__ = ("ptr", "dtype", "layout")

    def __init__(self, ptr, dtype, layout):
        self.ptr = ptr
        self.dtype = dtype
        self.layout = layout


# -- PyTorch

_torch_dtypes = None  # torch.dtype -> peerplan dtype, built at the first torch tensor


def _torch_dtype_map():
    global _torch_dtypes
    torch = sys.modules.get("torch")  # a torch tensor exists: torch is imported
    mapping = {}
    for name, dtype in _TORCH.items():
        value = getattr(torch, name.split(".", 1)[1], None) if torch is not None else None
        if value is not None:
            mapping[value] = dtype
    _torch_dtypes = mapping
    return mapping


def _torch_entry(tensor):
    dtypes = _torch_dtypes if _torch_dtypes is not None else _torch_dtype_map()
    dtype = dtypes.get(tensor.dtype)
    if dtype is None:
        dtype = _TORCH.get(str(tensor.dtype))
    if dtype is None:
        raise TypeError(f"peerplan: unsupported tensor dtype {tensor.dtype}; use float16, "
                        "bfloat16 or float32")
    return _layout_entry(dtype, tuple(tensor.shape), tuple(tensor.stride()))


def _host_place(tensor):
    """HOST_MEMORY for a PyTorch tensor that is not a CUDA one if it is a CPU
    one; ValueError for any other device (meta, xpu, mps, ...), whose
    data_ptr() is no address that either backend can read."""
    device = tensor.device
    if device.type != "cpu":
        raise ValueError(f"peerplan: a PyTorch tensor on device {device}; peerplan reads CPU and "
                         "CUDA tensors only")
    return HOST_MEMORY


def _read_torch(tensor, written=False):
    key = (tensor.dtype, tensor.shape, tensor.stride())
    entry = _torch_layouts.get(key)
    if entry is None:
        entry = _remember(_torch_layouts, key, _torch_entry(tensor))
    # get_device(): tensor.device.index as an int, without building a torch.device.
    return (tensor.data_ptr(), entry[0], entry[1],
            tensor.get_device() if tensor.is_cuda else _host_place(tensor))


# The raw cudaStream_t of the current stream of a CUDA tensor's device.
# torch.cuda.current_stream(index).cuda_stream, the documented way, builds a
# torch.cuda.Stream object on every call: 1.8 us on the GPU host (torch
# 2.11, python/benchmarks/torch_accessors.py), most of the 3 us a Python
# call may add over C++. torch._C._cuda_getCurrentRawStream(index) returns
# the same int in 0.1 us; it is private (Inductor's generated code calls
# it), so it is used only where it exists and agrees with the documented
# call on the first tensor of each device, else the documented call.
_stream_of_device = {}  # device index -> function(index) -> int


def _stream_reader(index):
    torch = sys.modules["torch"]
    documented = lambda i: torch.cuda.current_stream(i).cuda_stream  # noqa: E731
    raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
    reader = documented
    if raw is not None:
        try:
            if raw(index) == documented(index):
                reader = raw
        except Exception:  # pragma: no cover - a torch whose private call changed
            pass
    _stream_of_device[index] = reader
    return reader


def device_stream(index):
    """The current PyTorch stream (an int) of CUDA device `index`."""
    reader = _stream_of_device.get(index) or _stream_reader(index)
    return reader(index)


def torch_stream(tensor):
    """The current stream (an int) of a PyTorch tensor's device when it is a
    CUDA tensor, else 0 (the default stream)."""
    if not tensor.is_cuda:
        return 0
    return device_stream(tensor.get_device())


def current_stream(tensor):
    """The current PyTorch stream of `tensor`'s device (an int) when it is a
    PyTorch CUDA tensor, else 0 (the default stream)."""
    cls = type(tensor)
    if (_readers.get(cls) or _reader_for(cls)) is not _read_torch:
        return 0
    return torch_stream(tensor)


# -- NumPy arrays (exactly numpy.ndarray; subclasses go through the interface)


def _interface_pointer(array):
    return array.__array_interface__["data"][0]


def _numpy_pointer_reader(numpy):
    """The cheapest reader of an ndarray's data address that agrees with its
    array interface here. __array_interface__ builds a dict of six entries
    on every call (about 1 us; two thirds of describing an array); the
    address is also the first field after the object header of NumPy's
    array struct (PyArrayObject_fields.data: what the C API's PyArray_DATA
    reads, compiled into every extension module, so part of NumPy's ABI),
    which ctypes reads in about 0.2 us. Used on CPython only (id() is the
    address) and only after it gave the interface's address for a set of
    probe arrays (offsets, views, transposes, empty); else the interface."""
    if sys.implementation.name != "cpython":
        return _interface_pointer
    offset = object.__basicsize__  # sizeof(PyObject): the header before `data`
    from_address = ctypes.c_void_p.from_address

    def struct_pointer(array):
        return from_address(id(array) + offset).value or 0

    try:
        base = numpy.arange(96, dtype=numpy.float32)
        probes = [base, base[5:], base.reshape(8, 12)[2:, 3:7], base.reshape(8, 12).T,
                  numpy.zeros(0, numpy.float16), numpy.ones((3, 4), numpy.float16)[::2, 1:]]
        if all(type(p) is numpy.ndarray and struct_pointer(p) == _interface_pointer(p)
               for p in probes):
            return struct_pointer
    except Exception:  # noqa: BLE001 - any doubt: the interface
        pass
    return _interface_pointer


_numpy_pointer = None  # chosen when the first ndarray is read


def _read_only(written):
    """The ValueError of a read-only array that a call writes: `written` is
    the call and argument ("all_reduce: out"), or True (not known)."""
    what = "the array" if written is True else written
    return ValueError(f"peerplan: {what} is read-only, and the call writes it; pass a writable "
                      "array (NumPy: arr.flags.writeable is False; np.array(arr) is a writable "
                      "copy)")


def _read_numpy(array, written=False):
    if written and not array.flags.writeable:
        raise _read_only(written)
    key = (array.dtype, array.shape, array.strides)
    entry = _numpy_layouts.get(key)
    if entry is None:
        # What the array interface says of this (dtype, shape, strides): the
        # same validation and the same layout as for any other array.
        entry = _remember(_numpy_layouts, key,
                          _interface_entry(array.__array_interface__, "__array_interface__"))
    return _numpy_pointer(array), entry[0], entry[1], HOST_MEMORY


# -- __cuda_array_interface__ and the NumPy array interface


def _interface_dtype(interface, name):
    typestr = interface["typestr"]
    dtype = _TYPESTR.get(typestr)
    if dtype is None and typestr == "<V2":
        descr = interface.get("descr")
        if descr and "bfloat16" in str(descr):
            dtype = BF16
    if dtype is None:
        raise TypeError(f"peerplan: unsupported element type {typestr!r} in {name}; use "
                        "float16, bfloat16 or float32")
    return dtype


def _interface_entry(interface, name, dtype=None):
    if dtype is None:
        dtype = _interface_dtype(interface, name)
    shape = tuple(interface["shape"])
    strides = interface.get("strides")
    if strides is not None:
        itemsize = ITEMSIZE[dtype]
        if any(s % itemsize for s in strides):
            raise ValueError("peerplan: strides must be whole elements")
        strides = tuple(s // itemsize for s in strides)  # bytes -> elements
    return _layout_entry(dtype, shape, strides)


def _array_interface(tensor):
    """(interface, its name, place) of an object with the CUDA or the NumPy
    array interface; TypeError for anything else."""
    interface = getattr(tensor, "__cuda_array_interface__", None)
    if interface is not None:
        return interface, "__cuda_array_interface__", CUDA_MEMORY
    interface = getattr(tensor, "__array_interface__", None)
    if interface is None:
        raise TypeError(f"peerplan: {type(tensor).__name__} is not a tensor peerplan can use "
                        "(PyTorch, __cuda_array_interface__ or the NumPy array interface)")
    return interface, "__array_interface__", HOST_MEMORY


def _read_interface(tensor, written=False):
    interface, name, place = _array_interface(tensor)
    # data[1] is the read-only flag of both interfaces.
    if written and (interface.get("readonly") or interface["data"][1]):
        raise _read_only(written)
    dtype = _interface_dtype(interface, name)
    shape = interface["shape"]
    strides = interface.get("strides")
    key = (dtype, shape if type(shape) is tuple else tuple(shape),
           strides if strides is None or type(strides) is tuple else tuple(strides))
    entry = _interface_layouts.get(key)
    if entry is None:
        entry = _remember(_interface_layouts, key, _interface_entry(interface, name, dtype))
    return interface["data"][0], dtype, entry[1], place


# -- dispatch


def _is_torch_tensor_type(cls):
    """Whether `cls` is torch.Tensor or a subclass of it (nn.Parameter, a
    user's own). A torch tensor exists only once torch is imported: looked
    up in sys.modules, never imported here."""
    tensor_type = getattr(sys.modules.get("torch"), "Tensor", None)
    return isinstance(tensor_type, type) and issubclass(cls, tensor_type)


def _reader_for(cls):
    """The reader of a tensor type, kept per type: PyTorch's (torch.Tensor
    and its subclasses), NumPy's (numpy.ndarray itself), else the
    interfaces'."""
    global _numpy_pointer
    numpy = sys.modules.get("numpy")
    if _is_torch_tensor_type(cls):
        reader = _read_torch
    elif numpy is not None and cls is getattr(numpy, "ndarray", None):
        if _numpy_pointer is None:
            _numpy_pointer = _numpy_pointer_reader(numpy)
        reader = _read_numpy
    else:
        reader = _read_interface
    return _remember(_readers, cls, reader)


def read(tensor, written=False):
    """(address, peerplan dtype, Layout, place) of a PyTorch tensor, or of
    any object with the CUDA or NumPy array interface. TypeError for a type
    or dtype peerplan does not take, ValueError for strides that are not
    whole elements, or for a read-only array when `written` (True, or the
    call and argument that the error names: "all_reduce: out")."""
    cls = type(tensor)
    reader = _readers.get(cls)
    if reader is None:
        reader = _reader_for(cls)
    return reader(tensor, written)


def describe(tensor):
    """TensorInfo of a PyTorch tensor, or of any object with the CUDA or
    NumPy array interface."""
    ptr, dtype, layout, _ = read(tensor)
    return TensorInfo(ptr, dtype, layout)


def weight_pointer(weight):
    """The address of a norm weight (the plan key holds the address)."""
    return read(weight)[0]


def _typestr_itemsize(typestr):
    """The bytes of one element of an array-interface typestr ("<f4", "|u1",
    "<M8[ns]"); "U" counts characters of 4 bytes."""
    digits = ""
    for c in typestr[2:]:
        if not c.isdigit():
            break
        digits += c
    return int(digits) * (4 if typestr[1:2] == "U" else 1)


def region(tensor):
    """(address of its lowest byte, bytes, place): the memory that a
    tensor's elements span, of any element type and strides (negative ones
    included); 0 bytes when it has no element."""
    cls = type(tensor)
    if (_readers.get(cls) or _reader_for(cls)) is _read_torch:
        itemsize = tensor.element_size()
        address, shape = tensor.data_ptr(), tuple(tensor.shape)
        strides = tuple(s * itemsize for s in tensor.stride())
        place = tensor.get_device() if tensor.is_cuda else _host_place(tensor)
    else:
        interface, _, place = _array_interface(tensor)
        itemsize = _typestr_itemsize(interface["typestr"])
        address, shape = interface["data"][0], tuple(interface["shape"])
        strides = interface.get("strides")
        if strides is None:  # C-contiguous
            strides, step = [], itemsize
            for extent in reversed(shape):
                strides.insert(0, step)
                step *= extent
    if 0 in shape:
        return address, 0, place
    # A negative stride steps below the address: the lowest byte is there.
    low = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    span = sum((n - 1) * abs(s) for n, s in zip(shape, strides))
    return address + low, span + itemsize, place


def clear_caches():
    """Empties the layout caches (tests; never needed for correctness)."""
    for cache in (_numpy_layouts, _torch_layouts, _interface_layouts, _readers):
        cache.clear()
