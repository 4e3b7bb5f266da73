# SPDX-License-Identifier: Apache-2.0
"""peerplan for Python: declared-plan all-reduce and fused all-reduce +
residual add + RMSNorm over libpeerplan's C interface (ctypes), for mpi4py
programs with PyTorch, CuPy or NumPy tensors. See docs/python.md."""

from ._library import lib as _lib
from .communicator import (PROTOCOLS, REASONS, ROUTES, Communicator, Declaration, Error, Timeout,
                           UndeclaredPlan)

__version__ = _lib.peerplan_version().decode()

__all__ = ["Communicator", "Declaration", "Error", "Timeout", "UndeclaredPlan", "ROUTES", "PROTOCOLS",
           "REASONS", "__version__"]
