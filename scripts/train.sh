#!/usr/bin/env bash
# Sets up, builds and trains the example FP8 transformer (HYBRID formats, delayed scaling) on its
# default text, then writes the loss plot. Usage: scripts/train.sh [out-dir] [trainer options...]
# (default out-dir: runs/default; `build/examples/trainer/fp8_trainer --help` lists the options).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
out=${1:-$root/runs/default}
if [[ $# -gt 0 ]]; then shift; fi

"$root/scripts/setup.sh"
export PATH=/usr/local/cuda/bin:$PATH

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
"$root/examples/trainer/run_default.sh" "$build" "$out" "$@"
echo "train.sh: log $out/log.csv, checkpoint $out/final.safetensors, plot $out/loss.png"
