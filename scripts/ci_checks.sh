#!/usr/bin/env bash
# The CI checks that follow the main suite (scripts/test.sh), about 15 minutes on 2 cores:
#   0. Format: every C++ and CUDA file of the tree as clang-format (.clang-format) would write it.
#   1. Configure without a CUDA toolkit (nvcc hidden, find_package(CUDAToolkit) disabled): the host
#      library and its tests configure and build, and the tests whose reference is CUDA's cuda_fp8.h
#      report themselves skipped.
#   1b. Configure with PyPI's CMake 4 (what the GPU machines carry) and the CUDA driver stub hidden:
#      the configure completes, and the test that needs the stub is listed as skipped.
#   2. Sanitizers: the host code (library tests, the trainer and its tests, the fuzz targets) built with
#      clang-14, AddressSanitizer and UndefinedBehaviorSanitizer, no recovery; the suite runs without
#      the 2^32 sweeps (label exhaustive, and the sweep cases of the kernel tests), GPU tests and
#      packaging tests (nested builds).
#   3. Fuzzing (libFuzzer): every committed reproducer in fuzz/regressions/<target>/ is replayed, then
#      each target fuzzes for FP8_FUZZ_SECONDS (default 60) from fuzz/corpus/<target>/, two at a time.
#      A finding stops the run; its reproducer is in <work-dir>/fuzz-artifacts/<target>/ and belongs in
#      fuzz/regressions/<target>/ once fixed.
# Usage: scripts/ci_checks.sh [work-dir]     (default: build-ci)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(realpath -m "${1:-$root/build-ci}")
fuzz_seconds=${FP8_FUZZ_SECONDS:-60}
jobs=$(nproc)
started=$SECONDS
step() { echo "== ci_checks [$((SECONDS - started)) s]: $*"; }

"$root/scripts/setup.sh"
mkdir -p "$work"

# --- 0. Format ----------------------------------------------------------------------------------------
step "clang-format check"
mapfile -t sources < <(git -C "$root" ls-files '*.hpp' '*.cpp' '*.cuh' '*.cu' '*.h')
(cd "$root" && clang-format --dry-run -Werror "${sources[@]}") || {
  echo "ci_checks: the files above are not formatted; run: clang-format -i \$(git ls-files '*.hpp' '*.cpp' '*.cuh' '*.cu' '*.h')" >&2
  exit 1
}

# --- 1. No CUDA toolkit ------------------------------------------------------------------------------
step "configure without a CUDA toolkit"
# Only the system directories: CUDA's tools may also be linked from /usr/local/bin.
path_without_cuda=/usr/sbin:/usr/bin:/sbin:/bin
no_cuda=$work/no-cuda
env PATH="$path_without_cuda" CUDACXX= cmake -S "$root" -B "$no_cuda" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON -DFP8_BUILD_EXAMPLES=OFF -DFP8_BUILD_BENCH=OFF >"$work/no-cuda.log"
grep -q "no CUDA toolkit: skipping" "$work/no-cuda.log" || {
  echo "ci_checks: the configure without CUDA did not report the skipped tests" >&2
  exit 1
}
env PATH="$path_without_cuda" cmake --build "$no_cuda" -j "$jobs" --target test_scale test_checkpoint_bounds
(cd "$no_cuda" && ctest --output-on-failure -R '^(test_scale|test_checkpoint_bounds)$' &&
  ctest -L skipped | tee "$work/no-cuda-skipped.log" | grep -c '(Skipped)' | grep -qx 5) || {
  echo "ci_checks: host tests without CUDA failed, or the CUDA-referenced tests were not reported skipped" >&2
  exit 1
}

# --- 1b. CMake 4, no driver stub ----------------------------------------------------------------------
step "configure with CMake 4 (PyPI), the CUDA driver stub hidden"
cmake4_version=4.4.4
cmake4=$work/cmake4/$cmake4_version
if [[ ! -x $cmake4/cmake/data/bin/cmake ]]; then
  python3 -m pip install --quiet --target "$cmake4" "cmake==$cmake4_version"
fi
# Every folder the driver stub could be found in, through the links too.
cuda_root=$(realpath /usr/local/cuda)
hidden=()
for prefix in /usr/local/cuda "$cuda_root"; do
  for folder in lib lib64 targets/*/lib targets/*/lib64; do hidden+=("$prefix/$folder/stubs"); done
done
newest=$work/cmake4-no-stub
"$cmake4/cmake/data/bin/cmake" -S "$root" -B "$newest" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP8_ENABLE_CUDA=ON \
  "-DCMAKE_IGNORE_PATH=$(IFS=';'; echo "${hidden[*]}")" >"$work/cmake4-no-stub.log" 2>&1 || {
  tail -40 "$work/cmake4-no-stub.log" >&2
  echo "ci_checks: the configure with CMake $cmake4_version and no driver stub failed" >&2
  exit 1
}
(cd "$newest" && "$cmake4/cmake/data/bin/ctest" -R '^trainer_test_attention_support$' | grep -q '(Skipped)') || {
  echo "ci_checks: without a driver stub, trainer_test_attention_support was not reported skipped" >&2
  exit 1
}

# --- 2. Sanitizers ----------------------------------------------------------------------------------
step "sanitizer build (clang-14, ASan + UBSan, libFuzzer coverage)"
sanitize=$work/sanitize
sanitizers="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
cmake -S "$root" -B "$sanitize" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
  -DFP8_ENABLE_CUDA=OFF -DFP8_BUILD_BENCH=OFF -DFP8_BUILD_FUZZ=ON \
  "-DCMAKE_CXX_FLAGS=$sanitizers -fsanitize=fuzzer-no-link" "-DCMAKE_EXE_LINKER_FLAGS=$sanitizers" \
  >"$work/sanitize-configure.log"
cmake --build "$sanitize" -j "$jobs"
step "the suite under the sanitizers"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd "$sanitize" && ctest --output-on-failure -j "$jobs" --timeout 1500 -LE 'exhaustive|gpu|packaging' \
  -E '^test_quantize_kernels_')
# The kernel tests also sweep all 2^32 floats; under the sanitizers they run without those two cases
# (their ragged-tail cases are the ones ASan watches: nothing may be written past a buffer's end).
skip_code=77
for kernels in "$sanitize"/tests/scaling/test_quantize_kernels_*; do
  status=0
  "$kernels" --test-case-exclude='*every float bit pattern*' --no-version >"$work/$(basename "$kernels").log" 2>&1 ||
    status=$?
  case $status in
    0) echo "$(basename "$kernels"): passed (without the 2^32 sweeps)" ;;
    "$skip_code") echo "$(basename "$kernels"): skipped ($(tail -1 "$work/$(basename "$kernels").log"))" ;;
    *)
      tail -40 "$work/$(basename "$kernels").log" >&2
      echo "ci_checks: $(basename "$kernels") failed under the sanitizers" >&2
      exit 1
      ;;
  esac
done

# --- 3. Fuzzing -------------------------------------------------------------------------------------
targets=(fuzz_scaling_state fuzz_quantize fuzz_safetensors fuzz_checkpoint)
# A loader must not trust a length before checking it: any single allocation above 512 MiB is a finding.
fuzz_options=(-malloc_limit_mb=512 -rss_limit_mb=2560 -timeout=20)
step "replaying the committed reproducers"
for target in "${targets[@]}"; do
  inputs=("$root/fuzz/regressions/$target"/*)
  [[ -e ${inputs[0]} ]] || continue
  "$sanitize/fuzz/$target" "${fuzz_options[@]}" "${inputs[@]}" >"$work/$target-regressions.log" 2>&1 || {
    tail -40 "$work/$target-regressions.log" >&2
    echo "ci_checks: $target fails on a committed reproducer (see above)" >&2
    exit 1
  }
done

fuzz_one() {
  local target=$1 scratch=$work/fuzz-corpus/$1 artifacts=$work/fuzz-artifacts/$1/
  mkdir -p "$scratch" "$artifacts"
  "$sanitize/fuzz/$target" "${fuzz_options[@]}" -max_total_time="$fuzz_seconds" -print_final_stats=1 \
    -artifact_prefix="$artifacts" "$scratch" "$root/fuzz/corpus/$target" >"$work/$target.log" 2>&1
}
step "fuzzing each target for ${fuzz_seconds} s"
failed=()
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
  pids=()
  for target in "${targets[@]:i:jobs}"; do
    fuzz_one "$target" &
    pids+=("$!:$target")
  done
  for entry in "${pids[@]}"; do
    wait "${entry%%:*}" || failed+=("${entry#*:}")
  done
done
for target in "${targets[@]}"; do
  echo "$target: $(grep -m1 -o 'stat::number_of_executed_units: [0-9]*' "$work/$target.log" || echo 'no stats') runs"
done
if ((${#failed[@]})); then
  for target in "${failed[@]}"; do
    tail -40 "$work/$target.log" >&2
    echo "ci_checks: $target found a problem; the reproducer is in $work/fuzz-artifacts/$target/" >&2
  done
  exit 1
fi
step "all checks passed"
