# SPDX-License-Identifier: Apache-2.0
"""Runs the ```python block of a Markdown file that sits between
"<!-- snippet python begin -->" and "<!-- snippet python end -->".

    python3 run_python_snippet.py docs/python.md

Exits 77 (ctest: skipped, visibly) when NumPy or mpi4py is missing, as the
package's own tests do; fails, saying what is missing, when the markers or
the fence are gone.
"""
import re
import sys

BEGIN = "<!-- snippet python begin -->"
END = "<!-- snippet python end -->"


def snippet(path):
    text = open(path, encoding="utf-8").read()
    begin, end = text.find(BEGIN), text.find(END)
    if begin == -1 or end < begin:
        sys.exit(f"{path}: expected the lines '{BEGIN}' and '{END}' around the Python example")
    block = text[begin + len(BEGIN):end]
    match = re.fullmatch(r"\s*```python\r?\n(.*)\r?\n```\s*", block, re.S)
    if not match:
        sys.exit(f"{path}: between the python snippet markers there must be one ```python "
                 "fenced block and nothing else")
    return match.group(1) + "\n"


def main():
    code = snippet(sys.argv[1])
    try:
        import numpy  # noqa: F401
        import mpi4py  # noqa: F401
    except ImportError as missing:
        print(f"doc python snippet: skipped, {missing.name} is not installed")
        sys.exit(77)
    exec(compile(code, f"{sys.argv[1]} (python snippet)", "exec"), {"__name__": "__main__"})


if __name__ == "__main__":
    main()
