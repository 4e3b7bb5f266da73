#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The GPU tests' results as one table: test x rank count -> verdict and seconds.

Reads the JUnit files `ctest --output-junit` wrote (tests named <binary>.np<n>)
and, optionally, a tab-separated file of further rows (name, ranks, verdict,
seconds; scripts/gpu-check.sh writes the example program's runs there).
Prints the table, then the GoogleTest cases that failed or skipped in each
run. Used by scripts/gpu-check.sh:
  gpu_test_table.py [--rows extra.tsv] gpu-tests-np2.xml gpu-tests-np8.xml ...
"""
import argparse
import re
import sys
import xml.etree.ElementTree as ET

# GoogleTest's summary lists every failed and skipped case once, without a time.
FAILED_CASE = re.compile(r"^\[  FAILED  \] ([\w/]+\.[\w/]+)(?:, where .*)?$", re.M)
SKIPPED_CASE = re.compile(r"^\[  SKIPPED \] ([\w/]+\.[\w/]+)$", re.M)
NAME = re.compile(r"^(.*)\.np(\d+)$")
# Terminal colours, as GoogleTest prints them and as ctest escapes them in XML.
COLOUR = re.compile(r"(?:\x1b|\[NON-XML-CHAR-0x1B\])\[[0-9;]*m")


def verdict_of(case):
    """passed, FAILED, TIMEOUT, skipped or 'not run' for one <testcase>."""
    status = case.get("status", "")
    failure = case.find("failure")
    if case.find("skipped") is not None or status == "disabled":
        return "skipped"  # SKIP_REGULAR_EXPRESSION: every test of the program skipped
    if status == "notrun":
        return "not run"
    if failure is not None or status == "fail":
        # ctest's own verdict, not the output (peerplan's messages say "Timeout" too).
        message = failure.get("message", "") if failure is not None else ""
        return "TIMEOUT" if "Timeout" in message else "FAILED"
    return "passed"


def read_junit(path, cells, details):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as error:
        print(f"gpu_test_table: cannot read {path}: {error}", file=sys.stderr)
        return
    for case in root.iter("testcase"):
        match = NAME.match(case.get("name", ""))
        if not match:
            continue
        test, ranks = match.group(1), int(match.group(2))
        output = COLOUR.sub("", case.findtext("system-out") or "")
        verdict = verdict_of(case)
        failed = sorted(set(FAILED_CASE.findall(output)))
        skipped = sorted(set(SKIPPED_CASE.findall(output)))
        seconds = float(case.get("time", "0") or 0)
        note = f", {len(skipped)} skip" if skipped and verdict != "skipped" else ""
        cells[(test, ranks)] = f"{verdict} {seconds:.0f}s{note}"
        if failed:
            details.append(f"np{ranks} {test}: failed {', '.join(failed)}")
        if skipped and verdict != "skipped":
            details.append(f"np{ranks} {test}: skipped {', '.join(skipped)}")


def read_rows(path, cells):
    try:
        with open(path, encoding="utf-8") as rows:
            for line in rows:
                fields = line.rstrip("\n").split("\t")
                if len(fields) >= 4 and fields[1].isdigit():
                    cells[(fields[0], int(fields[1]))] = f"{fields[2]} {fields[3]}s"
    except OSError:
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", nargs="*", help="ctest --output-junit files")
    parser.add_argument("--rows", help="tab-separated rows: name, ranks, verdict, seconds")
    args = parser.parse_args()
    cells, details = {}, []
    for path in args.junit:
        read_junit(path, cells, details)
    if args.rows:
        read_rows(args.rows, cells)
    if not cells:
        print("no GPU test results")
        return 1
    tests = sorted({t for t, _ in cells}, key=lambda t: (not t.startswith("cuda_"), t))
    counts = sorted({n for _, n in cells})
    width = max(len(t) for t in tests) + 2
    column = max(len(c) for c in cells.values()) + 2
    print("test".ljust(width) + "".join(f"np{n}".ljust(column) for n in counts))
    for test in tests:
        print(test.ljust(width) + "".join(cells.get((test, n), "-").ljust(column) for n in counts))
    for line in details:
        print(line)
    bad = [c for c in cells.values() if c.startswith(("FAILED", "TIMEOUT"))]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
