#!/usr/bin/env bash
# Installs what fp8's build, tests and examples need on a fresh Debian machine (run as root).
# The CUDA toolkit is expected at /usr/local/cuda (nvcc, cuBLASLt); it is not installed here.
set -euo pipefail

# Build and tests: cmake, ninja, g++ and clang++ (the vendoring tests compile with both), doctest, Eigen.
# The example trainer: nlohmann-json (checkpoint headers), fortunes (its default English text),
# python3 and matplotlib (the plot and table scripts), CLI11 (its command line).
packages=(cmake ninja-build g++ clang doctest-dev libeigen3-dev nlohmann-json3-dev fortunes python3
          python3-matplotlib libcli11-dev)

# The CPU benchmarks: Google Benchmark. Fuzzing and the sanitizer build: clang-14 with its runtimes.
# The format check: clang-format (the tree follows .clang-format).
packages+=(libbenchmark-dev clang-14 libclang-rt-14-dev clang-format)

# Data-parallel training and the distributed tests: OpenMPI (mpirun, mpicxx and the headers).
packages+=(openmpi-bin libopenmpi-dev)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: these Debian packages are missing and installing them needs root: ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python's safetensors reads the trainer's checkpoints in a test.
if ! python3 -c "import safetensors, numpy" 2>/dev/null; then
  echo "setup: installing the Python packages safetensors and numpy"
  python3 -m pip install --quiet safetensors numpy
fi

if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  echo "setup: CUDA toolkit found at /usr/local/cuda ($(/usr/local/cuda/bin/nvcc --version | tail -1))"
else
  echo "setup: no CUDA toolkit at /usr/local/cuda: the CUDA parts and CUDA-referenced tests need it" >&2
  exit 1
fi
