# SPDX-License-Identifier: Apache-2.0
"""What each PyTorch accessor the package's fast path reads costs, in one
process on a GPU host (timeit, best of R repeats of N calls, ns per call):
the tensor's data_ptr(), shape, stride(), dtype, is_cuda, get_device(), the
current stream by the documented torch.cuda.current_stream(i).cuda_stream
and by torch._C._cuda_getCurrentRawStream(i), and the package's own readers
(_tensors._read_torch, _tensors.torch_stream). Tells where a Python call's
microseconds go; prints one line per item.

    PYTHONPATH=python PEERPLAN_LIBRARY=build/src/libpeerplan.so \\
        python3 python/benchmarks/torch_accessors.py
"""

import sys
import timeit

try:
    import torch
except ImportError as e:  # pragma: no cover
    print(f"torch_accessors: SKIPPED: {e}")
    sys.exit(77)
if not torch.cuda.is_available():
    print("torch_accessors: SKIPPED: no CUDA device")
    sys.exit(77)

from peerplan import _tensors

N, R = 20000, 9
t = torch.zeros(8, 4096, dtype=torch.bfloat16, device="cuda")
device = t.get_device()
raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
items = {
    "data_ptr()": lambda: t.data_ptr(),
    "shape": lambda: t.shape,
    "stride()": lambda: t.stride(),
    "dtype": lambda: t.dtype,
    "is_cuda": lambda: t.is_cuda,
    "get_device()": lambda: t.get_device(),
    "(dtype, shape, stride()) key": lambda: (t.dtype, t.shape, t.stride()),
    "current_stream(i).cuda_stream": lambda: torch.cuda.current_stream(device).cuda_stream,
    "_cuda_getCurrentRawStream(i)": (lambda: raw(device)) if raw else None,
    "package _read_torch": lambda: _tensors._read_torch(t),
    "package torch_stream": lambda: _tensors.torch_stream(t),
    "empty lambda": lambda: None,
}
print(f"torch {torch.__version__}, {torch.cuda.get_device_name(device)}; ns per call, best of {R} x {N}")
for name, f in items.items():
    if f is None:
        print(f"{name:34s} (not in this torch)")
        continue
    best = min(timeit.repeat(f, number=N, repeat=R)) / N * 1e9
    print(f"{name:34s} {best:8.0f}")
