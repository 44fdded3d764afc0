#!/usr/bin/env bash
# Compile time of including fp8's headers, beside CUDA's own cuda_fp8.h, for one translation unit that
# converts a float. Each figure is the best of N compilations (-O2, object written to /dev/null), the
# whole compiler run; the empty translation unit is listed as the floor. Best-of because the machine
# may be shared: other load only ever adds time.
#
#   bench/compile_time.sh [N] [compiler]        (default: 5 runs, c++)
set -euo pipefail

runs=${1:-5}
cxx=${2:-c++}
root=$(cd "$(dirname "$0")/.." && pwd)
cuda_include=${CUDA_INCLUDE:-/usr/local/cuda/include}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# name | include line | code using it
cases=(
  "empty translation unit||int use(float x) { return int(x); }"
  "<fp8/types.hpp> (the types)|#include <fp8/types.hpp>|int use(float x) { return fp8::fp8_e4m3(x).bits() + int(float(fp8::fp4_e2m1(x))); }"
  "<fp8/float8.hpp>|#include <fp8/float8.hpp>|int use(float x) { return fp8::fp8_e4m3(x).bits(); }"
  "<fp8/io.hpp> (types + operator<<)|#include <fp8/io.hpp>|int use(float x) { return fp8::fp8_e4m3(x).bits(); }"
  "<fp8/quantize/mx.hpp> + nvfp4.hpp|#include <fp8/quantize/mx.hpp>
#include <fp8/quantize/nvfp4.hpp>|int use(float x) { return fp8::fp8_e4m3(x).bits(); }"
  "<fp8/fp8.hpp> (umbrella)|#include <fp8/fp8.hpp>|int use(float x) { return fp8::fp8_e4m3(x).bits(); }"
  "<cuda_fp8.h> (CUDA 13, host)|#include <cuda_fp8.h>|int use(float x) { return __nv_fp8_e4m3(x).__x; }"
)

best_time() {  # file, extra flags...
  local file=$1
  shift
  local best=""
  for ((i = 0; i < runs; ++i)); do
    local start end
    start=$(date +%s.%N)
    "$cxx" -std=c++17 -O2 -I"$root/include" "$@" -c "$file" -o /dev/null
    end=$(date +%s.%N)
    best=$(echo "$start $end ${best:-1e9}" | awk '{t = $2 - $1; print (t < $3 ? t : $3)}')
  done
  echo "$best"
}

echo "compiler: $("$cxx" --version | head -1); best of $runs"
echo
echo "| header | seconds |"
echo "|---|---|"
index=0
for case in "${cases[@]}"; do
  name=${case%%|*}
  rest=${case#*|}
  include=${rest%%|*}
  code=${rest#*|}
  file="$work/case$index.cpp"
  printf '%s\n%s\n' "$include" "$code" > "$file"
  extra=()
  if [[ "$include" == *cuda_fp8.h* ]]; then
    if [[ ! -f "$cuda_include/cuda_fp8.h" ]]; then
      echo "| $name | (no CUDA toolkit at $cuda_include) |"
      index=$((index + 1))
      continue
    fi
    extra=(-isystem "$cuda_include")
  fi
  printf '| %s | %.3f |\n' "$name" "$(best_time "$file" "${extra[@]}")"
  index=$((index + 1))
done
