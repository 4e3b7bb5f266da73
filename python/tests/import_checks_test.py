# SPDX-License-Identifier: Apache-2.0
"""What `import peerplan` refuses, each in a fresh interpreter:
 1. a library of another version and C ABI (FAKE_LIBRARY: python/tests/
    fake_library.c): ImportError naming the library's path, its version and
    ABI, the package's ABI (and version when installed) and what to do;
 2. mpi4py on another MPI than the library's (a stand-in mpi4py.MPI that
    says MPICH): RuntimeError naming both MPIs;
and what it accepts: the real library, with the real mpi4py when there is
one (same MPI). One process each, no mpiexec.

Usage: import_checks_test.py FAKE_LIBRARY [PACKAGE_VERSION]
  PYTHONPATH and PEERPLAN_LIBRARY as the caller set them select the package
  and the real library; PACKAGE_VERSION: the version an installed package
  must name in its message (omitted: a source-tree package, ABI only).
"""

import os
import subprocess
import sys

FAKE_MPI = '''
import sys, types
fake = types.ModuleType("mpi4py.MPI")
fake.Get_library_version = lambda: "MPICH Version:\\t4.9.9\\nMPICH Release date: never\\n"
sys.modules["mpi4py"] = types.ModuleType("mpi4py")
sys.modules["mpi4py.MPI"] = fake
'''


def run(code, **env_changes):
    env = dict(os.environ)
    for key, value in env_changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60)
    return done.returncode, done.stdout + done.stderr


def main():
    fake_library = sys.argv[1]
    package_version = sys.argv[2] if len(sys.argv) > 2 else None
    failures = []

    def expect(label, condition, output):
        if not condition:
            failures.append(label)
            print(f"FAIL {label}:\n{output}")

    rc, output = run("import peerplan", PEERPLAN_LIBRARY=fake_library)
    last = output.strip().splitlines()[-1] if output.strip() else ""
    wanted = ["ImportError", fake_library, "0.0.0-fake", "C ABI 999", "needs C ABI 1",
              "PEERPLAN_LIBRARY"] + ([f"version {package_version}"] if package_version else [])
    expect("another library's version refused", rc != 0 and all(w in last for w in wanted),
           output)

    rc, output = run(FAKE_MPI + "import peerplan")
    last = output.strip().splitlines()[-1] if output.strip() else ""
    expect("mpi4py on another MPI refused",
           rc != 0 and "RuntimeError" in last and "MPICH Version: 4.9.9" in last
           and "one process cannot use both" in last, output)

    rc, output = run("import peerplan, sys; print('version', peerplan.__version__)")
    expect("the real library accepted",
           rc == 0 and (package_version is None or f"version {package_version}" in output), output)
    try:
        import mpi4py  # noqa: F401
        have_mpi4py = True
    except ImportError:
        have_mpi4py = False
    if have_mpi4py:
        rc, output = run("from mpi4py import MPI\nimport peerplan\nprint('ok')")
        expect("the real mpi4py accepted", rc == 0 and "ok" in output, output)
    print(f"python_import_checks_test: {4 if have_mpi4py else 3} checks, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
