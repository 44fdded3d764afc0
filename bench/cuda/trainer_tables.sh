#!/usr/bin/env bash
# Regenerates the tables and the plot of the trainer on the GPU (docs/trainer_cuda.md) in one go:
#   1. speed: bench_trainer at the issue's shape (d_model 4096, SwiGLU 14336, 32 heads, context 2048,
#      bytes, 4 blocks = 0.975 B parameters), BF16 vs FP8 tokens/s, model TFLOP/s, per-phase profile,
#      in two configurations of batch 2 x 2048 tokens per forward/backward pass: 1 pass per optimizer
#      step (4096 tokens: the optimizer's cost in every step) and 8 passes (gradient accumulation,
#      16 sequences, 32768 tokens per optimizer step: what a real run does, which spreads the
#      optimizer's cost over 8 times the tokens);
#   2. the PyTorch BF16 torch.compile peer of the same model in both configurations (skipped, and
#      said so, without PyTorch);
#   3. loss parity: fp8_trainer --device cuda, d_model 1024, 8 blocks, lr 1e-3: BF16, FP8 delayed (the
#      default recipe), FP8 current, FP8 blocks (current scaling, 1x128 / 128x128 block scales), FP8
#      delayed with a 16-step amax history, without fast accumulation, and with the first and last
#      blocks in BF16, each with seeds 1, 2 and 3 (a seed's seven runs at once on the one GPU); and
#      the plot of the means.
#
#   bench/cuda/trainer_tables.sh <build-dir> <out-dir> [--data FILE | --data-dir DIR] [--steps N]
#                                [--quick] [--only speed|parity] [--tuned] [--budget SECONDS]
#                                [--archive FILE.tar.gz]
#
# --data: a text file for the parity runs. --data-dir: a directory of fortune cookie files (a copy of
# Debian's fortunes where the package is missing: mkdir -p .deps/fortunes && cp
# /usr/share/games/fortunes/* .deps/fortunes/), given to the trainer as --data DIR (so is a directory
# given to --data). Default: Debian's fortunes where installed, otherwise the repository's docs/*.md
# concatenated. --steps: parity steps; default 1100 on the fortunes, just under one epoch (their
# 2.31 MB of training text hold 1129 steps of 16 x 128 bytes: no window is seen twice), 600 on other
# text. --quick: 2 timed steps (1 profiled) and 200 parity steps. --only: run one part (1 and 2, or
# 3), leaving the other part's files in <out-dir> as they are: where one command may not run long
# enough for both, run --only speed and then --only parity (the page is written from what the
# folder holds; on another machine, unpack both archives into one folder and run
# bench/cuda/trainer_results.py on it). --tuned: the speed part also runs the 8-pass configuration
# with every GEMM tuned on its first call (bench_trainer --gemm-tuning on) into speed_passes8_tuned/,
# which the page shows beside the untuned one. --budget: the seconds the whole script may take
# (default: no limit, and nothing is timed out); every program runs under `timeout` within what is
# left and a limit of its own (400 s for the build, 240 for each speed run, 480 for a seed's parity
# runs), a program that would start with under 30 s left is listed as not run, and 15 s are kept
# for the page and the archive, so that a command with a time limit above the budget ends with both
# written (a command killed from outside loses the archive). --archive: also pack <out-dir> into one
# .tar.gz at the end, however the script ends. Where <build-dir> lacks bench_trainer or
# fp8_trainer (a fresh machine), they are configured (bench/cuda/configure_gpu.sh, unless the folder
# has a CMake cache) and built first, logged in <out-dir>/build.log. Writes <out-dir>/trainer_cuda_results.md,
# speed_passes{1,8}/ (speed.csv, profile.csv, kernels.csv, timeline.csv, torch_peer.csv and the two
# programs' logs), runs/<config>-s<seed>/log.csv, parity_<config>-s<seed>.log and loss_parity.png.
# GPU only.
set -uo pipefail
if [[ $# -lt 2 ]]; then
  awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"  # the header comment above
  exit 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(mkdir -p "$1" && cd "$1" && pwd) || exit 2
out=$(mkdir -p "$2" && cd "$2" && pwd) || exit 2
shift 2
data=""
data_dir=""
archive=""
only=""
steps=""
tuned=0
budget=0
timed=10
profiled=3
while [[ $# -gt 0 ]]; do
  case $1 in
    --data) data=$2; shift ;;
    --data-dir) data_dir=$2; shift ;;
    --steps) steps=$2; shift ;;
    --quick) steps=${steps:-200}; timed=2; profiled=1 ;;
    --only)
      [[ ${2:-} == speed || ${2:-} == parity ]] || { echo "trainer_tables: --only takes speed or parity" >&2; exit 2; }
      only=$2; shift ;;
    --tuned) tuned=1 ;;
    --budget)
      [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "trainer_tables: --budget takes a whole number of seconds" >&2; exit 2; }
      budget=$2; shift ;;
    --archive) archive=$(mkdir -p "$(dirname "$2")" && cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift ;;
    *) echo "trainer_tables: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [[ -n $data && -d $data && -z $data_dir ]]; then
  data_dir=$data  # a directory is cookie files, whichever option named it
  data=""
fi
if [[ -n $data && -n $data_dir ]]; then
  echo "trainer_tables: give --data FILE or --data-dir DIR, not both" >&2
  exit 2
fi
if [[ -n $data_dir && ! -d $data_dir ]]; then
  echo "trainer_tables: --data-dir $data_dir is not a directory (copy the fortunes there:" \
    "mkdir -p .deps/fortunes && cp /usr/share/games/fortunes/* .deps/fortunes/)" >&2
  exit 2
fi
# The whole output folder in one archive (--archive), on every exit.
pack() {
  [[ -n $archive ]] || return 0
  tar -czf "$archive" -C "$(dirname "$out")" "$(basename "$out")" && echo "trainer_tables: packed into $archive"
}
trap pack EXIT
# within <seconds> <command...>: under --budget, the command under `timeout`, given at most <seconds>
# and what is left of the budget less the 15 s kept for the page and the archive, and exit 124 (as
# timeout's) without running it where under 30 s would be left; without --budget, the command as it is.
within() {
  local limit=$1
  shift
  local command=("$@")
  if ((budget > 0)); then
    local left=$((budget - SECONDS - 15))
    if ((left < 30)); then
      echo "trainer_tables: not run (under 30 s of --budget $budget left): $*" >&2
      return 124
    fi
    ((limit > left)) && limit=$left
    command=(timeout -k 10 "$limit" "$@")
  fi
  # The program's stderr goes where the caller sent it; the shell's own report of a child killed by a
  # signal ("line N: PID Killed ...") goes nowhere: the caller says what happened in words of its own.
  { "${command[@]}" 2>&3 3>&-; } 3>&2 2>/dev/null
}
# speed_run <folder> <switches...>: bench_trainer's speed configuration into <folder>, its output shown
# and kept in <folder>/bench_trainer.log; a run stopped by its time limit or by a signal cannot say
# so itself, so the log's last line says it for it (the results page quotes that line).
speed_run() {
  local folder=$1
  shift
  within 240 "$build/bench/cuda/bench_trainer" "$@" --out "$folder" 2>&1 | tee "$folder/bench_trainer.log"
  local status=${PIPESTATUS[0]}
  local last
  last=$(tail -n 1 "$folder/bench_trainer.log")
  if ((status == 124)) && [[ $last != "trainer_tables: not run"* ]]; then
    echo "trainer_tables: bench_trainer stopped at its time limit" | tee -a "$folder/bench_trainer.log"
  elif ((status > 128)); then
    echo "trainer_tables: bench_trainer was killed by signal $((status - 128))" | tee -a "$folder/bench_trainer.log"
  fi
  return "$status"
}
programs=("$build/bench/cuda/bench_trainer" "$build/examples/trainer/fp8_trainer")
if [[ ! -x ${programs[0]} || ! -x ${programs[1]} ]]; then
  echo "== building bench_trainer and fp8_trainer in $build (log: $out/build.log)"
  {
    [[ -f $build/CMakeCache.txt ]] || "$root/bench/cuda/configure_gpu.sh" "$build"
  } >"$out/build.log" 2>&1 && within 400 cmake --build "$build" -j "$(nproc)" --target bench_trainer fp8_trainer >>"$out/build.log" 2>&1
fi
for program in "${programs[@]}"; do
  [[ -x $program ]] || { echo "trainer_tables: $program is missing and did not build: see $out/build.log" >&2; exit 1; }
done
# The parity text: a directory of cookie files (read by the trainer as its default is), a file, or
# the default. About one epoch of the fortunes by default, 600 steps of other text.
fortunes=0
if [[ -n $data_dir ]]; then
  data_dir=$(cd "$data_dir" && pwd)
  data_args=(--data "$data_dir")
  data_name="Debian's fortunes (the cookie files in $data_dir)"
  fortunes=1
elif [[ -n $data ]]; then
  data_args=(--data "$data")
  data_name=$(basename "$data")
elif [[ -d /usr/share/games/fortunes ]]; then
  data_args=()  # the trainer's default text
  data_name="Debian's fortunes (the trainer's default)"
  fortunes=1
else
  data=$out/documentation.txt
  cat "$root"/docs/*.md >"$data"
  data_args=(--data "$data")
  data_name=$(basename "$data")
fi
if [[ -z $steps ]]; then
  steps=$((fortunes ? 1100 : 600))
fi
failures=0

# Speed, in two configurations of the same passes (bench_trainer's default batch 2 x context 2048):
# one pass per optimizer step, and eight accumulated, each in its own folder.
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
  have_torch=1
else
  have_torch=0
fi
export PYTHONUNBUFFERED=1  # the peer's lines reach its log as they come, also if the run is cut short
if [[ $only != parity ]]; then
  for passes in 1 8; do
    speed=$out/speed_passes$passes
    mkdir -p "$speed"
    # An earlier run's files in the same folder must not pass for this run's where a program fails.
    rm -f "$speed"/{speed,profile,kernels,timeline,torch_peer}.csv
    echo "== speed, passes per optimizer step $passes: bench_trainer"
    speed_run "$speed" --passes "$passes" --steps "$timed" --profile-steps "$profiled" || failures=$((failures + 1))
    echo "== speed, passes per optimizer step $passes: PyTorch peer"
    if ((have_torch)); then
      within 240 python3 "$root/bench/cuda/torch_peer.py" --passes "$passes" --steps "$timed" --out "$speed" 2>&1 |
        tee "$speed/torch_peer.log" || failures=$((failures + 1))
    else
      echo "no PyTorch with CUDA here: the peer did not run" | tee "$speed/torch_peer.log"
    fi
  done
  if ((tuned)); then
    # The 8-pass configuration again with every product of the linear layers tuned on its first
    # call (in the first warm-up step); no trace, no peer: the page compares it with the row above.
    speed=$out/speed_passes8_tuned
    mkdir -p "$speed"
    rm -f "$speed"/{speed,profile,kernels,timeline}.csv
    echo "== speed, 8 passes per optimizer step, every GEMM tuned: bench_trainer"
    speed_run "$speed" --passes 8 --steps "$timed" --profile-steps "$profiled" --gemm-tuning on --trace-steps 0 ||
      failures=$((failures + 1))
  fi
  echo "== speed: ${SECONDS} s since the start"
fi

# Peak learning rate 1e-3, not the trainer's default 3e-3 (tuned on its small default model): 3e-3 is
# too high for this 103M-parameter model (on an H100, 600 steps: BF16 2.19, FP8 2.36 nats/byte, and
# a run with the head in FP8 stalled), and the comparison then measures the edge of stability, not
# FP8; at 1e-3 both train well (BF16 1.485, FP8 1.501). docs/trainer_cuda.md has the runs.
# Each configuration with three seeds (weights and batch order), so that an FP8 difference is read
# against the spread of BF16 itself. The seven configurations of a seed share the GPU at once (each
# is small: 103M parameters, a few GB of GPU memory and about 2 GB of host memory, and one alone
# leaves most of an H100 idle); the seeds follow one another, which bounds the host memory and the
# contention of the processes for the GPU. Two host threads each: a GPU run's host work is the data
# loader and the launches.
configs=(bf16 fp8-delayed fp8-current fp8-blocks fp8-delayed-h16 fp8-delayed-split fp8-delayed-first-last)
declare -A config_args=(
  [bf16]="--precision bf16"
  [fp8-delayed]="--precision fp8"
  [fp8-current]="--precision fp8 --scaling current"
  [fp8-blocks]="--precision fp8 --scaling current --granularity block"
  [fp8-delayed-h16]="--precision fp8 --amax-history 16"
  [fp8-delayed-split]="--precision fp8 --fast-accumulation none"
  [fp8-delayed-first-last]="--precision fp8 --first-last-bf16"
)
if [[ $only != speed ]]; then
  seeds=(1 2 3)
  echo "== loss parity: d_model 1024, 8 blocks, lr 1e-3, ${configs[*]} x seeds ${seeds[*]}, $steps steps on $data_name"
  for seed in "${seeds[@]}"; do
    pids=()
    runs=()
    for config in "${configs[@]}"; do
      read -ra switches <<<"${config_args[$config]}"
      run=$config-s$seed
      # An earlier attempt's log.csv must not pass for this run's where this one fails to start.
      rm -rf "${out:?}/runs/$run"
      within 480 "$build/examples/trainer/fp8_trainer" --device cuda "${switches[@]}" --seed "$seed" --threads 2 --d-model 1024 \
        --layers 8 --heads 16 --hidden 2816 --lr 1e-3 --steps "$steps" "${data_args[@]}" --out "$out/runs/$run" \
        --overwrite --no-progress --no-final-save >"$out/parity_$run.log" 2>&1 &
      pids+=($!)
      runs+=("$run")
    done
    for i in "${!pids[@]}"; do
      run=${runs[$i]}
      wait "${pids[$i]}"
      status=$?
      if ((status == 0)); then
        echo "$run: $(tail -1 "$out/parity_$run.log")"
      else
        # A run killed by a signal (the OOM killer, say) cannot say so itself: its log says it for it.
        if ((status == 124)); then  # timeout's status once its TERM stopped the run
          echo "trainer_tables: stopped at its time limit (--budget $budget)" >>"$out/parity_$run.log"
        elif ((status > 128)); then
          echo "trainer_tables: fp8_trainer was killed by signal $((status - 128))" >>"$out/parity_$run.log"
        fi
        echo "parity run $run failed (exit status $status): $out/parity_$run.log"
        failures=$((failures + 1))
      fi
    done
  done
  echo "== parity: ${SECONDS} s since the start"
fi

# The tables and the plot of the parity runs' mean curves as Markdown (bench/cuda/trainer_results.py,
# tested on the CPU); a part that did not run gets a line saying so.
device=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
python3 "$root/bench/cuda/trainer_results.py" "$out" --steps "$steps" --data-name "$data_name" \
  --device "${device:-unknown device}" >/dev/null || failures=$((failures + 1))
echo "trainer_tables: $out/trainer_cuda_results.md ($failures failures)"
exit $((failures > 0 ? 1 : 0))
