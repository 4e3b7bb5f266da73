# SPDX-License-Identifier: Apache-2.0
"""peerplan for Python: declared-plan all-reduce and fused all-reduce +
residual add + RMSNorm over libpeerplan's C interface (ctypes), for mpi4py
programs with PyTorch, CuPy or NumPy tensors. See docs/python.md."""

from ._library import check_mpi as _check_mpi, lib as _lib, library_version as _library_version
from .communicator import (PROTOCOLS, REASONS, ROUTES, Communicator, Declaration, Error, Timeout,
                           UndeclaredPlan)

__version__ = _library_version  # the package's, checked at import (_library.check_versions)
_check_mpi()  # when mpi4py is already imported; Communicator() checks again otherwise

__all__ = ["Communicator", "Declaration", "Error", "Timeout", "UndeclaredPlan", "ROUTES", "PROTOCOLS",
           "REASONS", "__version__"]
