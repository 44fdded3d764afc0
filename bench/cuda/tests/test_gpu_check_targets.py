#!/usr/bin/env python3
"""Every test labelled `gpu` is built by bench/gpu_check.sh, or deliberately left out of its gpu step.

gpu_check.sh builds a list of targets (gpu_targets) and then runs `ctest -L gpu`. A gpu test missing
from that list is not built on the GPU machine and shows there as "Not Run", a failed step on the one
rare run that could have shown it passing. This test reads the build's gpu tests (ctest -N -L gpu)
and the script's lists on the CPU, so that a new gpu test without its line in the script fails here.

    test_gpu_check_targets.py <ctest> <build-dir>
"""
import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "gpu_check.sh"


def gpu_tests(ctest, build):
    """The names of the build's tests labelled gpu."""
    listing = subprocess.run([ctest, "-N", "-L", "gpu"], cwd=build, capture_output=True, text=True, check=True)
    return re.findall(r"Test\s+#\d+: (\S+)", listing.stdout)


def script_targets(code):
    """Every name gpu_check.sh puts into gpu_targets, under any condition."""
    names = set()
    for group in re.findall(r"gpu_targets\+?=\(([^)]*)\)", code):
        names.update(group.split())
    return names


def excluded_from_gpu_step(code):
    """The tests the script's main gpu step leaves out on purpose (its ctest -E pattern)."""
    m = re.search(r'step "ctest -L gpu \(kernels and GEMMs\)".*?gpu_tests -E "\'([^\']*)\'"', code)
    if m is None:
        sys.exit(f"test_gpu_check_targets: {SCRIPT}: cannot find the main gpu step's -E pattern; update this test")
    return set(m.group(1).split("|"))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ctest, build = sys.argv[1:]
    code = SCRIPT.read_text()
    tests = gpu_tests(ctest, build)
    if not tests:
        sys.exit(f"test_gpu_check_targets: no test labelled gpu in {build} (ctest -N -L gpu): nothing to check")
    built, excluded = script_targets(code), excluded_from_gpu_step(code)
    forgotten = [t for t in tests if t not in built and t not in excluded]
    print(f"{len(tests)} gpu tests; built by gpu_check.sh: {sorted(set(tests) & built)}; "
          f"left out on purpose: {sorted(set(tests) & excluded - built)}")
    if forgotten:
        print(f"FAILED: gpu tests that bench/gpu_check.sh neither builds (gpu_targets) nor leaves out of its gpu "
              f"step (-E): {', '.join(forgotten)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
