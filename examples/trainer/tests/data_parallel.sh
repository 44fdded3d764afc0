#!/usr/bin/env bash
# Data-parallel training (docs/distributed_training.md) on a tiny model, two MPI ranks on one machine.
#
#   data_parallel.sh CHECK TRAINER TEXT MPIEXEC
#
# CHECK is one of
#   equivalence  2 ranks with --batch 4 (2 sequences each) against 1 rank with --batch 4 --micro-batch 2:
#                bit-identical logs and final checkpoints, in FP32, BF16 and FP8 with delayed and
#                current scaling; against 1 rank with one pass of 4: the same losses within a
#                tolerance; rank 1 writes nothing. 3 ranks, and 2 passes per rank: within the tolerance.
#   resume       a checkpoint written by 2 ranks continues on 1 rank as the uninterrupted 2-rank run.
#   failures     a rank killed mid-run ends the job quickly with a non-zero status naming the rank;
#                bad inputs (a batch that does not divide, options, weights or data that differ
#                between ranks) end it with exit status 2 and a message naming the problem.
set -uo pipefail
tests=$(cd "$(dirname "$0")" && pwd)  # before the cd below: log_checks.sh sits beside this script

check=$1
trainer=$(realpath "$2")
text=$(realpath "$3")
mpiexec=$4
work=$(mktemp -d "${TMPDIR:-/tmp}/fp8_trainer_data_parallel.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

launch=("$mpiexec")
if "$mpiexec" --version 2>&1 | grep -Eq "Open MPI|OpenRTE|open-mpi.org"; then
  # CI runs as root; the test machine may have fewer cores than ranks.
  launch+=(--allow-run-as-root --oversubscribe)
fi
# Open MPI keeps allocations from MPI_Init to the end of the process, which LeakSanitizer would report
# in a sanitizer build; every other check of AddressSanitizer stays on.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

# Every linear layer in FP8 (--fp8-head): the widest coverage of the FP8 path. One thread per rank.
tiny=(--data "$text" --context 16 --d-model 16 --layers 1 --heads 2 --hidden 32 --eval-batches 1 --threads 1
      --no-progress --amax-history 4 --eval-every 2 --fp8-head --batch 4)
# One rank with one pass of 4 sums its gradients inside each GEMM, two passes of 2 sum two partial
# gradients: float rounding differs by a few ulps per step, and with current scaling each pass has
# its own FP8 scales (FP8 rounding of up to 2^-4 relative per element moves). Measured over 10 steps:
# at most 3e-7 (BF16), 6e-4 (FP8 delayed), 1.1e-3 (FP8 current); the bound leaves ten times that.
tolerance=0.01

# pass, fail, same_losses (with the tolerance above).
source "$tests/log_checks.sh"

# run NAME RANKS ARGS...: the trainer on RANKS ranks (1: no mpirun at all), stdout and stderr in
# NAME.out and NAME.err; the exit status is returned. At most 120 s: a hang is a failure too.
run() {
  local name=$1 ranks=$2
  shift 2
  if [[ $ranks == 1 ]]; then
    timeout 120 "$trainer" "$@" >"$name.out" 2>"$name.err"
  else
    timeout 120 "${launch[@]}" -np "$ranks" "$trainer" "$@" >"$name.out" 2>"$name.err"
  fi
}

# The log without the timing columns (tokens/s, elapsed): what must match bit for bit.
numbers() { cut -d, -f1-8 "$1/log.csv"; }
# The checksum of a checkpoint's tensors (weights, AdamW moments, step, data position, FP8 scaling
# state), from its header.
checksum() { head -c 200 "$1" | grep -ao '"checksum.fnv1a64":"[0-9a-f]*"'; }

# expect NAME STATUS PATTERN FILE: the last run ended with STATUS and FILE matches PATTERN.
expect() {
  local name=$1 want=$2 pattern=$3 file=$4 got=$5
  if [[ $got -ne $want ]]; then
    fail "$name: exit status $got, expected $want" "$file"
  elif ! grep -Eq -- "$pattern" "$file"; then
    fail "$name: no message matching '$pattern'" "$file"
  else
    pass "$name: $(grep -Eo -- "$pattern" "$file" | head -1)"
  fi
}

equivalence() {
  local recipe
  for recipe in "fp32:--precision fp32" "bf16:--precision bf16" "fp8-delayed:--precision fp8 --scaling delayed --shadow-every 3" \
    "fp8-current:--precision fp8 --scaling current"; do
    local name=${recipe%%:*} switches
    read -ra switches <<<"${recipe#*:}"
    mkdir -p "$name/rank1"
    # Rank 1 runs in its own working directory, which must stay empty: rank 0 writes everything.
    timeout 120 "${launch[@]}" -np 1 "$trainer" "${tiny[@]}" "${switches[@]}" --steps 8 --out two : \
      -np 1 -wdir "$name/rank1" "$trainer" "${tiny[@]}" "${switches[@]}" --steps 8 --out two \
      >"$name/two.out" 2>"$name/two.err"
    local status=$?
    mv two "$name/two" 2>/dev/null
    if [[ $status -ne 0 || ! -s $name/two/log.csv ]]; then
      fail "$name: the 2-rank run failed (status $status)" "$name/two.err"
      continue
    fi
    (cd "$name" && run one 1 "${tiny[@]}" "${switches[@]}" --steps 8 --micro-batch 2 --out one) ||
      fail "$name: the 1-rank run with --micro-batch 2 failed" "$name/one.err"
    (cd "$name" && run whole 1 "${tiny[@]}" "${switches[@]}" --steps 8 --out whole) ||
      fail "$name: the 1-rank run with one pass failed" "$name/whole.err"
    if cmp -s <(numbers "$name/two") <(numbers "$name/one"); then
      pass "$name: 2 ranks x 2 sequences = 1 rank x 2 passes of 2, every logged number bit for bit"
    else
      fail "$name: the logs of 2 ranks and of 1 rank with 2 passes differ"
      diff <(numbers "$name/two") <(numbers "$name/one") | head -8
    fi
    if [[ -n $(checksum "$name/two/final.safetensors") &&
      $(checksum "$name/two/final.safetensors") == $(checksum "$name/one/final.safetensors") ]]; then
      pass "$name: ... and so are the final checkpoints (weights, moments, scaling state)"
    else
      fail "$name: the final checkpoints differ"
    fi
    local agreement
    if agreement=$(same_losses "$name/two" "$name/whole"); then
      pass "$name: 2 ranks against 1 rank with one pass of 4: $agreement"
    else
      fail "$name: 2 ranks and 1 rank with one pass of 4 differ beyond $tolerance: $agreement"
    fi
    [[ $(grep -c '^final:' "$name/two.out") == 1 ]] && pass "$name: one summary (rank 0's)" ||
      fail "$name: the summary is not printed exactly once" "$name/two.out"
    [[ -z $(ls -A "$name/rank1") ]] && pass "$name: rank 1 wrote no file" ||
      fail "$name: rank 1 wrote $(ls -A "$name/rank1" | head -3 | tr '\n' ' ')"
  done
}

# Splits whose sums MPI may associate differently from one process (three ranks; two passes per rank):
# the same losses within the tolerance.
other_splits() {
  local split
  for split in "3:--batch 6:--micro-batch 2" "2:--batch 4 --micro-batch 1:--micro-batch 1"; do
    local ranks=${split%%:*} rest=${split#*:} shared single
    read -ra shared <<<"${rest%%:*}"
    read -ra single <<<"${rest#*:}"
    local name="ranks${ranks}${single[1]}"
    run "$name-many" "$ranks" "${tiny[@]}" "${shared[@]}" --steps 8 --out "$name-many" ||
      fail "$ranks ranks with ${shared[*]} failed" "$name-many.err"
    run "$name-one" 1 "${tiny[@]}" "${shared[@]}" "${single[@]}" --steps 8 --out "$name-one" ||
      fail "1 rank with ${shared[*]} ${single[*]} failed" "$name-one.err"
    local agreement
    if agreement=$(same_losses "$name-many" "$name-one"); then
      pass "$ranks ranks with ${shared[*]} against 1 rank with ${single[*]}: $agreement"
    else
      fail "$ranks ranks with ${shared[*]} and 1 rank with ${single[*]} differ: $agreement"
    fi
  done
}

resume() {
  local switches=(--precision fp8 --scaling delayed --steps 8)
  run straight 2 "${tiny[@]}" "${switches[@]}" --out straight ||
    fail "the uninterrupted 2-rank run failed" straight.err
  run first 2 "${tiny[@]}" "${switches[@]}" --save-every 4 --no-final-save --out resumed ||
    fail "the 2-rank run that saves at step 4 failed" first.err
  cp -r resumed resumed_whole
  run second 1 "${tiny[@]}" "${switches[@]}" --micro-batch 2 --resume resumed/step_000004.safetensors \
    --out resumed || fail "the 1-rank run resumed with 2 passes failed" second.err
  grep -q "resumed:   at step 4" second.out && pass "1 rank resumed the 2-rank checkpoint at step 4" ||
    fail "the 1-rank run did not resume at step 4" second.out
  if cmp -s <(numbers straight) <(numbers resumed) &&
    [[ $(checksum straight/final.safetensors) == $(checksum resumed/final.safetensors) ]]; then
    pass "saved by 2 ranks, resumed by 1 rank with --micro-batch 2: the log and final checkpoint equal the uninterrupted run bit for bit"
  else
    fail "the resumed run differs from the uninterrupted one"
    diff <(numbers straight) <(numbers resumed) | head -8
  fi
  run third 1 "${tiny[@]}" "${switches[@]}" --resume resumed_whole/step_000004.safetensors --out resumed_whole ||
    fail "the 1-rank run resumed with one pass failed" third.err
  local agreement
  if agreement=$(same_losses straight resumed_whole); then
    pass "resumed by 1 rank with one pass of 4: $agreement"
  else
    fail "resumed by 1 rank with one pass differs beyond $tolerance: $agreement"
  fi
}

# The process ids of rank R of the job whose output directory is DIR.
rank_pids() {
  local pid
  for pid in $(pgrep -f -- "--out $2"); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -Eqx "(OMPI_COMM_WORLD_RANK|PMI_RANK)=$1" && echo "$pid"
  done
}

failures_check() {
  # A rank that dies (SIGKILL, as the out-of-memory killer would) after a few steps.
  run killed 2 "${tiny[@]}" --steps 100000000 --out killed &
  local job=$! waited=0
  while [[ $(wc -l <killed/log.csv 2>/dev/null || echo 0) -lt 4 && $waited -lt 600 ]]; do
    sleep 0.1
    waited=$((waited + 1))
  done
  local victims
  victims=$(rank_pids 1 killed)
  if [[ -z $victims ]]; then
    fail "rank 1 of the job was not found"
    kill "$job" 2>/dev/null
  else
    local killed_at=$SECONDS
    kill -KILL $victims
    wait "$job"
    local status=$? took=$((SECONDS - killed_at))
    if [[ $status -ne 0 && $took -le 30 ]]; then
      pass "a killed rank ends the job in ${took} s with exit status $status"
    else
      fail "after rank 1 was killed the job ended with status $status after ${took} s" killed.err
    fi
    grep -Eq "rank 1 .*(signal 9|Killed)" killed.err &&
      pass "... and the message names the rank: $(grep -Eo "process rank 1 .*" killed.err | head -1)" ||
      fail "... but no message names rank 1" killed.err
  fi

  run unknown 2 "${tiny[@]}" --stesp 5
  expect "a usage error under mpirun" 2 "unknown option '--stesp'" unknown.err $?
  [[ $(grep -c "unknown option" unknown.err) == 1 ]] && pass "... reported once, not once per rank" ||
    fail "the usage error is not reported exactly once" unknown.err

  run indivisible 2 "${tiny[@]}" --batch 5 --steps 2 --out indivisible
  expect "a global batch that does not divide among the ranks" 2 \
    "--batch 5 \(the global batch, summed over the ranks\) does not divide among 2 ranks" indivisible.err $?
  run micro 2 "${tiny[@]}" --micro-batch 4 --steps 2 --out micro
  expect "a micro-batch larger than a rank's share" 2 "--micro-batch 4 does not divide the 2 sequences of each" \
    micro.err $?
  [[ ! -e indivisible && ! -e micro ]] && pass "no output directory for refused runs" ||
    fail "a refused run created its output directory"

  run uneven 1 "${tiny[@]}" --micro-batch 3 --steps 2 --out uneven
  expect "a micro-batch that does not divide the batch (one process)" 2 "--micro-batch 3 must divide --batch 4" \
    uneven.err $?

  timeout 120 "${launch[@]}" -np 1 "$trainer" "${tiny[@]}" --steps 2 --lr 0.001 --out mixed : \
    -np 1 "$trainer" "${tiny[@]}" --steps 2 --lr 0.002 --out mixed >mixed.out 2>mixed.err
  expect "ranks started with different options" 2 \
    "the command-line options \(fingerprints\) differ between the ranks at the start: rank 0 has [0-9a-f]+, rank 1 has" \
    mixed.err $?

  # The same relative --resume path names different checkpoints in the two ranks' directories.
  mkdir -p a b
  (cd a && run saved 1 "${tiny[@]}" --steps 2 --seed 1 --out c) && (cd b && run saved 1 "${tiny[@]}" --steps 2 --seed 2 --out c)
  # Only rank 0's directory holds the checkpoint: rank 1 fails alone and must not leave rank 0 waiting.
  mkdir -p alone
  timeout 120 "${launch[@]}" -np 1 -wdir a "$trainer" "${tiny[@]}" --steps 4 --resume c/final.safetensors --out c : \
    -np 1 -wdir alone "$trainer" "${tiny[@]}" --steps 4 --resume c/final.safetensors --out c >alone.out 2>alone.err
  expect "a failure on one rank ends the job" 1 "fp8_trainer: rank 1: error: checkpoint 'c/final.safetensors': cannot open" \
    alone.err $?
  timeout 120 "${launch[@]}" -np 1 -wdir a "$trainer" "${tiny[@]}" --steps 4 --resume c/final.safetensors --out c : \
    -np 1 -wdir b "$trainer" "${tiny[@]}" --steps 4 --resume c/final.safetensors --out c >apart.out 2>apart.err
  expect "ranks resuming from different checkpoints" 2 \
    "the initial weights and FP8 scales differ between the ranks at the start \(step 2\): rank 0 has [0-9a-f]+, rank 1 has" \
    apart.err $?
}

case $check in
  equivalence)
    equivalence
    other_splits
    ;;
  resume) resume ;;
  failures) failures_check ;;
  *)
    echo "data_parallel.sh: unknown check '$check' (equivalence, resume or failures)" >&2
    exit 2
    ;;
esac
echo "$((checks - failures)) of $checks checks passed"
[[ $failures -eq 0 ]]
