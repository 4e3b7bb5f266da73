# SPDX-License-Identifier: Apache-2.0
"""The Python package without mpi4py: Communicator() gets MPI_COMM_WORLD
from the library, which initialises MPI and finalises it at exit. Each
rank prints its own verdict and exits non-zero on a wrong result, after the
collective close (mpiexec then fails: ctest judges by the exit status).
Exits 77 when NumPy is missing."""

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
right = np.array_equal(x, expected) and n >= 2
comm.close()  # collective: on every rank, right or wrong, so that none waits for a rank gone
print(f"python_without_mpi4py_test: rank {me} of {n}, route {route}, "
      f"{'ok' if right else 'WRONG result'}", flush=True)
sys.exit(0 if right else 1)
