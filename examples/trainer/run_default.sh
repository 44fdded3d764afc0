#!/bin/sh
# Builds the trainer in a configured build directory, trains the FP8 transformer on the default data
# (Debian's fortunes: apt-get install fortunes) and writes the loss plot.
#
#   examples/trainer/run_default.sh [BUILD_DIR] [OUT_DIR] [extra trainer options...]
#
# BUILD_DIR defaults to build-trainer, configured with
#   cmake -S . -B build-trainer -G Ninja -DCMAKE_BUILD_TYPE=Release
# OUT_DIR (default runs/default) receives log.csv, final.safetensors and loss.png. About 3-5 minutes
# on two cores; add e.g. `--precision bf16 --out runs/bf16` runs and pass their directories to
# scripts/plot_loss.py to overlay them.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build-trainer}
out=${2:-runs/default}
if [ $# -gt 0 ]; then shift; fi
if [ $# -gt 0 ]; then shift; fi

if [ ! -f "$build/CMakeCache.txt" ]; then
  echo "run_default.sh: $build is not a configured build directory; configure it with" >&2
  echo "  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release" >&2
  exit 2
fi
cmake --build "$build" --target fp8_trainer -j 2
"$build/examples/trainer/fp8_trainer" --precision fp8 --out "$out" "$@"
python3 "$here/scripts/plot_loss.py" -o "$out/loss.png" --title "fp8_trainer: FP8 transformer on fortunes" "FP8=$out"
