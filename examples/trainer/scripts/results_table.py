#!/usr/bin/env python3
"""Regenerates docs/trainer_results.md and docs/trainer_loss.png: the FP32 / BF16 / FP8-delayed /
FP8-current / fake-quant comparison of the reference trainer, over several seeds.

Usage (from the repository root, after building fp8_trainer):
  python3 examples/trainer/scripts/results_table.py --trainer build-trainer/examples/trainer/fp8_trainer

Every run uses one thread (--threads 1) and --jobs runs go in parallel, so the results do not depend
on how many cores the machine has (Eigen's GEMM blocking, and so the FP32 summation order, depends on
the thread count). Runs whose log.csv is already complete are reused unless --fresh is given.
Needs only Python's standard library, plus matplotlib for the plot (via plot_loss.py). The seed
statistics, the table and the plot are seed_table.py's, which the GPU tables share.
"""
import argparse
import concurrent.futures
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from seed_table import final_row, per_seed_lines, plot_mean_curves, read_log, seed_results, table, \
    unigram_baseline, verdict_legend

# (label, short name, trainer arguments)
CONFIGS = [
    ("FP32", "fp32", ["--precision", "fp32"]),
    ("BF16", "bf16", ["--precision", "bf16"]),
    ("FP8 delayed (HYBRID, per tensor)", "fp8-delayed", ["--precision", "fp8", "--scaling", "delayed"]),
    ("FP8 current (HYBRID, per tensor)", "fp8-current", ["--precision", "fp8", "--scaling", "current"]),
    ("FP8 fake quantization (delayed)", "fp8-fake", ["--precision", "fp8", "--scaling", "delayed", "--fake-quant"]),
    ("FP8 delayed, LM head in FP8 too", "fp8-delayed-fp8-head",
     ["--precision", "fp8", "--scaling", "delayed", "--fp8-head"]),
]
REFERENCE = "bf16"
TOLERANCE = 0.01  # the criterion: FP8 within 1% relative validation loss of BF16


def run_one(trainer, args, out_dir, seed, steps, extra):
    command = [trainer, *args, "--seed", str(seed), "--steps", str(steps), "--threads", "1", "--no-progress",
               "--log-every", "100", "--no-final-save", "--out", str(out_dir), "--overwrite", *extra]
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "stdout.txt", "w") as stdout:
        result = subprocess.run(command, stdout=stdout, stderr=subprocess.STDOUT,
                                env={**os.environ, "OMP_NUM_THREADS": "1"})
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed; see {out_dir / 'stdout.txt'}")
    return out_dir


def cpu_name():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trainer", required=True, help="path to the fp8_trainer executable")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--jobs", type=int, default=2, help="runs in parallel (default 2)")
    parser.add_argument("--runs-dir", default="runs/results", help="where run directories go")
    parser.add_argument("--docs", default="docs", help="where trainer_results.md and trainer_loss.png go")
    parser.add_argument("--fresh", action="store_true", help="rerun even runs that already finished")
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[],
                        help="further trainer arguments for every run (must come last)")
    args = parser.parse_args()
    trainer = str(Path(args.trainer).resolve())
    if not Path(trainer).is_file():
        sys.exit(f"results_table.py: no trainer at {args.trainer}: build it first (see docs/trainer.md)")
    runs_dir, docs = Path(args.runs_dir), Path(args.docs)
    docs.mkdir(parents=True, exist_ok=True)

    jobs = []
    for label, name, config_args in CONFIGS:
        for seed in args.seeds:
            out = runs_dir / f"{name}-s{seed}"
            if args.fresh or final_row(out / "log.csv", args.steps) is None:
                jobs.append((config_args, out, seed))
    started = time.time()
    print(f"{len(jobs)} runs to do ({len(CONFIGS) * len(args.seeds) - len(jobs)} reused), {args.jobs} at a time")
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_one, trainer, a, out, seed, args.steps, args.extra) for a, out, seed in jobs]
        for future in concurrent.futures.as_completed(futures):
            print(f"  finished {future.result()}  ({time.time() - started:.0f} s)")

    results, tokens_per_s = {}, {}
    for label, name, config_args in CONFIGS:
        rows = [final_row(runs_dir / f"{name}-s{seed}" / "log.csv", args.steps) for seed in args.seeds]
        if any(r is None for r in rows):
            sys.exit(f"results_table.py: a run of {name} did not finish; rerun with --fresh")
        results[name] = seed_results(label, " ".join(config_args),
                                     {seed: float(r["val_loss"]) for seed, r in zip(args.seeds, rows)})
        speeds = []
        for seed in args.seeds:
            log = read_log(runs_dir / f"{name}-s{seed}" / "log.csv")
            speeds += [float(r["tokens_per_s"]) for r in log if r["tokens_per_s"]]
        tokens_per_s[name] = statistics.median(speeds)
    baseline = unigram_baseline((runs_dir / f"{REFERENCE}-s{args.seeds[0]}" / "stdout.txt").read_text())

    lines = [
        "# Reference trainer: FP8 against BF16 and FP32",
        "",
        "Generated by `examples/trainer/scripts/results_table.py`; do not edit by hand. Regenerate with:",
        "",
        "```sh",
        "python3 examples/trainer/scripts/results_table.py " + " ".join(sys.argv[1:]),
        "```",
        "",
        f"Byte-level LLaMA-style transformer (the trainer's defaults: d_model 128, 4 blocks, 4 heads, SwiGLU 384, "
        f"context 128, batch 16, AdamW lr 3e-3 with cosine decay) trained for {args.steps} steps "
        f"({args.steps * 16 * 128 / 1e6:.1f} M bytes) on the default data (Debian's `fortunes`), "
        f"seeds {', '.join(map(str, args.seeds))}. Validation loss in nats per byte after the last step; "
        f"the unigram baseline (byte frequencies only) is {baseline:.4f}. The FP8 rows run every linear layer of "
        "the transformer blocks in FP8 and keep the LM head in BF16 (the trainer's default, see trainer.md); "
        "the last row puts the head in FP8 too.",
        "",
        *table(results, REFERENCE, TOLERANCE, judged=[n for n in results if n not in ("fp32", REFERENCE)],
               extra=[("tokens/s (median)", lambda name, r: f"{tokens_per_s[name]:.0f}")]),
        "",
        verdict_legend(TOLERANCE, "BF16", "the issue's criterion") + " Per-seed losses:",
        "",
        *per_seed_lines(results),
    ]
    lines += [
        "",
        f"Machine: {cpu_name()}, {os.cpu_count()} cores, one thread per run, {args.jobs} runs at a time, "
        f"{datetime.date.today().isoformat()}. Tokens/s are medians over all steps of a configuration's runs on a "
        "machine shared with other work: read them as rough ratios (the FP8 runs emulate FP8 GEMMs on the CPU, "
        "so they are slower here; on a GPU they are faster).",
        "",
        "![validation and training loss, mean over seeds](trainer_loss.png)",
        "",
    ]
    (docs / "trainer_results.md").write_text("\n".join(lines))
    print(f"wrote {docs / 'trainer_results.md'}")

    curves = [(r.label, [runs_dir / f"{name}-s{seed}" for seed in args.seeds]) for name, r in results.items()]
    plot = plot_mean_curves(docs / "trainer_loss.png", curves,
                            f"fp8_trainer on fortunes: mean of seeds {', '.join(map(str, args.seeds))}",
                            baseline=baseline, zoom_from=args.steps // 2, extra=["--ymax", "3.6"])
    print(plot.stdout, end="")
    if plot.returncode != 0:
        sys.exit(f"results_table.py: the plot failed: {plot.stderr.strip()}")


if __name__ == "__main__":
    main()
