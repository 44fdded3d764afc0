#!/usr/bin/env python3
"""Data-parallel fp8_trainer: measured speed on this machine, and what each rank sends per step.

Measures tokens/s of the default model (FP8, delayed scaling, --batch 16 global) on 1 rank and on
2 MPI ranks, over a short run each, and prints

  1. the measured table (median tokens/s over the steps after the first few, whole global batch);
  2. the time of the gradient all-reduce alone (allreduce_time.cpp, built with mpicxx), and the
     bytes a step moves for the measured model: the FP32 gradient all-reduce, the amax all-reduce,
     and (not in the trainer: a ZeRO-3 style run that shards the weights) the all-gather of the
     linear weights in BF16 or in FP8 with one FP32 scale per tensor;
  3. a model of how that grows with the rank count N and the model size: a ring all-reduce sends
     2(N-1)/N x the payload per rank, an all-gather (N-1)/N x the gathered bytes.

Usage: bench/distributed/trainer_data_parallel.py [--trainer build/examples/trainer/fp8_trainer]
           [--steps 30] [--mpiexec mpirun]
"""

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

FLOAT = 4  # bytes: FP32 gradients and amaxes
BF16 = 2
FP8 = 1
OPERANDS = 6  # amaxes per linear layer: fprop input/weight, dgrad grad/weight, wgrad grad/input


def transformer_shape(vocab, channels, layers, hidden):
    """(all parameters, linear-layer weights, linear layers) of the trainer's transformer: per block
    two RMSNorm gains, wqkv, wo, w_gate_up and w_down; an embedding, a final norm and an LM head."""
    block_linear = 3 * channels * channels + channels * channels + 2 * hidden * channels + channels * hidden
    linear = layers * block_linear + vocab * channels  # the head is a linear layer, the embedding is not
    total = vocab * channels + layers * (block_linear + 2 * channels) + channels + vocab * channels
    return total, linear, 4 * layers + 1


def step_bytes(shape, ranks):
    """Bytes each rank sends per step (ring algorithms) for one model shape and rank count."""
    total, linear, layers = shape
    ring_allreduce = 2 * (ranks - 1) / ranks
    allgather = (ranks - 1) / ranks
    other = total - linear  # embedding and norms: gathered in BF16 either way
    return {
        "gradients": ring_allreduce * (total + 2) * FLOAT,  # + the loss and the shadow loss
        "amaxes": ring_allreduce * OPERANDS * layers * FLOAT,
        "weights_bf16": allgather * (linear + other) * BF16,
        "weights_fp8": allgather * (linear * FP8 + layers * FLOAT + other * BF16),
    }


def human(n):
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{n:.0f} B"
        n /= 1000.0
    return str(n)


def run_trainer(args, ranks, threads, out):
    command = [args.trainer, "--steps", str(args.steps), "--threads", str(threads), "--no-progress",
               "--eval-every", str(10 * args.steps), "--eval-batches", "1", "--no-final-save", "--out", out]
    if ranks > 1:
        command = launcher(args, ranks) + command
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"trainer_data_parallel.py: {' '.join(command)} failed:\n{result.stderr[-2000:]}")
    with open(os.path.join(out, "log.csv"), newline="") as log:
        rows = [row for row in csv.DictReader(log) if row["tokens_per_s"]]
    skip = min(5, len(rows) // 3)  # warm-up steps
    speeds = [float(row["tokens_per_s"]) for row in rows[skip:]]
    parameters = allreduced = None
    for line in result.stdout.splitlines():
        if "parameters)" in line:
            parameters = int(line.rsplit("(", 1)[1].split()[0])
        if "MPI_Allreduce of" in line:  # the trainer's own account of its gradient all-reduce
            allreduced = int(line.split("MPI_Allreduce of")[1].split()[0])
    return statistics.median(speeds), min(speeds), max(speeds), parameters, allreduced


def launcher(args, ranks):
    command = [args.mpiexec, "-np", str(ranks)]
    version = subprocess.run([args.mpiexec, "--version"], capture_output=True, text=True, check=False)
    if "open-mpi" in (version.stdout + version.stderr).lower().replace(" ", "-"):
        # Open MPI refuses root without this, and more ranks than it counts cores without the other.
        command += ["--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    return command


def allreduce_milliseconds(args, work, count):
    """(median, fastest) time of one MPI_Allreduce of `count` floats on 2 ranks (allreduce_time.cpp),
    or None where mpicxx is missing."""
    compiler = shutil.which("mpicxx")
    if compiler is None:
        return None
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "allreduce_time.cpp")
    program = os.path.join(work, "allreduce_time")
    subprocess.run([compiler, "-O2", source, "-o", program], check=True)
    result = subprocess.run(launcher(args, 2) + [program, str(count)], capture_output=True, text=True, check=True)
    median, fastest = (float(x) for x in result.stdout.split())
    return median, fastest


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trainer", default="build/examples/trainer/fp8_trainer")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--mpiexec", default=shutil.which("mpirun") or "mpirun")
    args = parser.parse_args()

    default = transformer_shape(vocab=256, channels=128, layers=4, hidden=384)
    print(f"## Measured: the default model, {args.steps} steps, global batch 16 x 128 bytes, "
          f"{os.cpu_count()} cores\n")
    print(f"load average before: {os.getloadavg()[0]:.2f} (other work on the machine lowers and scatters the figures)\n")
    print("| ranks x threads | tokens/s (median) | min - max |")
    print("|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for ranks, threads in ((1, 1), (1, os.cpu_count()), (2, 1)):
            median, low, high, parameters, allreduced = run_trainer(args, ranks, threads,
                                                                    os.path.join(work, f"r{ranks}t{threads}"))
            # The byte counts below come from the model's shape: check them against what the trainer says.
            if parameters != default[0] or (ranks > 1 and allreduced != default[0] + 2):
                sys.exit(f"trainer_data_parallel.py: the trainer reports {parameters} parameters and an "
                         f"all-reduce of {allreduced} floats; the shape here gives {default[0]} and "
                         f"{default[0] + 2}: update transformer_shape()")
            print(f"| {ranks} x {threads} | {median:.0f} | {low:.0f} - {high:.0f} |")
        timing = allreduce_milliseconds(args, work, default[0] + 2)
        if timing is not None:
            print(f"\nThe gradient all-reduce alone ({default[0] + 2} floats, 2 ranks, allreduce_time.cpp): "
                  f"median {timing[0]:.2f} ms, fastest {timing[1]:.2f} ms")

    total, linear, layers = default
    payload = {"gradients": (total + 2) * FLOAT, "amaxes": OPERANDS * layers * FLOAT,
               "weights_bf16": total * BF16, "weights_fp8": linear * FP8 + layers * FLOAT + (total - linear) * BF16}
    print(f"\n## Payload per step of the default model ({total} parameters, {linear} in {layers} linear layers)\n")
    print("| what | collective | payload | sent per rank, 2 ranks |")
    print("|---|---|---|---|")
    two = step_bytes(default, 2)
    print(f"| gradients + 2 losses (FP32) | all-reduce (sum) | {human(payload['gradients'])} | {human(two['gradients'])} |")
    print(f"| amaxes (FP32 bit patterns) | all-reduce (max) | {human(payload['amaxes'])} | {human(two['amaxes'])} |")
    print(f"| weights, BF16 (ZeRO-3, per gather) | all-gather | {human(payload['weights_bf16'])} | "
          f"{human(two['weights_bf16'])} |")
    print(f"| weights, FP8 linear + scales (ZeRO-3, per gather) | all-gather | {human(payload['weights_fp8'])} | "
          f"{human(two['weights_fp8'])} |")

    models = [("default", default),
              ("d 512, 8 layers", transformer_shape(256, 512, 8, 1536)),
              ("d 2048, 16 layers, 32k vocab", transformer_shape(32000, 2048, 16, 5632)),
              ("LLaMA-7B shape", transformer_shape(32000, 4096, 32, 11008))]
    print("\n## Model: bytes sent per rank per step (ring all-reduce 2(N-1)/N, all-gather (N-1)/N)\n")
    print("| model | N | gradients FP32 | amaxes | weights BF16 | weights FP8 | FP8 / BF16 |")
    print("|---|---|---|---|---|---|---|")
    for name, shape in models:
        for ranks in (2, 8, 64, 512):
            b = step_bytes(shape, ranks)
            print(f"| {name} ({human(shape[0]).replace(' B', '').replace('K', ' k').replace('M', ' M').replace('G', ' G')} "
                  f"parameters) | {ranks} | {human(b['gradients'])} | {human(b['amaxes'])} | "
                  f"{human(b['weights_bf16'])} | {human(b['weights_fp8'])} | "
                  f"{b['weights_fp8'] / b['weights_bf16']:.2f} |")


if __name__ == "__main__":
    main()
