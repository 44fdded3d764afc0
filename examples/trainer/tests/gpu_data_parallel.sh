#!/usr/bin/env bash
# Data-parallel training on GPUs (docs/distributed_training.md): fp8_trainer --device cuda, one MPI
# rank per GPU, gradients and amaxes reduced through NCCL.
#
#   gpu_data_parallel.sh CHECK TRAINER TEXT MPIEXEC SKIP_CODE
#
# CHECK is one of
#   equivalence  (a `gpu` test) N ranks on the N visible GPUs (N >= 2) with --batch 2N, one pass of 2
#                sequences each, against 1 GPU rank with --batch 2N --micro-batch 2 (N passes): the same
#                losses within the tolerance below, in BF16 and FP8 (delayed and current scaling), the
#                replica check after every step passing, rank 0 alone writing. Fewer than 2 GPUs: the
#                test reports itself skipped (exit SKIP_CODE) with the reason.
#   refusals     (any machine) one rank more than the visible GPUs (2 ranks without a GPU): the job
#                ends with exit status 2 before training, with a message naming the ranks that would
#                share a GPU and the counts (or, without a GPU, that none is visible), and no log.
set -uo pipefail
tests=$(cd "$(dirname "$0")" && pwd)  # before the cd below: log_checks.sh sits beside this script

check=$1
trainer=$(realpath "$2")
text=$(realpath "$3")
mpiexec=$4
skip_code=$5
work=$(mktemp -d "${TMPDIR:-/tmp}/fp8_trainer_gpu_data_parallel.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

launch=("$mpiexec")
if "$mpiexec" --version 2>&1 | grep -Eq "Open MPI|OpenRTE|open-mpi.org"; then
  launch+=(--allow-run-as-root --oversubscribe)
fi

# The GPUs this process may use: nvidia-smi's list, narrowed by CUDA_VISIBLE_DEVICES when it is set.
visible_gpus() {
  local listed
  listed=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ') || listed=0
  if [[ -n ${CUDA_VISIBLE_DEVICES+set} ]]; then
    local named
    named=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c '[^[:space:]]')
    ((named < listed)) && listed=$named
  fi
  echo "$listed"
}
gpus=$(visible_gpus)

# A small transformer whose linear layers all run in FP8 (shapes multiples of 16 for cuBLASLt).
tiny=(--data "$text" --device cuda --context 32 --d-model 32 --layers 2 --heads 2 --hidden 64 --eval-batches 2
      --no-progress --amax-history 4 --eval-every 2 --fp8-head --lr 1e-2 --hash-every 1)
# The N-rank run and the 1-rank run compute the same passes in the same order; NCCL sums the N per-rank
# gradients where one rank adds them pass after pass. With 2 ranks that is the same single rounding
# (a + b), with more the ring may associate the sum differently: a few ulps per element and step,
# which FP8 rounding can widen to 1e-3 in the loss over 8 steps (the CPU ranks' measured bound for the
# same effect is 1.1e-3). A missing reduction or division by the wrong count moves the loss by more
# than 0.05 within a few steps.
tolerance=0.01

# pass, fail, same_losses (with the tolerance above).
source "$tests/log_checks.sh"

equivalence() {
  if ((gpus < 2)); then
    # Two ranks cannot share the one GPU (NCCL refuses a GPU twice in a communicator, and the trainer
    # refuses it first: the refusals check); test_nccl exercises the NCCL calls on one GPU.
    if ((gpus == 0)); then
      echo "no CUDA device: skipped (0 GPUs visible)"
    else
      echo "skipped: 1 GPU visible, and data parallelism on GPUs needs at least 2 (one rank per GPU)"
    fi
    exit "$skip_code"
  fi
  local batch=$((2 * gpus)) recipe
  for recipe in "bf16:--precision bf16" "fp8-delayed:--precision fp8 --scaling delayed --shadow-every 3" \
    "fp8-current:--precision fp8 --scaling current"; do
    local name=${recipe%%:*} switches
    read -ra switches <<<"${recipe#*:}"
    mkdir -p "$name" && cd "$name" || return
    timeout 300 "${launch[@]}" -np "$gpus" "$trainer" "${tiny[@]}" "${switches[@]}" --batch "$batch" --steps 8 \
      --out ranks >ranks.out 2>ranks.err
    local status=$?
    timeout 300 "$trainer" "${tiny[@]}" "${switches[@]}" --batch "$batch" --micro-batch 2 --steps 8 --out one \
      >one.out 2>one.err
    local one_status=$?
    cd .. || return
    if [[ $status -ne 0 || ! -s $name/ranks/log.csv ]]; then
      fail "$name: the $gpus-rank run failed (status $status)" "$name/ranks.err"
      continue
    fi
    if [[ $one_status -ne 0 || ! -s $name/one/log.csv ]]; then
      fail "$name: the 1-rank run with --micro-batch 2 failed (status $one_status)" "$name/one.err"
      continue
    fi
    local agreement
    if agreement=$(same_losses "$name/ranks" "$name/one"); then
      pass "$name: $gpus GPU ranks x 2 sequences against 1 GPU x $gpus passes of 2: $agreement"
    else
      fail "$name: $gpus GPU ranks and 1 GPU with $gpus passes differ beyond $tolerance: $agreement"
    fi
    grep -q "ncclAllReduce" "$name/ranks.out" && pass "$name: the description names the NCCL all-reduce" ||
      fail "$name: no 'ncclAllReduce' in the run's description" "$name/ranks.out"
    [[ $(grep -c '^final:' "$name/ranks.out") == 1 ]] && pass "$name: one summary (rank 0's)" ||
      fail "$name: the summary is not printed exactly once" "$name/ranks.out"
  done
}

refusals() {
  local ranks=$((gpus + 1))
  ((ranks < 2)) && ranks=2  # one rank is not data parallelism: no GPU at all is then the refusal
  timeout 120 "${launch[@]}" -np "$ranks" "$trainer" "${tiny[@]}" --batch $((2 * ranks)) --steps 2 --out refused \
    >refused.out 2>refused.err
  local status=$?
  local pattern="(ranks 0 and $gpus would drive the same GPU, which NCCL refuses: their node runs $ranks ranks but shows each of them $gpus GPUs?|--device cuda with $ranks ranks: no CUDA device is visible)"
  if [[ $status -eq 0 ]]; then
    fail "$ranks ranks on $gpus GPUs: the run was not refused" "refused.err"
  elif [[ $status -eq 124 ]]; then
    fail "$ranks ranks on $gpus GPUs: the refusal hung" "refused.err"
  elif ! grep -Eq -- "$pattern" refused.err; then
    fail "$ranks ranks on $gpus GPUs: no message matching '$pattern'" "refused.err"
  else
    pass "$ranks ranks on $gpus GPUs refused (status $status): $(grep -Eo -- "$pattern" refused.err | head -1)"
  fi
  [[ ! -e refused/log.csv ]] && pass "no log written by the refused run" || fail "the refused run wrote a log"
}

case $check in
  equivalence | refusals) "$check" ;;
  *) echo "gpu_data_parallel.sh: unknown check '$check'" >&2; exit 2 ;;
esac
echo "$((checks - failures)) of $checks checks passed"
((failures == 0))
