#!/usr/bin/env bash
# Runs fp8_trainer against hostile and mistaken inputs and checks, for each, the exit status (2: a
# usage error found before training, 1: a failure while running), that the message names the
# problem, and that the output of an earlier run in the same directory is still there, unchanged.
#
#   bad_inputs.sh TRAINER TEXT      (TRAINER: the fp8_trainer executable; TEXT: a small text file)
set -uo pipefail

trainer=$(realpath "$1")
text=$(realpath "$2")
work=$(mktemp -d "${TMPDIR:-/tmp}/fp8_trainer_bad_inputs.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

# A model small enough that a run takes a fraction of a second.
tiny=(--data "$text" --context 16 --d-model 16 --layers 1 --heads 2 --hidden 32 --batch 2 --eval-batches 1
      --threads 1 --no-progress --amax-history 4)
failures=0
checks=0

# expect NAME STATUS PATTERN -- COMMAND...: runs COMMAND (at most 60 s: an endless read is a failure
# too), and checks its exit status and that stderr matches PATTERN (an extended regular expression;
# empty: anything).
expect() {
  local name=$1 status=$2 pattern=$3
  shift 4
  checks=$((checks + 1))
  timeout 60 "$@" >"$work/stdout" 2>"$work/stderr"
  local got=$?
  if [[ $got -ne $status ]]; then
    echo "FAIL $name: exit status $got, expected $status"
    sed 's/^/    /' "$work/stderr" | tail -5
    failures=$((failures + 1))
  elif [[ -n $pattern ]] && ! grep -Eq -- "$pattern" "$work/stderr"; then
    echo "FAIL $name: the message does not match '$pattern':"
    sed 's/^/    /' "$work/stderr" | tail -5
    failures=$((failures + 1))
  else
    echo "ok   $name${pattern:+: $(grep -E -- "$pattern" "$work/stderr" | head -1 | cut -c1-150)}"
  fi
}

# check NAME CONDITION...: a plain assertion.
check() {
  local name=$1
  shift
  checks=$((checks + 1))
  if "$@"; then
    echo "ok   $name"
  else
    echo "FAIL $name"
    failures=$((failures + 1))
  fi
}

fingerprint() { cat "$1"/log.csv "$1"/final.safetensors 2>/dev/null | md5sum; }

# --- An earlier run whose output every later failure must leave alone. ---
expect "a good run" 0 "" -- "$trainer" "${tiny[@]}" --steps 4 --save-every 2 --out run
before=$(fingerprint run)
check "the good run wrote its log and checkpoints" test -s run/log.csv -a -s run/final.safetensors -a -s run/step_000002.safetensors

# --- Usage errors: exit 2, before anything is allocated or written. ---
expect "a batch beyond int" 2 "--batch must be from 1 to 65536; got 4294967297" -- \
  "$trainer" "${tiny[@]}" --batch 4294967297 --out run
expect "--batch 100000" 2 "--batch must be from 1 to 65536; got 100000" -- "$trainer" --batch 100000 --out fresh_batch
expect "a batch larger than the text holds" 2 "fewer than one batch of 1000" -- \
  "$trainer" "${tiny[@]}" --batch 1000 --out fresh_batch
expect "a batch too large for memory" 2 "GiB of memory" -- "$trainer" --batch 60000 --out fresh_memory
expect "--d-model not a multiple of --heads" 2 "--d-model 30 must be a multiple of --heads 4" -- \
  "$trainer" "${tiny[@]}" --d-model 30 --heads 4 --out fresh
expect "an unknown option" 2 "unknown option '--stesp'" -- "$trainer" --stesp 5
expect "a non-numeric value" 2 "--lr expects a finite number; got 'fast'" -- "$trainer" --lr fast
expect "a negative seed" 2 "--seed must be from 0" -- "$trainer" --seed -1
expect "a value given to a switch" 2 "option --no-progress takes no value" -- "$trainer" --no-progress=3
expect "a layer the model does not have" 2 "--bf16-layers: '9' is not a layer" -- "$trainer" "${tiny[@]}" --bf16-layers 9
expect "a finished run is not overwritten" 2 "'run' already holds a run .*--overwrite" -- \
  "$trainer" "${tiny[@]}" --steps 2 --out run
check "... and its log and checkpoint are unchanged" test "$(fingerprint run)" = "$before"
check "no output directory for refused runs" test ! -e fresh -a ! -e fresh_batch -a ! -e fresh_memory

# --- GNU conventions. ---
expect "--help wins over a bad option" 0 "" -- "$trainer" --steps ten --help
check "... and prints the help" grep -q -- "--granularity G" "$work/stdout"
expect "-h" 0 "" -- "$trainer" -h
expect "--version" 0 "" -- "$trainer" --version
check "... prints the version" grep -q "fp8_trainer (fp8 " "$work/stdout"
expect "--steps=N" 0 "" -- "$trainer" "${tiny[@]}" --steps=2 --out equals
check "... trains N steps" grep -q "^2," equals/log.csv

# --- Inputs that are not regular files: refused at once, naming the file. ---
mkdir a_directory
mkfifo a_fifo
expect "--data a directory without cookie files" 1 "no fortune cookie files .* in a_directory" -- \
  "$trainer" "${tiny[@]}" --data a_directory --out x
expect "--data /dev/zero" 1 "'/dev/zero' is not a regular file" -- "$trainer" "${tiny[@]}" --data /dev/zero --out x
expect "--data a FIFO" 1 "'a_fifo' is not a regular file" -- "$trainer" "${tiny[@]}" --data a_fifo --out x
expect "--data missing" 1 "cannot open 'missing.txt'" -- "$trainer" "${tiny[@]}" --data missing.txt --out x
for input in a_directory /dev/zero a_fifo; do
  expect "--resume $input" 1 "checkpoint '$input': .*('$input' is a directory|'$input' is not a regular file)" -- \
    "$trainer" "${tiny[@]}" --steps 6 --resume "$input" --out run
done
cp run/final.safetensors run/step_000004.safetensors.tmp
expect "--resume of an unfinished save" 1 "temporary file of an unfinished save" -- \
  "$trainer" "${tiny[@]}" --steps 6 --resume run/step_000004.safetensors.tmp --out run
rm run/step_000004.safetensors.tmp

# --- Corrupt checkpoints: a clear error naming the file and what is wrong. ---
header='{"x":{"dtype":"U8","shape":[1e400],"data_offsets":[0,0]}}'
printf "\\x$(printf %02x ${#header})\\x00\\x00\\x00\\x00\\x00\\x00\\x00%s" "$header" >huge_number.safetensors
expect "a header number beyond double" 1 "checkpoint 'huge_number.safetensors': the header is not valid JSON" -- \
  "$trainer" "${tiny[@]}" --steps 6 --resume huge_number.safetensors --out run
head -c 1000 run/final.safetensors >truncated.safetensors
expect "a truncated checkpoint" 1 "checkpoint 'truncated.safetensors': .*truncated" -- \
  "$trainer" "${tiny[@]}" --steps 6 --resume truncated.safetensors --out run
check "failed resumes left the run's log and checkpoint unchanged" test "$(fingerprint run)" = "$before"

# --- Writes that fail (a full disk, simulated with a file size limit): the run fails and says so. ---
# SIGXFSZ is ignored so that an oversized write returns EFBIG, as a full disk returns ENOSPC.
expect "the log cannot be written" 1 "writing the log '.*log.csv' failed" -- \
  bash -c 'trap "" XFSZ; ulimit -f 1; exec "$@"' - "$trainer" "${tiny[@]}" --steps 30 --no-final-save --out full_log
expect "the checkpoint cannot be written" 1 "checkpoint 'full_save/final.safetensors': writing .* failed" -- \
  bash -c 'trap "" XFSZ; ulimit -f 8; exec "$@"' - "$trainer" "${tiny[@]}" --steps 2 --out full_save
check "... and leaves no temporary file" test ! -e full_save/final.safetensors.tmp -a ! -e full_save/final.safetensors
expect "stdout cannot be written" 1 "writing to standard output failed" -- \
  bash -c 'exec "$@" >/dev/full' - "$trainer" "${tiny[@]}" --steps 2 --out full_stdout

# --- Resuming continues the logs; --overwrite replaces a run; default directories do not collide. ---
touch run/step_000004.safetensors.tmp
expect "resuming into the run's directory" 0 "" -- \
  "$trainer" "${tiny[@]}" --steps 6 --stats-every 1 --resume run/step_000002.safetensors --out run
check "... trims log.csv to one row per step" test "$(cut -d, -f1 run/log.csv | sort | uniq -d | wc -l)" -eq 0 -a \
  "$(tail -1 run/log.csv | cut -d, -f1)" = 6
check "... removes the stale temporary file" grep -q "removed: .*step_000004.safetensors.tmp" "$work/stdout"
expect "--overwrite replaces a run" 0 "" -- "$trainer" "${tiny[@]}" --steps 2 --out run --overwrite
check "... with its own log" test "$(tail -1 run/log.csv | cut -d, -f1)" = 2
check "... and without the old run's checkpoints" test -s run/final.safetensors -a ! -e run/step_000002.safetensors
expect "a default directory" 0 "" -- "$trainer" "${tiny[@]}" --steps 2 --lr 0.01
expect "a default directory for another rate" 0 "" -- "$trainer" "${tiny[@]}" --steps 2 --lr 0.02
check "... is another directory" test "$(ls runs | wc -l)" -eq 2

echo "$((checks - failures)) of $checks checks passed"
[[ $failures -eq 0 ]]
