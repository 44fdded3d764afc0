#!/bin/sh
# Builds the trainer in a configured build directory, trains the FP8 transformer on the default data
# (Debian's fortunes: apt-get install fortunes) and writes the loss plot.
#
#   examples/trainer/run_default.sh [BUILD_DIR] [OUT_DIR] [extra trainer options...]
#
# BUILD_DIR defaults to build-trainer, configured with
#   cmake -S . -B build-trainer -G Ninja -DCMAKE_BUILD_TYPE=Release
# OUT_DIR (default runs/default) receives log.csv, final.safetensors and loss.png; a directory that
# already holds a run is refused unless --overwrite is among the options. About 3-5 minutes
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
# The plot needs matplotlib: Debian's python3-matplotlib lives in the system Python, which a
# virtual environment or pyenv first on PATH may not see.
python=python3
if ! python3 -c "import matplotlib" 2>/dev/null && [ -x /usr/bin/python3 ]; then python=/usr/bin/python3; fi
"$python" "$here/scripts/plot_loss.py" -o "$out/loss.png" --title "fp8_trainer: FP8 transformer on fortunes" "FP8=$out"
