# SPDX-License-Identifier: Apache-2.0
"""The documented install, end to end: a fresh venv (`python3 -m venv
--system-site-packages`, to see Debian's NumPy and mpi4py), scikit-build-core
from PyPI into it, `pip install <root>` (host backend; CMAKE_ARGS from the
environment, e.g. ccache launchers), then from that install alone (no
PYTHONPATH, no PEERPLAN_LIBRARY, run from outside the source tree):
 - the package and its library come from the venv, of the project's version;
 - the Python tests at 2 ranks under mpiexec;
 - the import checks: a library of another version (FAKE_LIBRARY through
   PEERPLAN_LIBRARY) and mpi4py on another MPI are refused, naming both.
Exits 77 (skipped) when scikit-build-core cannot be downloaded (no network).

Usage: pip_install_test.py ROOT WORK_DIR VERSION FAKE_LIBRARY -- MPIEXEC [ARGS...]
  MPIEXEC ARGS: the launcher up to the program (e.g. mpiexec -n 2 --oversubscribe).
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys

TESTS = {  # test file -> what it prints when every check held (the exit status must be 0 too)
    "host_backend_test.py": r"python_host_test: [0-9]+ checks per rank, 0 failed",
    "layout_cache_test.py": r"python_layout_cache_test: [0-9]+ checks per rank, 0 failed",
    "argument_checks_test.py": r"python_argument_checks_test: [0-9]+ checks per rank, 0 failed",
    "without_mpi4py_test.py": r"python_without_mpi4py_test: rank 0 of 2, route [a-z_]+, ok",
}


def clean_env():
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PEERPLAN_LIBRARY", "PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(name, None)
    return env


def run(command, env, cwd, timeout):
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)
    return done.returncode, done.stdout + done.stderr


def main():
    separator = sys.argv.index("--")
    root, work, version, fake_library = sys.argv[1:separator]
    launcher = sys.argv[separator + 1:]
    root, work = pathlib.Path(root).resolve(), pathlib.Path(work).resolve()
    venv = work / "venv"
    shutil.rmtree(venv, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    env = clean_env()
    python = str(venv / "bin" / "python")
    failures = []

    def fail(what, output):
        failures.append(what)
        print(f"FAIL {what}:\n{output[-4000:]}", flush=True)

    rc, output = run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], env,
                     work, 120)
    if rc != 0:
        print(f"pip_install_test: FAILED: cannot create a venv (apt-get install python3-venv):\n"
              f"{output}")
        return 1
    pip = [python, "-m", "pip", "--disable-pip-version-check", "install"]
    rc, output = run(pip + ["--retries", "1", "--timeout", "20", "scikit-build-core>=0.10"], env,
                     work, 300)
    if rc != 0:
        print(f"pip_install_test: SKIPPED: cannot download scikit-build-core from PyPI (no "
              f"network?):\n{output[-2000:]}")
        return 77
    # The build tree stays in WORK_DIR: a rerun rebuilds only what changed.
    rc, output = run(pip + ["--no-build-isolation", "--no-deps", "--force-reinstall",
                            f"--config-settings=build-dir={work / 'build'}", str(root)], env,
                     work, 1200)
    if rc != 0:
        print(f"pip_install_test: FAILED: pip install {root}:\n{output[-6000:]}")
        return 1
    print(f"pip install {root}: ok", flush=True)

    probe = ("import peerplan, peerplan._library as l; "
             "print(peerplan.__file__); print(l.library_path); print(peerplan.__version__)")
    rc, output = run([python, "-c", probe], env, work, 60)
    lines = output.split()
    site = venv / "lib"
    if rc != 0 or len(lines) != 3 or not lines[0].startswith(str(site)) \
            or not lines[1].startswith(str(pathlib.Path(lines[0]).parent)) or lines[2] != version:
        fail(f"the package, its library and version {version} from the venv", output)
    else:
        print(f"package {lines[0]}, library {lines[1]}, version {lines[2]}", flush=True)

    tests = root / "python" / "tests"
    mpi_env = dict(env, PEERPLAN_BACKEND="host")
    for test, expected in TESTS.items():
        rc, output = run(launcher + [python, str(tests / test)], mpi_env, work, 300)
        if rc != 0 or not re.search(expected, output):
            fail(f"{test} at 2 ranks", output)
        else:
            print(f"{test} at 2 ranks: ok", flush=True)
    rc, output = run([python, str(tests / "struct_fields_test.py"),
                      str(root / "include" / "peerplan" / "peerplan.h")], env, work, 60)
    if rc != 0:
        fail("struct_fields_test.py", output)
    rc, output = run([python, str(tests / "import_checks_test.py"), fake_library, version], env,
                     work, 120)
    if rc != 0:
        fail("import_checks_test.py (another library, another MPI)", output)
    else:
        print(output.strip().splitlines()[-1], flush=True)
    print(f"pip_install_test: {len(TESTS) + 4} checks, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
