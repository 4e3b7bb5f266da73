# SPDX-License-Identifier: Apache-2.0
"""The Python package without mpi4py: Communicator() gets MPI_COMM_WORLD
from the library, which initialises MPI and finalises it at exit. Each
rank exits non-zero on a wrong result (mpiexec then fails). Exits 77 when
NumPy is missing."""

import sys

sys.modules["mpi4py"] = None  # as if it were not installed: `import mpi4py` raises ImportError

try:
    import numpy as np
except ImportError as e:  # pragma: no cover
    print(f"python_without_mpi4py_test: SKIPPED: {e}")
    sys.exit(77)

import peerplan

comm = peerplan.Communicator(timeout_ms=20000)
n, me = comm.size, comm.rank
comm.declare([peerplan.Declaration.all_reduce("x", "f32", (2, 64))])
x = np.arange(128, dtype=np.float32).reshape(2, 64) * (me + 1)
route, reason = comm.all_reduce(x)
expected = np.arange(128, dtype=np.float32).reshape(2, 64) * (n * (n + 1) / 2)
if not np.array_equal(x, expected) or n < 2:
    print(f"rank {me}: wrong result on route {route} ({n} ranks)", file=sys.stderr)
    sys.exit(1)
comm.close()
if me == 0:
    print(f"python_without_mpi4py_test: {n} ranks, route {route}, ok", flush=True)
