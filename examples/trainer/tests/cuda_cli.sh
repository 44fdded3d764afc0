#!/usr/bin/env bash
# fp8_trainer --device cuda from the command line: what the GPU loop refuses is a usage error
# (exit status 2) whose message names the switch, found before any data is read or any device
# touched, and an earlier run in the output directory stays as it was; what it supports (fake
# quantization, statistics) passes the option checks. No GPU needed.
#
#   cuda_cli.sh TRAINER TEXT      (TRAINER: fp8_trainer built with CUDA; TEXT: a small text file)
set -uo pipefail

trainer=$(realpath "$1")
text=$(realpath "$2")
work=$(mktemp -d "${TMPDIR:-/tmp}/fp8_trainer_cuda_cli.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
mkdir run && echo "an earlier run" >run/log.csv
failures=0

# refused NAME PATTERN ARGS...: exit status 2, stderr matching PATTERN, run/log.csv untouched.
refused() {
  local name=$1 pattern=$2
  shift 2
  timeout 60 "$trainer" --device cuda --data "$text" --out run --overwrite "$@" >stdout 2>stderr
  local got=$?
  if [[ $got -ne 2 ]]; then
    echo "FAIL $name: exit status $got, expected 2"; sed 's/^/    /' stderr | tail -3; failures=$((failures + 1))
  elif ! grep -Eq -- "$pattern" stderr; then
    echo "FAIL $name: the message does not match '$pattern'"; sed 's/^/    /' stderr | tail -3
    failures=$((failures + 1))
  elif [[ $(cat run/log.csv) != "an earlier run" ]]; then
    echo "FAIL $name: the earlier run's log.csv changed"; failures=$((failures + 1))
  else
    echo "ok   $name: $(head -1 stderr | cut -c1-150)"
  fi
}

# accepted NAME ARGS...: past the option checks (not a usage error). Without a GPU the run then
# stops with a CUDA error (exit status 1); with one it trains two tiny steps (exit status 0).
accepted() {
  local name=$1
  shift
  timeout 120 "$trainer" --device cuda --data "$text" --out accepted --overwrite --steps 2 --batch 2 \
    --context 32 --d-model 32 --layers 1 --heads 2 --hidden 64 --eval-batches 1 "$@" >stdout 2>stderr
  local got=$?
  if [[ $got -ne 0 && $got -ne 1 ]]; then
    echo "FAIL $name: exit status $got, expected 0 (trained) or 1 (no usable GPU)"; sed 's/^/    /' stderr | tail -3
    failures=$((failures + 1))
  elif [[ $got -eq 1 ]] && ! grep -Eq "cuda[A-Za-z]*\(|CUDA device" stderr; then
    echo "FAIL $name: exit status 1 without a CUDA error"; sed 's/^/    /' stderr | tail -3
    failures=$((failures + 1))
  else
    echo "ok   $name: exit status $got $(grep -v '^$' stderr | head -1 | cut -c1-120)"
  fi
}

accepted "fake quantization" --fake-quant
accepted "fake wgrad" --wgrad fake
accepted "statistics" --stats-every 1
accepted "no fast accumulation" --fast-accumulation none
refused "mx" "--granularity mx is CPU-only" --scaling current --granularity mx
refused "unknown device" "--device must be one of cpu, cuda; got 'tpu'" --device tpu
refused "fast accumulation on the CPU" "--fast-accumulation needs --device cuda" --device cpu --fast-accumulation none
refused "unknown GEMM class" "--fast-accumulation must be one of fprop, dgrad, wgrad; got 'qkv'" --fast-accumulation qkv

if [[ $failures -gt 0 ]]; then
  echo "$failures failures"
  exit 1
fi
echo "all refusals are usage errors naming the switch; the supported switches pass"
