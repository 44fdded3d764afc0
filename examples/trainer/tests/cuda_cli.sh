#!/usr/bin/env bash
# fp8_trainer --device cuda from the command line: what the GPU loop refuses is a usage error
# (exit status 2) whose message names the switch, found before any data is read or any device
# touched, and an earlier run in the output directory stays as it was. No GPU needed.
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

refused "fake quantization" "--fake-quant" --fake-quant
refused "fake wgrad" "--wgrad fake" --wgrad fake
refused "statistics" "--stats-every is not supported on the GPU" --stats-every 5
refused "mx" "--granularity mx is CPU-only" --scaling current --granularity mx
refused "unknown device" "--device must be one of cpu, cuda; got 'tpu'" --device tpu

if [[ $failures -gt 0 ]]; then
  echo "$failures failures"
  exit 1
fi
echo "all refusals are usage errors naming the switch"
