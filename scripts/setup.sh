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

# The trainer's fused attention on the GPU: cuDNN's C++ frontend (header-only; PyPI's
# nvidia-cudnn-frontend, pinned). Only its headers are taken, into the ignored .deps/cudnn-frontend,
# where cmake/fp8_cudnn.cmake finds them (the GPU check carries .deps to the GPU machine).
frontend_version=1.32.0
frontend_dir=$(cd "$(dirname "$0")/.." && pwd)/.deps/cudnn-frontend
if [[ $(cat "$frontend_dir/VERSION" 2>/dev/null) != "$frontend_version" ]]; then
  echo "setup: fetching the cuDNN frontend $frontend_version headers into $frontend_dir"
  wheels=$(mktemp -d)
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 -d "$wheels" "nvidia-cudnn-frontend==$frontend_version"
  rm -rf "$frontend_dir"
  python3 - "$wheels" "$frontend_dir" <<'PY'
import pathlib, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("*.whl"))
with zipfile.ZipFile(wheel) as archive:
    headers = [name for name in archive.namelist() if name.startswith("include/") and not name.endswith("/")]
    if not any(name == "include/cudnn_frontend.h" for name in headers):
        sys.exit(f"setup: {wheel.name} has no include/cudnn_frontend.h")
    archive.extractall(sys.argv[2], members=headers)
PY
  rm -rf "$wheels"
  echo "$frontend_version" >"$frontend_dir/VERSION"
fi
