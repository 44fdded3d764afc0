#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (CPU tests; GPU tests report "skipped" without a GPU).
# Usage: scripts/test.sh [build-dir]     (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}

"$root/scripts/setup.sh"
export PATH=/usr/local/cuda/bin:$PATH

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$(nproc)"
cd "$build"
ctest --output-on-failure -j "$(nproc)" --timeout 1500
