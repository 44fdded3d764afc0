#!/usr/bin/env bash
# Configures a Release build of everything CUDA for the GPU of this machine, as bench/gpu_check.sh
# and bench/cuda/trainer_tables.sh build it: the architecture from nvidia-smi (sm_90a on Hopper),
# warnings reported but not fatal (a newer host compiler may bring new ones), Ninja where there is
# one, and the headers of doctest, Eigen, nlohmann-json and CLI11 from .deps/include where the
# machine has no packages of them (the trainer and its tests need the last two).
#
#   bench/cuda/configure_gpu.sh <build-dir> [architecture]
#
# architecture: CMAKE_CUDA_ARCHITECTURES (for example 90a); default: the first GPU's.
#   mkdir -p .deps/include && cp -r /usr/include/{doctest,eigen3,nlohmann,CLI} .deps/include/
# puts the headers there on a machine that has the packages.
set -uo pipefail
if [[ $# -lt 1 || $# -gt 2 ]]; then
  awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"  # the header comment above
  exit 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
architecture=${2:-}
export PATH=/usr/local/cuda/bin:$PATH
if [[ -z $architecture ]]; then
  capability=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)
  if [[ ! $capability =~ ^[0-9]+\.[0-9]+$ ]]; then
    echo "configure_gpu: no GPU's compute capability from nvidia-smi ('$capability'): give the architecture" >&2
    exit 1
  fi
  case $capability in
    9.0) architecture=90a ;;  # Hopper: architecture-specific instructions allowed
    *) architecture=${capability/./} ;;
  esac
fi
configure=(-S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$architecture"
           -DFP8_ENABLE_CUDA=ON -DFP8_WARNINGS_AS_ERRORS=OFF)
command -v ninja >/dev/null && configure+=(-G Ninja)
deps=$root/.deps/include
[[ -f /usr/include/doctest/doctest.h ]] || configure+=(-DFP8_DOCTEST_INCLUDE_DIR="$deps")
[[ -f /usr/include/eigen3/Eigen/Core ]] || configure+=(-DFP8_EIGEN_INCLUDE_DIR="$deps/eigen3")
[[ -f /usr/include/nlohmann/json.hpp || ! -f $deps/nlohmann/json.hpp ]] || configure+=(-DFP8_JSON_INCLUDE_DIR="$deps")
[[ -f /usr/include/CLI/CLI.hpp || ! -f $deps/CLI/CLI.hpp ]] || configure+=(-DFP8_CLI11_INCLUDE_DIR="$deps")
for header in "$deps/doctest/doctest.h" "$deps/eigen3/Eigen/Core"; do
  system=/usr/include/${header#"$deps/"}
  if [[ ! -f $system && ! -f $header ]]; then
    echo "configure_gpu: neither $system nor $header: copy the headers into .deps/include (see the top of this script)" >&2
    exit 1
  fi
done
echo "configure_gpu: sm_$architecture into $build"
exec cmake "${configure[@]}"
