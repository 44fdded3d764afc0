#!/usr/bin/env bash
# Rehearses a GPU run on a machine without a GPU, in an environment shaped like the GPU machine's:
# runs COMMAND (from the repository root) in a private mount namespace where
#   - the system headers of doctest, Eigen, nlohmann-json and CLI11 are hidden (the GPU machine has
#     none: they travel in .deps/include, which this script fills as docs/gpu_run.md says);
#   - cuDNN and NCCL are hidden from the CUDA toolkit and come only from the Python packages PyTorch
#     installs there (nvidia-cudnn-cu13, nvidia-nccl-cu13, at the versions PyTorch 2.11 pins);
#   - cmake is PyPI's CMake 4 (the GPU machine's), not Debian's 3.25;
#   - nvidia-smi is a stand-in that answers like an H100, so the scripts get past their device query.
# Nothing outside the namespace changes, and the stand-in exists only inside it: a real run never
# sees it. Every gpu test and benchmark then fails with its "no CUDA device" or driver message; what
# the rehearsal checks is everything before and around them (configure, build, CPU checks, summary,
# archives). Needs root (mount namespaces) and PyPI; the wheels (about 450 MB) are kept in the cache.
#
#   bench/cuda/rehearse.sh [--cache DIR] COMMAND...      (default cache: ~/.cache/fp8-rehearsal)
#   e.g. bench/cuda/rehearse.sh bench/gpu_check.sh /tmp/rehearsal/logs --quick --budget 3600 \
#          --docs /tmp/rehearsal/docs --archive /tmp/rehearsal/gpu_check.tar.gz
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${HOME:-/root}/.cache/fp8-rehearsal
if [[ ${1:-} == --cache ]]; then
  cache=$(realpath -m "$2")
  shift 2
fi
if (($# == 0)); then
  echo "usage: $0 [--cache DIR] COMMAND..." >&2
  exit 2
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "rehearse: needs root (it hides files in a mount namespace)" >&2
  exit 2
fi

# The GPU machine's versions: PyTorch 2.11's pins, and a CMake 4 as PyPI ships it.
cudnn=nvidia-cudnn-cu13==9.19.0.56
nccl=nvidia-nccl-cu13==2.28.9
cmake4=cmake==4.4.4
site=$cache/site
if [[ ! -f $site/.complete ]]; then
  echo "rehearse: fetching $cudnn, $nccl and $cmake4 into $cache"
  rm -rf "$site" "$cache/wheels"
  mkdir -p "$site" "$cache/wheels"
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_18_x86_64 \
    --platform manylinux2014_x86_64 -d "$cache/wheels" "$cudnn" "$nccl"
  for wheel in "$cache/wheels"/*.whl; do python3 -m zipfile -e "$wheel" "$site"; done
  rm -rf "$cache/wheels"
  python3 -m pip install --quiet --target "$cache/cmake4" "$cmake4"
  touch "$site/.complete"
fi

# The headers the GPU machine lacks travel in .deps/include (docs/gpu_run.md).
mkdir -p "$root/.deps/include"
for header in doctest eigen3 nlohmann CLI; do
  [[ -e $root/.deps/include/$header ]] || cp -r "/usr/include/$header" "$root/.deps/include/"
done

# What runs inside the namespace (its arguments: the repository root, the cache, then COMMAND).
read -r -d '' namespace <<'NAMESPACE' || true
set -euo pipefail
root=$1 cache=$2
shift 2
# In the cache, not /tmp: hard links need the toolkit's file system.
scratch=$(mktemp -d -p "$cache")
trap 'rm -rf "$scratch"' EXIT
mount --make-rprivate /
for header in doctest eigen3 nlohmann CLI; do
  [[ -d /usr/include/$header ]] && mount --bind "$(mktemp -d)" "/usr/include/$header"
done
# The toolkit's folders without cuDNN and NCCL: hard links (a symbolic link's real path would lead
# back to the hidden files) of everything else, mounted over the originals.
cuda=$(realpath /usr/local/cuda)
for folder in "$cuda"/include "$cuda"/lib "$cuda"/lib64 "$cuda"/targets/*/include "$cuda"/targets/*/lib; do
  [[ -d $folder && ! -L $folder ]] || continue
  shadow=$scratch/shadow$(echo "$folder" | tr / _)
  mkdir -p "$shadow"
  for entry in "$folder"/*; do
    case $(basename "$entry") in
      cudnn* | nccl* | libcudnn* | libnccl*) ;;
      *) cp -al "$entry" "$shadow/" || { echo "rehearse: cannot hard-link $entry into $cache" >&2; exit 1; } ;;
    esac
  done
  mount --bind "$shadow" "$folder"
done
mkdir -p "$scratch/bin"
cat >"$scratch/bin/nvidia-smi" <<'SMI'
#!/bin/bash
case "$*" in
  *name,compute_cap,driver_version*) echo "NVIDIA H100 80GB HBM3 (rehearsal), 9.0, 580.65.06" ;;
  *--query-gpu=name*) echo "NVIDIA H100 80GB HBM3 (rehearsal)" ;;
  *--query-gpu=compute_cap*) echo "9.0" ;;
  *) echo "| Driver Version: 580.65.06   CUDA Version: 13.0 |" ;;
esac
SMI
chmod +x "$scratch/bin/nvidia-smi"
export PATH=$scratch/bin:$cache/cmake4/cmake/data/bin:$PATH
export PYTHONPATH=$cache/site${PYTHONPATH:+:$PYTHONPATH}
cd "$root"
"$@"
NAMESPACE
unshare --mount bash -c "$namespace" rehearse "$root" "$cache" "$@"
