#!/usr/bin/env bash
# Builds the GPU parts on a GPU machine, runs the `gpu` tests, the GEMM and quantize benchmarks,
# the interleaved torch._scaled_mm comparison and compute-sanitizer (memcheck, racecheck,
# initcheck), writes full logs into a folder as it goes, renders the speedup plot into docs/, and
# prints a short table last. Steps run in order of importance within a time budget, so that a run
# cut short still leaves the most important logs and a table of what ran.
#
#   bench/gpu_check.sh <log-folder> [--quick] [--all-tests] [--budget SECONDS] [--docs FOLDER]
#                      [--archive FILE.tar.gz] [--no-sweeps]
#
#   --quick      smaller benchmark sizes (the whole check in under about 9 minutes on an H100)
#   --all-tests  also build and run the whole ctest suite (trainer and CPU tests included)
#   --budget     seconds the whole check may take (default 540); a step that would start with less
#                than it needs (its own limit up to 60 s, half of a longer one, at least 60 s) is
#                listed as NOT RUN rather than started and cut
#   --docs       where cuda_results.md and the speedup plot go (default: the repository's docs/)
#   --archive    also pack the log folder and the generated docs into one .tar.gz when the check
#                ends, however it ends (one file to bring back from the GPU machine)
#   --no-sweeps  leave out the 2^32-float conversion sweeps (about 150 s; the only step that tests
#                the conversions on every float): listed as NOT RUN by choice, not counted as a
#                failure; for a run whose budget cannot hold them when the conversions have not
#                changed since the last run that passed them
#
# Needs: CUDA toolkit (nvcc, cuBLASLt, compute-sanitizer) at /usr/local/cuda or on PATH, CMake,
# Ninja or Make, Python 3; PyTorch for the _scaled_mm comparison, matplotlib for the plot.
# Without doctest / Eigen / nlohmann-json / CLI11 packages, copies of their headers are taken from
# .deps/include (.deps/include/doctest, .deps/include/eigen3, .deps/include/nlohmann, .deps/include/CLI),
#   mkdir -p .deps/include && cp -r /usr/include/{doctest,eigen3,nlohmann,CLI} .deps/include/
# (the trainer's CUDA layers and their gpu test need the last two).
# A driver older than the toolkit is a failure (first step), never a skipped test.
# Never changes clocks, power limits or any other card setting.
set -uo pipefail

if [[ $# -lt 1 ]]; then
  awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"  # the header comment above
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
logs=$(mkdir -p "$1" && cd "$1" && pwd)
shift
quick=""
all_tests=0
budget=540
docs=$root/docs
archive=""
sweeps=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) quick="--quick" ;;
    --all-tests) all_tests=1 ;;
    --budget) budget=$2; shift ;;
    --docs) docs=$(mkdir -p "$2" && cd "$2" && pwd); shift ;;
    --no-sweeps) sweeps=0 ;;
    --archive) archive=$(mkdir -p "$(dirname "$2")" && cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift ;;
    *) echo "gpu_check: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
export PATH=/usr/local/cuda/bin:$PATH
# pack: the logs and the generated docs in one archive (--archive), on every exit.
pack() {
  [[ -n $archive ]] || return 0
  local staging
  staging=$(mktemp -d)
  mkdir -p "$staging/gpu_check/docs"
  cp -r "$logs" "$staging/gpu_check/logs"
  for file in "$docs"/cuda_results.md "$docs"/fp8_gemm_speedup.*; do
    [[ -f $file ]] && cp "$file" "$staging/gpu_check/docs/"
  done
  tar -czf "$archive" -C "$staging" gpu_check && echo "gpu_check: packed into $archive"
  rm -rf "$staging"
}
trap pack EXIT
build=$root/build-gpu
steps=$logs/steps.csv
echo "step,result,seconds" >"$steps"
failures=0
started=$SECONDS

# record <step> <status> <log> <seconds>: one line of the summary table.
record() {
  local result=PASS
  if [[ $2 -eq 124 ]]; then result="FAIL (timed out; see $(basename "$3"))"; failures=$((failures + 1))
  elif [[ $2 -ne 0 ]]; then result="FAIL (exit $2; see $(basename "$3"))"; failures=$((failures + 1)); fi
  echo "$1,$result,$4" >>"$steps"
  echo "gpu_check: $1: $result (${4}s)"
}
# step <name> <log> <max-seconds> <command...>: runs a command with a time limit, unless the budget
# has too little left for it (its own limit up to 60 s, half of a longer one: the limits are about
# twice what a step took, and a step started only to be cut would report a timeout that says
# nothing about the code); records its outcome. A command that ignores the TERM at its limit is
# killed 10 s later.
step() {
  local name=$1 log=$2 limit=$3
  shift 3
  local left=$((budget - (SECONDS - started)))
  local needs=$((limit <= 60 ? limit : (limit / 2 > 60 ? limit / 2 : 60)))
  if [[ $left -lt $needs ]]; then
    echo "$name,NOT RUN (time budget spent),0" >>"$steps"
    echo "gpu_check: $name: NOT RUN (time budget spent)"
    failures=$((failures + 1))
    return 1
  fi
  [[ $limit -gt $left ]] && limit=$left
  local begin=$SECONDS
  timeout -k 10 "$limit" "$@" >"$log" 2>&1
  local status=$?
  record "$name" $status "$log" $((SECONDS - begin))
  return $status
}

# --- The machine ---------------------------------------------------------------------------------
{
  date
  nvidia-smi || echo "nvidia-smi failed"
  nvcc --version
  cmake --version | head -1
  python3 --version
  python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)" 2>&1
} >"$logs/environment.log" 2>&1
if ! nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader >"$logs/device.txt" 2>>"$logs/environment.log"; then
  echo "gpu_check: no GPU visible (nvidia-smi failed); see $logs/environment.log" >&2
  echo "nvidia-smi,FAIL (no GPU visible),0" >>"$steps"
  exit 1
fi
echo "gpu_check: $(head -1 "$logs/device.txt")"

# The driver must support the toolkit's CUDA version: otherwise every CUDA call fails, and that is
# a broken machine, not a missing device.
driver_cuda=$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1)
toolkit_cuda=$(nvcc --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p' | head -1)
version_number() { awk -F. '{print $1 * 100 + $2}' <<<"$1"; }
if [[ -z $driver_cuda || -z $toolkit_cuda ]]; then
  echo "driver vs toolkit,FAIL (could not read versions: driver '$driver_cuda' toolkit '$toolkit_cuda'),0" >>"$steps"
  failures=$((failures + 1))
elif [[ $(version_number "$driver_cuda") -lt $(version_number "$toolkit_cuda") ]]; then
  echo "driver vs toolkit,FAIL (driver supports CUDA $driver_cuda; toolkit is $toolkit_cuda: update the driver),0" >>"$steps"
  echo "gpu_check: the driver supports CUDA $driver_cuda, older than the toolkit's $toolkit_cuda: a failure" >&2
  failures=$((failures + 1))
else
  echo "driver vs toolkit,PASS (driver CUDA $driver_cuda >= toolkit $toolkit_cuda),0" >>"$steps"
fi

# --- Build ----------------------------------------------------------------------------------------
# Warnings do not stop this build (a newer host compiler may bring new ones): the step after it
# lists them and fails, while everything else still builds, runs and is measured.
keep_going=(-- -k)  # one target that fails to compile must not keep the others from building
command -v ninja >/dev/null && keep_going=(-- -k 0)  # configure_gpu.sh takes Ninja where there is one
# For this GPU's architecture (sm_90a on Hopper); its log's first line names it.
step "configure" "$logs/configure.log" 120 "$root/bench/cuda/configure_gpu.sh" "$build" || {
  echo; tail -3 "$logs/configure.log"; python3 "$root/bench/cuda/summarize.py" "$logs"; exit 1; }
gpu_targets=(test_device_convert test_device_quantize test_device_small_formats test_cublaslt_gemm test_cublaslt_paths
             test_cublaslt_checks test_cublaslt_wrapper test_kernel_arguments test_linear_plan test_linear_layer
             test_linear_fake_quant test_linear_step bench_gemm bench_quantize bench_layer)
# The trainer's CUDA layers, where its dependencies (nlohmann-json, CLI11) were found.
[[ -z $(grep -l "trainer_test_cuda_layers" "$build/examples/trainer/tests/CTestTestfile.cmake" 2>/dev/null) ]] ||
  gpu_targets+=(trainer_test_cuda_layers trainer_test_cuda_training trainer_test_attention_choice)
# bench_trainer's kernel trace, where CUPTI was found beside the toolkit.
if grep -q '/bench/cuda/test_kernel_trace"' "$build/bench/cuda/CTestTestfile.cmake" 2>/dev/null; then
  gpu_targets+=(test_kernel_trace)
else
  echo "test_kernel_trace,NOT RUN (no CUPTI beside the toolkit: bench_trainer traces no kernels),0" >>"$steps"
fi
# The NCCL reducer and all-gather, where NCCL was found (else the test is not a gpu test).
if grep -q '/tests/distributed/test_nccl"' "$build/tests/distributed/CTestTestfile.cmake" 2>/dev/null; then
  gpu_targets+=(test_nccl)
fi
step "build (GPU tests and benchmarks)" "$logs/build.log" 360 \
  cmake --build "$build" -j "$(nproc)" --target "${gpu_targets[@]}" "${keep_going[@]}"
step "compiler warnings (none allowed)" "$logs/warnings.log" 10 \
  bash -c "! grep -nE '[Ww]arning( #[0-9A-Za-z-]+)? ?:' '$logs/build.log'"
if [[ $all_tests -eq 1 ]]; then
  step "build (everything)" "$logs/build_all.log" 300 cmake --build "$build" -j "$(nproc)"
fi

# --- Tests ----------------------------------------------------------------------------------------
# run_gpu_tests <ctest selection...>: the selected `gpu` tests; one that skips on a machine with a GPU
# is a failure, whatever ctest's status says.
# ctest's output goes to the log as it comes (a step cut by its time limit still shows which test
# was running), and through a copy that is searched for skipped tests at the end.
run_gpu_tests() {
  local copy status
  copy=$(mktemp)
  (cd "$build" && ctest -L gpu --output-on-failure --timeout 300 "$@") 2>&1 | tee "$copy"
  status=${PIPESTATUS[0]}
  if grep -q "Skipped\|Not Run" "$copy"; then
    echo "gpu_check: a gpu test was skipped on a machine with a GPU"
    status=1
  fi
  rm -f "$copy"
  return "$status"
}
# The command line that runs run_gpu_tests with these arguments (timeout needs a program, not a function).
gpu_tests() { echo "$(declare -f run_gpu_tests); build='$build'; run_gpu_tests $*"; }
# The exhaustive conversion sweeps (2^32 floats per policy, host reference on every core) run last,
# after the benchmarks and the sanitizers, so that their host time cannot crowd those out of the budget.
# trainer_test_gpu_data_parallel (mpirun over every GPU; fp8_trainer, which is not built here) needs 2
# or more GPUs and skips on one: run it by hand on such a machine (docs/distributed_training.md).
step "ctest -L gpu (kernels and GEMMs)" "$logs/ctest_gpu.log" 240 bash -c "$(gpu_tests -E "'test_device_convert|trainer_test_cuda_training|trainer_test_gpu_data_parallel'")"
# test_device_convert's cases other than the 2^32 sweeps (packing order of the scaled x2/x4 forms,
# every half and bfloat16 input, doubles, the compute-capability check): seconds, and without this
# step only the sweeps' step (left out by --no-sweeps) and a sanitizer step would run them.
step "test_device_convert (all but the every-float sweeps)" "$logs/device_convert_quick.log" 60 \
  "$build/tests/cuda/test_device_convert" '--test-case-exclude=*every float*'
step "ctest (CPU checks of the wrapper)" "$logs/ctest_cpu_checks.log" 60 \
  bash -c "cd '$build' && ctest -R 'test_cublaslt_checks|test_cublaslt_wrapper|test_kernel_arguments|test_linear_plan|trainer_test_attention_choice|trainer_test_attention_support' --output-on-failure"
if [[ $all_tests -eq 1 ]]; then
  step "ctest (all)" "$logs/ctest_all.log" 600 bash -c "cd '$build' && ctest --output-on-failure -j 4 --timeout 600"
fi

# --- Benchmarks -----------------------------------------------------------------------------------
step "bench_gemm (checks its outputs)" "$logs/bench_gemm.log" 150 "$build/bench/cuda/bench_gemm" "$logs" $quick
step "bench_quantize" "$logs/bench_quantize.log" 60 "$build/bench/cuda/bench_quantize" "$logs" $quick
step "bench_layer (GEMMs with their casts)" "$logs/bench_layer.log" 90 "$build/bench/cuda/bench_layer" "$logs" $quick
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
  step "torch._scaled_mm, interleaved" "$logs/torch_scaled_mm.log" 150 \
    python3 "$root/bench/cuda/scaled_mm.py" "$logs" --bench-gemm "$build/bench/cuda/bench_gemm" $quick
else
  echo "torch._scaled_mm,NOT RUN (no PyTorch with CUDA here),0" >>"$steps"
fi

# The plot needs matplotlib; a machine without it leaves the plot to be made from the log folder
# elsewhere (plot_speedup.py <log-folder> docs), which is no failure of the code. Its table
# (fp8_gemm_speedup.csv) needs no matplotlib: plot_speedup.py writes it either way.
if python3 -c "import matplotlib" >/dev/null 2>&1; then
  step "speedup plot (fp8_gemm_speedup.*)" "$logs/plot.log" 60 python3 "$root/bench/cuda/plot_speedup.py" "$logs" "$docs"
else
  timeout -k 10 60 python3 "$root/bench/cuda/plot_speedup.py" "$logs" "$docs" >"$logs/plot.log" 2>&1
  table="the table fp8_gemm_speedup.csv written"
  grep -q "^wrote .*fp8_gemm_speedup.csv" "$logs/plot.log" || table="no table either: see plot.log"
  echo "speedup plot (fp8_gemm_speedup.*),NOT RUN (no matplotlib here; $table; run plot_speedup.py on the log folder for the plot),0" >>"$steps"
fi

# The trainer's GPU loop against its CPU loop (trains on both devices: mostly CPU time, so after the
# benchmarks: a slow host must not crowd the figures out of the budget). It runs in the background,
# beside the sanitizer steps below (on the first H100 run, one after the other, the two took 128 s and
# over 200 s of the 540): its result is recorded when it ends, and waited for before the summary.
trainer_loop_pid=""
if [[ " ${gpu_targets[*]} " == *" trainer_test_cuda_training "* ]]; then
  (step "ctest (trainer --device cuda vs cpu)" "$logs/ctest_trainer_cuda.log" 360 \
     bash -c "$(gpu_tests -R trainer_test_cuda_training)") &
  trainer_loop_pid=$!
fi

# --- compute-sanitizer (the 2^32 sweeps and the large cases are left out: too slow under it) -------
# Some virtualised GPU machines run CUDA programs but not the sanitizers ("Device not supported",
# then error 999 at the first allocation): once a sanitizer step says so, the rest are listed as
# NOT RUN for that reason instead of each failing alike.
sanitizer_refused=0
# racecheck replays every shared-memory access: several times memcheck's time, so it gets a longer limit.
sanitize() {  # sanitize <tool> <program, relative to the build directory> [doctest arguments...]
  local tool=$1 program=$2 name limit=120
  [[ $tool == racecheck ]] && limit=240
  name=$(basename "$program")
  shift 2
  if [[ $sanitizer_refused -eq 1 ]]; then
    echo "compute-sanitizer $tool $name,NOT RUN (compute-sanitizer does not support this device here),0" >>"$steps"
    failures=$((failures + 1))
    return 1
  fi
  local log="$logs/sanitizer_${tool}_${name}.log"
  step "compute-sanitizer $tool $name" "$log" "$limit" \
    compute-sanitizer --tool "$tool" --error-exitcode 99 "$build/$program" "$@"
  local status=$?
  grep -q "Device not supported" "$log" 2>/dev/null && sanitizer_refused=1
  return $status
}
# In order of what they guard, as the budget may end the list early: memcheck of the programs whose
# kernels and calls changed most (the quantize kernels, the GEMM paths, the linear layer, the
# trainer's layers), racecheck of the kernels that share memory, then the rest.
if command -v compute-sanitizer >/dev/null; then
  exclude='--test-case-exclude=*large case*,*every float*'
  # Without the case that asks cudaMalloc for 4 PiB on purpose: the sanitizers report the failed
  # call (cudaErrorMemoryAllocation) as an error of the program and would fail the step for it.
  layers_exclude='--test-case-exclude=*allocation the device cannot serve*'
  sanitize memcheck tests/cuda/test_device_quantize "$exclude"
  sanitize memcheck tests/cuda/test_cublaslt_paths
  sanitize memcheck tests/cuda/test_linear_layer
  # The trainer's CUDA layers (built above where the trainer's dependencies were found).
  if [[ -x $build/examples/trainer/tests/trainer_test_cuda_layers ]]; then
    sanitize memcheck examples/trainer/tests/trainer_test_cuda_layers "$layers_exclude"
  fi
  # racecheck and initcheck without the misaligned-pointer cases: they take the scalar paths through
  # the same shared-memory code and buffers as the aligned cases, at several times their number of
  # launches (memcheck, which sees a scalar path's stray access, keeps them).
  sanitize racecheck tests/cuda/test_device_quantize "$exclude,*misaligned pointers*"
  sanitize memcheck tests/cuda/test_linear_fake_quant
  sanitize memcheck tests/cuda/test_cublaslt_gemm
  sanitize initcheck tests/cuda/test_device_quantize "$exclude,*misaligned pointers*"
  sanitize memcheck tests/cuda/test_device_convert "$exclude"
  # initcheck without the attention cases: on the first H100 run it reported the softmax's reads of
  # the scores, which a cuBLAS product had just written in full (beta 0), as reads of uninitialised
  # memory, once per thread, until the step ran out of time: it does not see those library kernels'
  # writes. memcheck keeps the attention cases.
  if [[ -x $build/examples/trainer/tests/trainer_test_cuda_layers ]]; then
    sanitize initcheck examples/trainer/tests/trainer_test_cuda_layers "$layers_exclude,*attention*"
  fi
else
  echo "compute-sanitizer,NOT RUN (not on PATH),0" >>"$steps"
  failures=$((failures + 1))
fi

# The trainer's loop (started before the sanitizers): its step wrote its own line; a failure counts.
if [[ -n $trainer_loop_pid ]] && ! wait "$trainer_loop_pid"; then
  failures=$((failures + 1))
fi

# The conversion sweeps last: 2^32 floats per policy against a host reference, minutes of mostly
# host time, and the least likely step to fail once the kernels' own tests pass.
# They take about 150 s: with less of the budget left they are listed as not run rather than cut.
if ((sweeps == 0)); then
  echo "ctest -L gpu (conversions, every float),NOT RUN (--no-sweeps: left out by choice),0" >>"$steps"
elif ((budget - (SECONDS - started) < 160)); then
  echo "ctest -L gpu (conversions, every float),NOT RUN (needs about 150 s; under 160 s of the budget left),0" >>"$steps"
  failures=$((failures + 1))
else
  step "ctest -L gpu (conversions, every float)" "$logs/ctest_gpu_convert.log" 200 bash -c "$(gpu_tests -R test_device_convert)"
fi

# --- Summary --------------------------------------------------------------------------------------
echo
python3 "$root/bench/cuda/summarize.py" "$logs" --docs "$docs"
echo "full logs: $logs ($((SECONDS - started)) s)"
exit $((failures > 0 ? 1 : 0))
