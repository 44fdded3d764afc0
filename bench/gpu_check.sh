#!/usr/bin/env bash
# Builds everything on a GPU machine, runs the `gpu` tests (plus compute-sanitizer memcheck and
# racecheck), the GEMM and quantize benchmarks and the torch._scaled_mm comparison, writes full logs
# to a folder, renders the speedup plot into docs/, and prints a short table last.
#
#   bench/gpu_check.sh <log-folder> [--quick] [--all-tests]
#
#   --quick      smaller benchmark sizes (a few minutes instead of ~15)
#   --all-tests  run the whole ctest suite, not only the `gpu` label
#
# Needs: CUDA toolkit (nvcc, cuBLASLt, compute-sanitizer) at /usr/local/cuda or on PATH, CMake, Ninja
# or Make, Python 3; PyTorch for the _scaled_mm comparison and matplotlib for the plot (optional).
# Without doctest / Eigen packages, copies of their headers are looked for in .deps/include (carry
# /usr/include/doctest and /usr/include/eigen3 there: .deps/include/doctest, .deps/include/eigen3).
# Never changes clocks, power limits or any other card setting.
set -uo pipefail

if [[ $# -lt 1 ]]; then
  sed -n '2,16p' "$0"
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
logs=$(mkdir -p "$1" && cd "$1" && pwd)
shift
quick=""
all_tests=0
for option in "$@"; do
  case $option in
    --quick) quick="--quick" ;;
    --all-tests) all_tests=1 ;;
    *) echo "gpu_check: unknown option $option" >&2; exit 2 ;;
  esac
done
export PATH=/usr/local/cuda/bin:$PATH
build=$root/build-gpu
steps=$logs/steps.csv
echo "step,result" >"$steps"
failures=0

# record <step> <status>: one line of the summary table.
record() {
  local result=PASS
  if [[ $2 -ne 0 ]]; then result="FAIL (exit $2; see $(basename "$3"))"; failures=$((failures + 1)); fi
  echo "$1,$result" >>"$steps"
  echo "gpu_check: $1: $result"
}

# --- The machine ---------------------------------------------------------------------------------
{
  date
  nvidia-smi || echo "nvidia-smi failed"
  nvcc --version
  cmake --version | head -1
  python3 --version
} >"$logs/environment.log" 2>&1
if ! nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader >"$logs/device.txt" 2>>"$logs/environment.log"; then
  echo "gpu_check: no GPU visible (nvidia-smi failed); see $logs/environment.log" >&2
  exit 1
fi
capability=$(head -1 "$logs/device.txt" | awk -F', ' '{print $2}')
case $capability in
  9.0) architecture=90a ;;  # Hopper: architecture-specific instructions allowed
  *) architecture=${capability/./} ;;
esac
echo "gpu_check: $(head -1 "$logs/device.txt"), building for sm_$architecture"

# --- Build ----------------------------------------------------------------------------------------
configure=(-S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$architecture"
           -DFP8_ENABLE_CUDA=ON)
command -v ninja >/dev/null && configure+=(-G Ninja)
[[ -f /usr/include/doctest/doctest.h || -f $root/.deps/include/doctest/doctest.h ]] || {
  echo "gpu_check: doctest headers not found (install doctest-dev or copy them to .deps/include/doctest)" >&2
  exit 1
}
[[ -f /usr/include/eigen3/Eigen/Core || -f $root/.deps/include/eigen3/Eigen/Core ]] || {
  echo "gpu_check: Eigen headers not found (install libeigen3-dev or copy them to .deps/include/eigen3)" >&2
  exit 1
}
[[ -f /usr/include/doctest/doctest.h ]] || configure+=(-DFP8_DOCTEST_INCLUDE_DIR="$root/.deps/include")
[[ -f /usr/include/eigen3/Eigen/Core ]] || configure+=(-DFP8_EIGEN_INCLUDE_DIR="$root/.deps/include/eigen3")
cmake "${configure[@]}" >"$logs/configure.log" 2>&1
record "configure" $? "$logs/configure.log"
cmake --build "$build" -j "$(nproc)" >"$logs/build.log" 2>&1
status=$?
record "build (everything)" $status "$logs/build.log"
if [[ $status -ne 0 ]]; then
  # Something else failed to build: still build what this check runs, so its results are not lost.
  cmake --build "$build" -j "$(nproc)" --target test_device_convert test_device_quantize test_cublaslt_gemm \
    test_cublaslt_checks test_kernel_arguments bench_gemm bench_quantize >"$logs/build_gpu_targets.log" 2>&1
  record "build (the GPU tests and benchmarks alone)" $? "$logs/build_gpu_targets.log"
fi

# --- Tests ----------------------------------------------------------------------------------------
if [[ $all_tests -eq 1 ]]; then
  (cd "$build" && ctest --output-on-failure -j 4 --timeout 1500) >"$logs/ctest_all.log" 2>&1
  record "ctest (all)" $? "$logs/ctest_all.log"
fi
(cd "$build" && ctest -L gpu --output-on-failure --timeout 1500) >"$logs/ctest_gpu.log" 2>&1
status=$?
if grep -q "Not Run\|Skipped\|\*\*\*Skipped" "$logs/ctest_gpu.log"; then
  echo "gpu_check: some gpu tests were skipped on a machine with a GPU" >&2
  status=1
fi
record "ctest -L gpu" $status "$logs/ctest_gpu.log"

# compute-sanitizer on the kernels (the exhaustive 2^32 sweeps are left out: too slow under it).
sanitize() {  # sanitize <tool> <program> [doctest arguments...]
  local tool=$1 program=$2
  shift 2
  local log=$logs/sanitizer_${tool}_$(basename "$program").log
  compute-sanitizer --tool "$tool" --error-exitcode 99 "$build/tests/cuda/$program" "$@" >"$log" 2>&1
  record "compute-sanitizer $tool $program" $? "$log"
}
if command -v compute-sanitizer >/dev/null; then
  sanitize memcheck test_device_quantize
  sanitize racecheck test_device_quantize
  sanitize initcheck test_device_quantize
  sanitize memcheck test_device_convert --test-case-exclude="*every float*"
  sanitize memcheck test_cublaslt_gemm
else
  echo "compute-sanitizer,NOT RUN (not on PATH)" >>"$steps"
  failures=$((failures + 1))
fi

# --- Benchmarks -----------------------------------------------------------------------------------
"$build/bench/cuda/bench_gemm" "$logs" $quick >"$logs/bench_gemm.log" 2>&1
record "bench_gemm" $? "$logs/bench_gemm.log"
"$build/bench/cuda/bench_quantize" "$logs" $quick >"$logs/bench_quantize.log" 2>&1
record "bench_quantize" $? "$logs/bench_quantize.log"
python3 "$root/bench/cuda/scaled_mm.py" "$logs" $quick >"$logs/torch_scaled_mm.log" 2>&1
status=$?
if [[ $status -eq 3 ]]; then
  echo "torch._scaled_mm,NOT RUN ($(tail -1 "$logs/torch_scaled_mm.log"))" >>"$steps"
else
  record "torch._scaled_mm comparison" $status "$logs/torch_scaled_mm.log"
fi
python3 "$root/bench/cuda/plot_speedup.py" "$logs" "$root/docs" >"$logs/plot.log" 2>&1
record "speedup plot (docs/fp8_gemm_speedup.*)" $? "$logs/plot.log"

# --- Summary --------------------------------------------------------------------------------------
echo
python3 "$root/bench/cuda/summarize.py" "$logs" --docs "$root/docs"
echo "full logs: $logs"
exit $((failures > 0 ? 1 : 0))
