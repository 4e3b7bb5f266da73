# SPDX-License-Identifier: Apache-2.0
"""The ctypes structs of the package (_library.py) against the C header's
typedef structs: the same fields, in the same order, of the same types, so
a field added to or retyped in peerplan.h without the Python side (or the
other way round) fails here; and the header's PEERPLAN_ABI_VERSION is the
one the package declares it matches. One process, no MPI.

Usage: struct_fields_test.py PATH/TO/peerplan.h
"""

import ctypes
import re
import sys

from peerplan import _library

# C struct name (typedef peerplan_<name>_t) -> the package's ctypes class.
STRUCTS = {
    "peerplan_layout": _library.Layout,
    "peerplan_declaration": _library.Declaration,
    "peerplan_call_result": _library.CallResult,
    "peerplan_plan_info": _library.PlanInfo,
    "peerplan_stats": _library.Stats,
    "peerplan_plan_stats": _library.PlanStats,
}

# The header's field types -> ctypes. The enum typedefs are ints (peerplan.h).
C_TYPES = {
    "int32_t": ctypes.c_int32,
    "int": ctypes.c_int,
    "float": ctypes.c_float,
    "size_t": ctypes.c_size_t,
    "uint64_t": ctypes.c_uint64,
    "const char*": ctypes.c_char_p,
    "const void*": ctypes.c_void_p,
    "const int64_t*": ctypes.POINTER(ctypes.c_int64),
    "peerplan_layout_t": _library.Layout,
}
ENUM_TYPEDEF = re.compile(r"typedef int (peerplan_\w+_t);")


def header_structs(text):
    """{struct name: [(field, C type)]} of every `typedef struct peerplan_x {...}`."""
    structs = {}
    for name, body in re.findall(r"typedef struct (peerplan_\w+) \{(.*?)\}", text, re.S):
        body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
        fields = []
        for declaration in body.split(";"):
            declaration = " ".join(declaration.split())
            if not declaration:
                continue
            match = re.fullmatch(r"(.+?)\s*(\*?)\s*(\w+)", declaration)
            fields.append((match.group(3), (match.group(1) + match.group(2)).replace(" *", "*")))
        structs[name] = fields
    return structs


def main():
    text = open(sys.argv[1]).read()
    types = dict(C_TYPES)
    for enum_type in ENUM_TYPEDEF.findall(text):
        types[enum_type] = ctypes.c_int
    failures = []
    found = header_structs(text)
    for name in sorted(set(found) | set(STRUCTS)):
        if name not in STRUCTS:
            failures.append(f"{name}: in peerplan.h, no ctypes class in _library.py (add one here)")
            continue
        if name not in found:
            failures.append(f"{name}: no such struct in {sys.argv[1]}")
            continue
        want = [(field, types.get(c_type, c_type)) for field, c_type in found[name]]
        have = list(STRUCTS[name]._fields_)
        if want != have:
            failures.append(f"{name}: peerplan.h has {want}, _library.py has {have}")
    abi = re.search(r"#define PEERPLAN_ABI_VERSION (\d+)", text)
    if abi is None or int(abi.group(1)) != _library.ABI_VERSION:
        failures.append(f"PEERPLAN_ABI_VERSION: peerplan.h says {abi and abi.group(1)}, the "
                        f"package {_library.ABI_VERSION}")
    for failure in failures:
        print("FAIL", failure)
    print(f"python_struct_fields_test: {len(found)} structs, {len(failures)} failed")
    return 1 if failures or len(found) < len(STRUCTS) else 0


if __name__ == "__main__":
    sys.exit(main())
