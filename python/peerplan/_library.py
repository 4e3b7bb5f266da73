# SPDX-License-Identifier: Apache-2.0
"""Finding and describing libpeerplan's C interface (include/peerplan/peerplan.h).

The library is looked for, in order: the path in PEERPLAN_LIBRARY; a
libpeerplan.so next to this package (a wheel may ship it there); the
system's search path (ctypes.util.find_library: ldconfig, LD_LIBRARY_PATH).
"""

import ctypes
import ctypes.util
import os
import pathlib

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
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            errors.append(f"{path}: {e}")
    raise ImportError(
        "peerplan: cannot load libpeerplan ("
        + ("; ".join(errors) if errors else "not found")
        + "); set PEERPLAN_LIBRARY to the path of libpeerplan.so, or add its "
        "directory to LD_LIBRARY_PATH"
    )


def _declare(lib):
    P = ctypes.c_void_p
    sigs = {
        "peerplan_version": (ctypes.c_char_p, []),
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
        "peerplan_reset_stats": (ctypes.c_int, [P]),
    }
    for name, (restype, argtypes) in sigs.items():
        function = getattr(lib, name)
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


lib = _declare(_load())
