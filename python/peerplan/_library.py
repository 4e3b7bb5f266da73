# SPDX-License-Identifier: Apache-2.0
"""Finding and describing libpeerplan's C interface (include/peerplan/peerplan.h).

The library is looked for, in order: the path in PEERPLAN_LIBRARY; the
one installed with this package (_install.py, written by `pip install` or
`cmake --install`: next to the package, or under the install prefix); a
libpeerplan.so next to this package; the system's search path
(ctypes.util.find_library: ldconfig, LD_LIBRARY_PATH).

At import the library must be of this package's version (when the package
was installed and so knows it) and C ABI (ABI_VERSION: what the ctypes
declarations below are written for); check_mpi() compares the MPI of
mpi4py, once it is imported, with the library's.
"""

import ctypes
import ctypes.util
import os
import pathlib
import sys

try:  # written at install; absent in the source tree (PYTHONPATH=python)
    from . import _install
except ImportError:
    _install = None

# The C interface's PEERPLAN_ABI_VERSION (peerplan.h) that the declarations
# below match; python/tests/struct_fields_test.py checks them against the header.
ABI_VERSION = 1
# The package's version: the project's (CMakeLists.txt), written at install.
PACKAGE_VERSION = getattr(_install, "VERSION", None)

c_int64_p = ctypes.POINTER(ctypes.c_int64)


class Layout(ctypes.Structure):
    _fields_ = [("ndim", ctypes.c_int32), ("shape", c_int64_p), ("strides", c_int64_p)]


class Declaration(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("operation", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("layout", Layout),
        ("weight", ctypes.c_void_p),
        ("eps", ctypes.c_float),
    ]


class CallResult(ctypes.Structure):
    _fields_ = [("route", ctypes.c_int), ("reason", ctypes.c_int), ("zero_copy", ctypes.c_int),
                ("protocol", ctypes.c_int)]


class PlanInfo(ctypes.Structure):
    _fields_ = [("route", ctypes.c_int), ("reason", ctypes.c_int), ("index", ctypes.c_size_t),
                ("protocol", ctypes.c_int)]


class Stats(ctypes.Structure):
    _fields_ = [
        ("p2p_calls", ctypes.c_uint64),
        ("zero_copy_calls", ctypes.c_uint64),
        ("fallback_undeclared", ctypes.c_uint64),
        ("fallback_over_cutoff", ctypes.c_uint64),
        ("fallback_p2p_disabled", ctypes.c_uint64),
        ("fallback_node_layout", ctypes.c_uint64),
        ("plans", ctypes.c_size_t),
    ]


class PlanStats(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("operation", ctypes.c_int),
        ("route", ctypes.c_int),
        ("reason", ctypes.c_int),
        ("hits", ctypes.c_uint64),
        ("fallbacks", ctypes.c_uint64),
        ("protocol", ctypes.c_int),
        ("launch", ctypes.c_char_p),
    ]


def _candidates():
    explicit = os.environ.get("PEERPLAN_LIBRARY")
    if explicit:
        yield explicit
        return  # asked for one library: never silently load another
    here = pathlib.Path(__file__).resolve().parent
    installed = getattr(_install, "LIBRARY", None)
    if installed:
        yield str((here / installed).resolve())
    # The development link, then the SONAME file (libpeerplan.so.0.1 while
    # the version is 0.x) when only that was copied next to the package.
    for path in [here / "libpeerplan.so"] + sorted(here.glob("libpeerplan.so.*")):
        if path.exists():
            yield str(path)
    found = ctypes.util.find_library("peerplan")
    if found:
        yield found


def _load():
    errors = []
    for path in _candidates():
        try:
            # RTLD_GLOBAL: MPI's plugins need libmpi's symbols when the
            # library is what loads MPI (no mpi4py).
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL), path
        except OSError as e:
            errors.append(f"{path}: {e}")
    raise ImportError(
        "peerplan: cannot load libpeerplan ("
        + ("; ".join(errors) if errors else "not found")
        + "); set PEERPLAN_LIBRARY to the path of libpeerplan.so, or add its "
        "directory to LD_LIBRARY_PATH"
    )


_REINSTALL = ("install the package and the library from the same source tree (`pip install "
              "<peerplan source>` builds and installs both), or set PEERPLAN_LIBRARY to a "
              "libpeerplan.so of this package's version")


def check_versions(lib, path):
    """ImportError unless the library at `path` has this package's C ABI and,
    when the package knows its version (installed), its version."""
    try:
        version_of = lib.peerplan_version
    except AttributeError:
        raise ImportError(f"peerplan: {path} is not a peerplan library (no peerplan_version)") from None
    version_of.restype = ctypes.c_char_p
    version_of.argtypes = []
    library_version = (version_of() or b"?").decode()
    abi_of = getattr(lib, "peerplan_abi_version", None)
    library_abi = None
    if abi_of is not None:
        abi_of.restype = ctypes.c_int
        abi_of.argtypes = []
        library_abi = abi_of()
    if library_abi != ABI_VERSION or (PACKAGE_VERSION is not None
                                      and library_version != PACKAGE_VERSION):
        package = PACKAGE_VERSION or "from the source tree"
        abi = library_abi if library_abi is not None else "none (older than this package)"
        raise ImportError(f"peerplan: the library {path} is peerplan {library_version} with C ABI "
                          f"{abi}; this Python package ({package}) needs C ABI {ABI_VERSION}"
                          + (f" and version {PACKAGE_VERSION}" if PACKAGE_VERSION else "")
                          + f"; {_REINSTALL}")
    return library_version


def _mpi_first_line(text):
    # Vendor and version: MPICH's text goes on with its configure options.
    # mpi4py may keep the C string's terminating NUL.
    lines = text.split("\0", 1)[0].strip().splitlines()
    return " ".join(lines[0].split()) if lines else ""


_mpi_checked = False


def check_mpi():
    """RuntimeError when mpi4py is imported and runs on another MPI than the
    library (two MPIs in one process: a communicator of one is garbage to the
    other). Once per process; nothing when mpi4py is not imported."""
    global _mpi_checked
    MPI = sys.modules.get("mpi4py.MPI")
    if _mpi_checked or MPI is None:
        return
    theirs = MPI.Get_library_version()
    ours = lib.peerplan_mpi_library_version().decode()
    if _mpi_first_line(theirs) != _mpi_first_line(ours):
        raise RuntimeError(f"peerplan: mpi4py runs on \"{_mpi_first_line(theirs)}\" but "
                           f"{library_path} on \"{_mpi_first_line(ours)}\"; one process "
                           "cannot use both. Build mpi4py against the library's MPI (e.g. "
                           "`env MPICC=<that MPI's mpicc> pip install --no-binary mpi4py mpi4py`), "
                           "or the library against mpi4py's MPI")
    _mpi_checked = True


def _declare(lib):
    P = ctypes.c_void_p
    sigs = {
        "peerplan_version": (ctypes.c_char_p, []),
        "peerplan_abi_version": (ctypes.c_int, []),
        "peerplan_mpi_library_version": (ctypes.c_char_p, []),
        "peerplan_result_string": (ctypes.c_char_p, [ctypes.c_int]),
        "peerplan_route_name": (ctypes.c_char_p, [ctypes.c_int]),
        "peerplan_reason_name": (ctypes.c_char_p, [ctypes.c_int]),
        "peerplan_protocol_name": (ctypes.c_char_p, [ctypes.c_int]),
        "peerplan_last_error": (ctypes.c_char_p, []),
        "peerplan_mpi_world": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int)]),
        "peerplan_mpi_finalize": (None, []),
        "peerplan_config_create": (ctypes.c_int, [ctypes.POINTER(P)]),
        "peerplan_config_set": (ctypes.c_int, [P, ctypes.c_char_p, ctypes.c_char_p]),
        "peerplan_config_destroy": (None, [P]),
        "peerplan_comm_create_f": (ctypes.c_int, [ctypes.c_int, P, ctypes.POINTER(P)]),
        "peerplan_comm_close": (ctypes.c_int, [P]),
        "peerplan_comm_destroy": (None, [P]),
        "peerplan_comm_rank": (ctypes.c_int, [P]),
        "peerplan_comm_size": (ctypes.c_int, [P]),
        "peerplan_comm_backend": (ctypes.c_char_p, [P]),
        "peerplan_comm_cuda_device": (ctypes.c_int, [P]),
        "peerplan_comm_p2p_enabled": (ctypes.c_int, [P]),
        "peerplan_comm_p2p_disabled_reason": (ctypes.c_char_p, [P]),
        "peerplan_declare": (ctypes.c_int, [P, ctypes.POINTER(Declaration), ctypes.c_size_t]),
        "peerplan_has_plan_all_reduce": (ctypes.c_int, [P, ctypes.c_int, Layout]),
        "peerplan_has_plan_fused": (ctypes.c_int, [P, ctypes.c_int, Layout, P, ctypes.c_float]),
        "peerplan_plan_all_reduce": (ctypes.c_int, [P, ctypes.c_int, Layout, ctypes.POINTER(PlanInfo)]),
        "peerplan_plan_fused": (
            ctypes.c_int,
            [P, ctypes.c_int, Layout, P, ctypes.c_float, ctypes.POINTER(PlanInfo)],
        ),
        "peerplan_all_reduce": (
            ctypes.c_int,
            [P, P, P, ctypes.c_int, Layout, P, ctypes.POINTER(CallResult)],
        ),
        "peerplan_fused_add_rms_norm": (
            ctypes.c_int,
            [P, P, P, P, ctypes.c_float, ctypes.c_int, Layout, P, ctypes.POINTER(CallResult)],
        ),
        "peerplan_register_buffers": (
            ctypes.c_int,
            [P, ctypes.POINTER(P), ctypes.POINTER(ctypes.c_size_t), ctypes.c_size_t],
        ),
        "peerplan_deregister_buffers": (ctypes.c_int, [P]),
        "peerplan_stats": (ctypes.c_int, [P, ctypes.POINTER(Stats)]),
        "peerplan_plan_stats": (ctypes.c_int, [P, ctypes.c_size_t, ctypes.POINTER(PlanStats)]),
        "peerplan_undeclared_key_count": (ctypes.c_int, [P, ctypes.POINTER(ctypes.c_size_t)]),
        "peerplan_undeclared_key": (
            ctypes.c_int,
            [P, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
             ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64)],
        ),
        "peerplan_reset_stats": (ctypes.c_int, [P]),
    }
    for name, (restype, argtypes) in sigs.items():
        try:
            function = getattr(lib, name)
        except AttributeError:
            # Functions are added within one ABI number: a library built from
            # an older source tree has that number but not the newer functions.
            raise ImportError(f"peerplan: the library {library_path} has no {name}: it is older "
                              f"than this package; {_REINSTALL}") from None
        function.restype = restype
        function.argtypes = argtypes
    return lib


# The C enums are numbered from 0 without gaps (peerplan.h); past the last
# one the library's name function answers "unknown". Far more than any enum.
_ENUM_CODES_LIMIT = 64


def enum_names(name_of):
    """{code: name} of one of the C interface's enums, read from the library
    through its name function (e.g. lib.peerplan_route_name), so that Python
    never keeps a copy of the numbering that could drift from the C one."""
    names = {}
    for code in range(_ENUM_CODES_LIMIT):
        name = name_of(code).decode()
        if name == "unknown":
            break
        names[code] = name
    if not names:
        raise ImportError("peerplan: the library names no value of an enum; is it a peerplan library?")
    return names


lib, library_path = _load()
library_version = check_versions(lib, library_path)
_declare(lib)
