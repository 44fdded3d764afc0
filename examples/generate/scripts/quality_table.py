#!/usr/bin/env python3
"""Regenerates the quality table of docs/inference.md: the validation loss of a trained checkpoint in
BF16 and in every quantized configuration of fp8_generate, relative differences, and memory.

Usage:
  quality_table.py [--build build] [--checkpoint CKPT ...] [--train-steps N] [--eval-batches N]
                   [--batch B] [--write docs/inference.md]

Without --checkpoint it trains the default model with fp8_trainer for --train-steps steps (default
600, the trainer's default; about 3 minutes a seed on two cores) into BUILD/runs/quality-sSEED for
every --seeds entry and reuses that checkpoint when it exists. With --write it replaces the text
between the markers <!-- quality-table:begin --> and <!-- quality-table:end --> of that file;
otherwise prints the table.
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# (label, weights, activations, kv cache, extra arguments)
CONFIGS = [
    ("BF16 (reference)", "bf16", "bf16", "bf16", []),
    ("W8 per-tensor", "fp8-tensor", "bf16", "bf16", []),
    ("W8 per-channel", "fp8-channel", "bf16", "bf16", []),
    ("KV8 per-head", "bf16", "bf16", "fp8", []),
    ("KV8 per-tensor", "bf16", "bf16", "fp8", ["--kv-scales", "per-tensor"]),
    ("W8A8 per-tensor, static (max)", "fp8-tensor", "static", "bf16", []),
    ("W8A8 per-channel, static (max)", "fp8-channel", "static", "bf16", []),
    ("W8A8 per-channel, dynamic", "fp8-channel", "dynamic", "bf16", []),
    ("W8A8 per-tensor, static (max) + KV8", "fp8-tensor", "static", "fp8", []),
    ("W8A8 per-tensor, static (percentile 99.99%) + KV8", "fp8-tensor", "static", "fp8", ["--calibration", "percentile"]),
    ("W8A8 per-tensor, static (MSE) + KV8", "fp8-tensor", "static", "fp8", ["--calibration", "mse"]),
    ("W8A8 per-tensor, dynamic + KV8", "fp8-tensor", "dynamic", "fp8", []),
    ("**W8A8 per-channel, dynamic + KV8** (the aim)", "fp8-channel", "dynamic", "fp8", []),
]
AIM = 0.01  # within 1% relative validation loss of BF16
BEGIN, END = "<!-- quality-table:begin -->", "<!-- quality-table:end -->"


def train(build: Path, steps: int, seed: int) -> Path:
    out = build / "runs" / f"quality-s{seed}-{steps}"
    checkpoint = out / "final.safetensors"
    if not checkpoint.exists():
        print(f"training the default model for {steps} steps (seed {seed}) into {out} ...", file=sys.stderr)
        subprocess.run([str(build / "examples/trainer/fp8_trainer"), "--steps", str(steps), "--seed", str(seed),
                        "--no-progress", "--out", str(out)], check=True, stdout=subprocess.DEVNULL)
    return checkpoint


def evaluate(build: Path, checkpoint: Path, config, eval_batches: int, batch: int) -> dict:
    label, weights, activations, kv, extra = config
    with tempfile.TemporaryDirectory() as directory:
        report = Path(directory) / "report.json"
        subprocess.run([str(build / "examples/generate/fp8_generate"), "--checkpoint", str(checkpoint),
                        "--weights", weights, "--activations", activations, "--kv-cache", kv,
                        "--eval-batches", str(eval_batches), "--batch", str(batch), "--report", str(report)] + extra,
                       check=True, stderr=subprocess.DEVNULL)
        return json.loads(report.read_text())


def mib(n: float) -> str:
    return f"{n / 2**20:.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build", type=Path)
    parser.add_argument("--checkpoint", action="append", type=Path, help="evaluate these checkpoints (one per seed)")
    parser.add_argument("--train-steps", type=int, default=600)
    parser.add_argument("--seeds", default="1", help="training seeds when training, e.g. 1,2")
    parser.add_argument("--eval-batches", type=int, default=8)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--write", type=Path, help="replace the table in this markdown file")
    args = parser.parse_args()

    start = time.time()
    checkpoints = args.checkpoint or [train(args.build, args.train_steps, int(s)) for s in args.seeds.split(",")]
    results = {config[0]: [] for config in CONFIGS}
    for checkpoint in checkpoints:
        for config in CONFIGS:
            print(f"{checkpoint}: {config[0]} ...", file=sys.stderr)
            results[config[0]].append(evaluate(args.build, checkpoint, config, args.eval_batches, args.batch))
    reference = results[CONFIGS[0][0]]
    rows = ["| configuration | validation loss (nats/byte) | relative to BF16 | within 1% | linear weights (MiB) "
            "| all weights (MiB) | KV cache (MiB) |",
            "|---|---|---|---|---|---|---|"]
    for label, *_ in CONFIGS:
        runs = results[label]
        loss = statistics.mean(r["val_loss"] for r in runs)
        relative = [(r["val_loss"] - b["val_loss"]) / b["val_loss"] for r, b in zip(runs, reference)]
        worst = max(abs(x) for x in relative)
        rel_text = ", ".join(f"{100 * x:+.3f}%" for x in relative)
        rows.append(f"| {label} | {loss:.4f} | {rel_text} | {'yes' if worst <= AIM else '**no**'} | "
                    f"{mib(runs[0]['linear_weight_bytes'])} | {mib(runs[0]['linear_weight_bytes'] + runs[0]['other_weight_bytes'])} | "
                    f"{mib(runs[0]['kv_cache_bytes'])} |")
    tokens = reference[0]["eval_tokens"]
    note = (f"\n{len(checkpoints)} checkpoint(s): {', '.join(str(c) for c in checkpoints)}; {tokens} validation bytes "
            f"each ({args.eval_batches} batches of {args.batch} windows); table made in {time.time() - start:.0f} s by "
            f"`examples/generate/scripts/quality_table.py`.\n")
    table = "\n".join(rows) + "\n" + note
    if args.write:
        text = args.write.read_text()
        if BEGIN not in text or END not in text:
            print(f"{args.write} has no {BEGIN} ... {END} markers", file=sys.stderr)
            return 1
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        args.write.write_text(head + BEGIN + "\n" + table + END + tail)
    else:
        print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
