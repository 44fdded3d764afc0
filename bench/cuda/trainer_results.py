#!/usr/bin/env python3
"""Assembles trainer_cuda_results.md from the output folder of bench/cuda/trainer_tables.sh: the speed
table (bench_trainer's speed.csv with the PyTorch peer's torch_peer.csv as one more row), the
per-phase GPU time (profile.csv), the lines bench_trainer printed about its runs (attention kernel,
memory), and the loss-parity runs' final validation losses with the plot.

    python3 bench/cuda/trainer_results.py <out-dir> --steps N --data-name NAME --device NAME

A part that did not run, or stopped before writing its file, gets a line saying so and naming its
log, never an empty table: the folder of a run cut short still yields a readable page.
"""
import argparse
import datetime
import re
import sys
from pathlib import Path

import result_files as rf

# fp8_trainer's last line (trainer.cpp): "final:     validation loss %.4f nats/byte (unigram baseline
# %.4f) after %ld steps, %s".
FINAL = re.compile(r"validation loss (?P<loss>\S+) nats/byte \(unigram baseline (?P<baseline>\S+)\) "
                   r"after (?P<steps>\d+) steps, (?P<time>.+)")
SPEED_SHAPE = "d_model 4096, SwiGLU 14336, 32 heads, context 2048, bytes, 4 blocks"
PARITY_SHAPE = "d_model 1024, 8 blocks, lr 1e-3"


def last_line(path: Path):
    """The last non-empty line of a log, or None where the log is missing or empty."""
    if not path.is_file():
        return None
    lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else None


def why_missing(out: Path, log_name, program):
    """Why a program's results are absent, from its log: not run, or what it said last."""
    last = last_line(out / log_name)
    if last is None:
        return f"{program} did not run (`{log_name}` is missing or empty)"
    return f"{program} stopped before writing its results; last line of `{log_name}`: `{last}`"


def read_speed(path: Path):
    """[(precision, tokens/s, TFLOP/s, ms/step)] from speed.csv or torch_peer.csv (the same columns)."""
    rows, _ = rf.read_table(path, rf.SPEED_COLUMNS)
    table = []
    for row in rows:
        values = [rf.number(row[c]) for c in ("tokens_per_s", "model_tflops", "ms_per_step")]
        if None not in values:
            table.append((row["precision"], *values))
    return table


def peer_name(precision):
    """torch_peer.csv's precision ("torch_bf16_compile") as a table row's name."""
    mode = precision[len(rf.TORCH_PEER_PREFIX):] if precision.startswith(rf.TORCH_PEER_PREFIX) else precision
    return f"PyTorch BF16 ({'torch.compile' if mode == 'compile' else mode})"


def speed_section(out: Path):
    """The speed table: bench_trainer's precisions, then the PyTorch peer, speedups against the first
    of bench_trainer's; a line for each of the two that is missing, naming its log."""
    try:
        ours = read_speed(out / rf.SPEED)
        peer = [(peer_name(p), *values) for p, *values in read_speed(out / rf.TORCH_PEER)]
    except ValueError as error:
        return [f"Speed: unreadable: {error}.", ""]
    lines = []
    if not ours:
        lines += [f"Not measured: {why_missing(out, rf.BENCH_TRAINER_LOG, 'bench_trainer')}.", ""]
    if ours or peer:
        base = ours[0] if ours else None
        lines += [f"| precision | tokens/s | model TFLOP/s | ms/step | speedup vs {base[0] if base else '-'} |",
                  "|---|---|---|---|---|"]
        for name, tokens, tflops, ms in ours + peer:
            speedup = f"{tokens / base[1]:.2f}x" if base and base[1] > 0 else "-"
            lines.append(f"| {rf.markdown_cell(name)} | {tokens:.0f} | {tflops:.1f} | {ms:.1f} | {speedup} |")
        lines.append("")
    if not peer:
        lines += [f"PyTorch peer: not in the table: {why_missing(out, rf.TORCH_PEER_LOG, 'torch_peer.py')}.", ""]
    return lines


def notes_section(out: Path):
    """What bench_trainer and the peer said about their runs (device, shape, attention kernel, memory)."""
    notes = []
    for log_name, prefix in ((rf.BENCH_TRAINER_LOG, "bench_trainer:"), (rf.TORCH_PEER_LOG, "torch_peer:")):
        path = out / log_name
        if path.is_file():
            notes += [f"- {line.strip()}" for line in path.read_text(errors="replace").splitlines()
                      if line.startswith(prefix)]
    return notes + [""] if notes else []


def profile_section(out: Path):
    """GPU time per step by phase, one column per precision."""
    path = out / rf.PROFILE
    try:
        rows, _ = rf.read_table(path, (rf.PROFILE_PHASE,))
    except ValueError as error:
        return [f"GPU time per step by phase: `{rf.PROFILE}` unreadable: {error}.", ""]
    columns = [c for c in (rows[0].keys() if rows else []) if c != rf.PROFILE_PHASE]
    if not rows or not columns:
        return [f"GPU time per step by phase: not measured: {why_missing(out, rf.BENCH_TRAINER_LOG, 'bench_trainer')}.",
                ""]
    names = [c[:-len(rf.PROFILE_SUFFIX)] if c.endswith(rf.PROFILE_SUFFIX) else c for c in columns]
    lines = ["GPU time per step by phase (ms, CUDA events; the FP8 casts are inside the linear layers):", "",
             "| phase | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for row in rows:
        cells = [rf.number(row[c]) for c in columns]
        lines.append(f"| {rf.markdown_cell(row[rf.PROFILE_PHASE])} | " +
                     " | ".join("?" if v is None else f"{v:.1f}" for v in cells) + " |")
    return lines + [""]


def final_line(path: Path):
    """The match of fp8_trainer's final: line in a parity log, its raw text, or None when absent."""
    if not path.is_file():
        return None
    for line in reversed(path.read_text(errors="replace").splitlines()):
        if line.startswith(rf.FINAL_PREFIX):
            text = line[len(rf.FINAL_PREFIX):].strip()
            return FINAL.search(text) or text
    return None


def parity_section(out: Path):
    """Final validation loss of each parity run, FP8 less BF16, and the plot where it was drawn."""
    lines = ["| precision | validation loss (nats/byte) | unigram baseline | steps | time |", "|---|---|---|---|---|"]
    losses = {}
    for precision in rf.PARITY_PRECISIONS:
        log_name = rf.parity_log(precision)
        final = final_line(out / log_name)
        if final is None:
            last = last_line(out / log_name)
            state = (f"did not finish; last line of `{log_name}`: `{rf.markdown_cell(last)}`" if last
                     else f"did not run (`{log_name}` is missing or empty)")
            lines.append(f"| {precision} | {state} | | | |")
        elif isinstance(final, str):
            lines.append(f"| {precision} | {rf.markdown_cell(final)} | | | |")
        else:
            losses[precision] = rf.number(final["loss"])
            lines.append(f"| {precision} | {final['loss']} | {final['baseline']} | {final['steps']} | "
                         f"{final['time']} |")
    lines.append("")
    if losses.get("bf16") is not None and losses.get("fp8") is not None:
        lines += [f"FP8 less BF16: {losses['fp8'] - losses['bf16']:+.4f} nats/byte.", ""]
    if (out / rf.LOSS_PLOT).is_file():
        lines.append(f"![loss parity]({rf.LOSS_PLOT})")
    else:
        lines.append(f"(No loss plot: `{rf.LOSS_PLOT}` was not drawn; see the parity runs' logs.)")
    return lines


def results(out: Path, steps, data_name, device, date):
    """The whole page, as Markdown."""
    lines = ["# The trainer on the GPU: measured tables", "",
             f"Generated by `bench/cuda/trainer_tables.sh` on {device}, {date}.", "",
             f"## Speed ({SPEED_SHAPE})", ""]
    lines += speed_section(out) + notes_section(out) + profile_section(out)
    lines += [f"## Loss parity ({PARITY_SHAPE}, {steps} steps, {data_name})", ""] + parity_section(out)
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="trainer_tables.sh's output folder")
    parser.add_argument("--steps", required=True, help="steps of each loss-parity run")
    parser.add_argument("--data-name", required=True, help="the text the parity runs trained on")
    parser.add_argument("--device", default="unknown device", help="the GPU's name")
    args = parser.parse_args()
    if not args.out.is_dir():
        print(f"trainer_results.py: {args.out} is not a folder (give trainer_tables.sh's output folder)",
              file=sys.stderr)
        return 2
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    text = results(args.out, args.steps, args.data_name, args.device or "unknown device", date)
    (args.out / "trainer_cuda_results.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
