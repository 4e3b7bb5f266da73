# SPDX-License-Identifier: Apache-2.0
"""The one assertion of the benchmark tools' tests: a failed check is printed
and counted, and the test ends with "<name>: N failed", which ctest matches."""


class Checks:
    def __init__(self, name):
        self.name = name
        self.failed = 0

    def __call__(self, condition, what):
        if not condition:
            self.failed += 1
            print(f"FAILED: {what}")

    def finish(self):
        print(f"{self.name}: {self.failed} failed")
        return 1 if self.failed else 0
