#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""benchmarks/plot_results.py on the sample benchmark files and on the committed
collective results: the three SVGs are written, parse as SVG, each holds at least one
plotted series, a second run gives the same bytes, and unreadable input fails
with one line naming the file.

    plot_results_test.py PLOT_SCRIPT SOURCE_DIR OUT_DIR

Exits 77 (ctest: skipped) where matplotlib is missing."""
import glob
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

FIGURES = ("allreduce-latency.svg", "allreduce-ratio.svg", "fused-rows.svg")
SVG = "{http://www.w3.org/2000/svg}"
failures = []


def check(ok, text):
    if not ok:
        failures.append(text)
        print(f"FAILED: {text}")


def run(script, out, inputs):
    return subprocess.run([sys.executable, script, "--out", out] + inputs, capture_output=True,
                          text=True)


def plotted_series(path):
    """Number of series groups (gid 'series-...') holding a path of two or more points."""
    count = 0
    for group in ET.parse(path).getroot().iter(SVG + "g"):
        if not group.get("id", "").startswith("series-"):
            continue
        for line in group.iter(SVG + "path"):
            if line.get("d", "").count("L") >= 1:
                count += 1
                break
    return count


def figures_of(script, out, inputs, label):
    result = run(script, out, inputs)
    check(result.returncode == 0, f"{label}: exit {result.returncode}: {result.stderr.strip()}")
    for name in FIGURES:
        path = os.path.join(out, name)
        if not os.path.isfile(path):
            check(False, f"{label}: {name} not written")
            continue
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as e:
            check(False, f"{label}: {name} is not XML ({e})")
            continue
        check(root.tag == SVG + "svg", f"{label}: {name}'s root is {root.tag}, not svg")
        check(plotted_series(path) >= 1, f"{label}: {name} has no plotted series")
    return result


def main(script, source, out):
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("plot_results_test: SKIPPED: matplotlib is missing (apt-get install "
              "python3-matplotlib)")
        return 77
    shutil.rmtree(out, ignore_errors=True)  # no figure of an earlier run may pass for this one's
    os.makedirs(out)
    samples = sorted(glob.glob(os.path.join(source, "benchmarks", "testdata", "*.json")))
    # The collective runs; the plan-lookup benchmark's JSON there is not plotted.
    results = sorted(p for p in glob.glob(os.path.join(source, "benchmarks", "results", "*.json"))
                     if not os.path.basename(p).startswith("plan-lookup"))
    check(bool(samples) and bool(results), "no sample or results files found")

    first, second = os.path.join(out, "samples"), os.path.join(out, "samples-again")
    figures_of(script, first, samples, "testdata samples")
    figures_of(script, second, samples, "testdata samples, second run")
    for name in FIGURES:
        a, b = os.path.join(first, name), os.path.join(second, name)
        if os.path.isfile(a) and os.path.isfile(b):
            with open(a, "rb") as fa, open(b, "rb") as fb:
                check(fa.read() == fb.read(), f"{name}: two runs on the same input differ")
    # Every peer of the sample peers.json and peerplan's route-auto run are drawn.
    latency = os.path.join(first, "allreduce-latency.svg")
    if os.path.isfile(latency):
        check(plotted_series(latency) >= 8,
              f"allreduce-latency.svg (samples): {plotted_series(latency)} series, expected 8+")

    figures_of(script, os.path.join(out, "results"), results, "benchmarks/results")

    bad = os.path.join(out, "not-a-benchmark.json")
    with open(bad, "w") as f:
        f.write('{"mode": "graph", "dtype": "bf16", "route": "auto", "rows": [{"bytes": 1024}]}\n')
    result = run(script, os.path.join(out, "bad"), [bad])
    lines = result.stderr.strip().splitlines()
    check(result.returncode != 0, "a row without time_us was accepted")
    check(len(lines) == 1 and bad in lines[0] and "time_us" in lines[0],
          f"the error for a row without time_us names the file and the field: {lines}")
    result = run(script, os.path.join(out, "bad"), [os.path.join(out, "missing.json")])
    check(result.returncode != 0 and "missing.json" in result.stderr,
          f"a missing input: exit {result.returncode}, {result.stderr.strip()}")

    print(f"plot_results_test: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
