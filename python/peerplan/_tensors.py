"""What peerplan needs to know of a tensor: its address, dtype, shape and
element strides. PyTorch tensors are read directly (data_ptr(), shape,
stride(), dtype): building __cuda_array_interface__ costs microseconds on
every call. Anything else through __cuda_array_interface__ (CuPy, Numba) or
the NumPy array interface."""

import ctypes

from ._library import Layout

F16, BF16, F32 = 0, 1, 2

# NumPy typestrs (little-endian) of the element types; bf16 has none in
# NumPy itself: ml_dtypes' bfloat16 reports "<V2" and names itself.
_TYPESTR = {"<f2": F16, "<f4": F32}
_TORCH = {"torch.float16": F16, "torch.bfloat16": BF16, "torch.float32": F32}
_ITEMSIZE = {F16: 2, BF16: 2, F32: 4}


class TensorInfo:
    __slots__ = ("ptr", "dtype", "layout", "keep")

    def __init__(self, ptr, dtype, shape, strides):
        self.ptr = ptr
        self.dtype = dtype
        ndim = len(shape)
        shape_array = (ctypes.c_int64 * max(ndim, 1))(*shape)
        strides_array = (ctypes.c_int64 * max(ndim, 1))(*strides) if strides is not None else None
        self.keep = (shape_array, strides_array)  # the layout points into these
        self.layout = Layout(ndim, shape_array, strides_array)


def _torch_info(tensor):
    dtype = _TORCH.get(str(tensor.dtype))
    if dtype is None:
        raise TypeError(f"peerplan: unsupported tensor dtype {tensor.dtype}; use float16, "
                        "bfloat16 or float32")
    return TensorInfo(tensor.data_ptr(), dtype, tuple(tensor.shape), tuple(tensor.stride()))


def _interface_info(interface, name):
    typestr = interface["typestr"]
    dtype = _TYPESTR.get(typestr)
    descr = interface.get("descr")
    if dtype is None and typestr == "<V2" and descr and "bfloat16" in str(descr):
        dtype = BF16
    if dtype is None:
        raise TypeError(f"peerplan: unsupported element type {typestr!r} in {name}; use "
                        "float16, bfloat16 or float32")
    ptr = interface["data"][0]
    shape = tuple(interface["shape"])
    strides = interface.get("strides")
    if strides is not None:
        itemsize = _ITEMSIZE[dtype]
        if any(s % itemsize for s in strides):
            raise ValueError("peerplan: strides must be whole elements")
        strides = tuple(s // itemsize for s in strides)  # bytes -> elements
    return TensorInfo(ptr, dtype, shape, strides)


def describe(tensor):
    """TensorInfo of a PyTorch tensor, or of any object with the CUDA or
    NumPy array interface."""
    module = type(tensor).__module__
    if module.startswith("torch"):
        return _torch_info(tensor)
    interface = getattr(tensor, "__cuda_array_interface__", None)
    if interface is not None:
        return _interface_info(interface, "__cuda_array_interface__")
    interface = getattr(tensor, "__array_interface__", None)
    if interface is not None:
        if interface.get("readonly") or interface["data"][1]:
            raise ValueError("peerplan: the array is read-only")
        return _interface_info(interface, "__array_interface__")
    raise TypeError(f"peerplan: {type(tensor).__name__} is not a tensor peerplan can use "
                    "(PyTorch, __cuda_array_interface__ or the NumPy array interface)")


def weight_pointer(weight):
    """The address of a norm weight (the plan key holds the address)."""
    return describe(weight).ptr
