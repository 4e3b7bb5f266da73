# SPDX-License-Identifier: Apache-2.0
"""The package's enum tables (ROUTES, PROTOCOLS, REASONS) are read from the
library at import; this checks them against the C header's enums, so a value
added to peerplan.h but not named by the library (or the other way round)
fails here. One process, no MPI: importing the package does not start MPI.

Usage: enum_names_test.py PATH/TO/peerplan.h
"""

import re
import sys

import peerplan


def header_enum(header_text, prefix):
    """{code: name} of the enumerators PEERPLAN_<prefix>_<NAME> = <code>."""
    pattern = re.compile(r"\bPEERPLAN_" + prefix + r"_([A-Z0-9_]+)\s*=\s*(\d+)")
    return {int(code): name.lower() for name, code in pattern.findall(header_text)}


def main():
    header_text = open(sys.argv[1]).read()
    failures = 0
    for label, table, prefix in (("ROUTES", peerplan.ROUTES, "ROUTE"),
                                 ("PROTOCOLS", peerplan.PROTOCOLS, "PROTOCOL"),
                                 ("REASONS", peerplan.REASONS, "REASON")):
        expected = header_enum(header_text, prefix)
        if not expected:
            print(f"FAIL {label}: no PEERPLAN_{prefix}_* enumerator found in {sys.argv[1]}")
            failures += 1
        elif table != expected:
            print(f"FAIL {label}: the library names {table}, peerplan.h declares {expected}")
            failures += 1
    print(f"python_enum_names_test: 3 enums, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
