#!/usr/bin/env python3
"""Assembles trainer_cuda_results.md from the output folder of bench/cuda/trainer_tables.sh: for each
speed configuration (passes per optimizer step, a folder of its own), the speed table (bench_trainer's
speed.csv with the PyTorch peer's torch_peer.csv as one more row), the lines bench_trainer printed
about its runs (attention kernel, memory, kernel trace), the per-phase GPU time (profile.csv) and
the longest kernels of each precision (kernels.csv); then the
loss-parity runs over seeds: one row per configuration with its validation loss over the seeds
against BF16's, the per-seed losses, and the plot of the mean curves (drawn here, with plot_loss.py).
The seed statistics, the table and the plot are examples/trainer/scripts/seed_table.py's, which the
CPU trainer's results_table.py uses too.

    python3 bench/cuda/trainer_results.py <out-dir> --steps N --data-name NAME --device NAME

A part that did not run, or stopped before writing its file, gets a line saying so and naming its
log, never an empty table: the folder of a run cut short still yields a readable page. Exits 1 only
when the plot could not be drawn from runs that finished.
"""
import argparse
import datetime
import sys
from pathlib import Path

import result_files as rf

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples/trainer/scripts"))
import seed_table as st  # noqa: E402

SPEED_SHAPE = "d_model 4096, SwiGLU 14336, 32 heads, context 2048, bytes, 4 blocks"
PARITY_SHAPE = "d_model 1024, 8 blocks, lr 1e-3"


def last_line(path: Path):
    """The last non-empty line of a log, or None where the log is missing or empty."""
    if not path.is_file():
        return None
    lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else None


def why_missing(out: Path, log_name, program):
    """Why a program's results are absent, from its log (log_name relative to out): not run, or what
    it said last."""
    last = last_line(out / log_name)
    if last is None:
        return f"{program} did not run (`{log_name}` is missing or empty)"
    return f"{program} stopped before writing its results; last line of `{log_name}`: `{rf.markdown_cell(last)}`"


def read_speed(path: Path):
    """[(precision, tokens/s, TFLOP/s, ms/step, tokens per optimizer step or None)] from speed.csv or
    torch_peer.csv (the same columns; the last is absent from files written before it was added)."""
    rows, _ = rf.read_table(path, rf.SPEED_COLUMNS)
    table = []
    for row in rows:
        values = [rf.number(row[c]) for c in ("tokens_per_s", "model_tflops", "ms_per_step")]
        if None not in values:
            table.append((row["precision"], *values, rf.number(row.get("tokens_per_step"))))
    return table


def peer_name(precision):
    """torch_peer.csv's precision ("torch_bf16_compile") as a table row's name."""
    mode = precision[len(rf.TORCH_PEER_PREFIX):] if precision.startswith(rf.TORCH_PEER_PREFIX) else precision
    return f"PyTorch BF16 ({'torch.compile' if mode == 'compile' else mode})"


def speed_heading(passes, rows):
    """The heading of one speed configuration, with its tokens per optimizer step: as the programs
    wrote them, or from the default pass where neither did."""
    written = [r[4] for r in rows if r[4]]
    tokens = int(written[0]) if written else passes * rf.SPEED_PASS_TOKENS
    shape = "batch 2 x context 2048"
    if passes == 1:
        return f"### 1 pass per optimizer step: {tokens} tokens per optimizer step ({shape})"
    return (f"### {passes} passes per optimizer step: {tokens} tokens per optimizer step (gradient accumulation: "
            f"{passes} passes of {shape})")


def speed_table(out: Path, passes):
    """The heading and table of one configuration: bench_trainer's precisions, then the PyTorch
    peer, speedups against the first of bench_trainer's; a line for each of the two that is
    missing, naming its log."""
    name = rf.speed_folder(passes)
    folder = out / name
    try:
        ours = read_speed(folder / rf.SPEED)
        peer = [(peer_name(p), *values) for p, *values in read_speed(folder / rf.TORCH_PEER)]
    except ValueError as error:
        return [speed_heading(passes, []), "", f"Speed: unreadable: {error}.", ""]
    lines = [speed_heading(passes, ours + peer), ""]
    if not ours:
        lines += [f"Not measured: {why_missing(out, f'{name}/{rf.BENCH_TRAINER_LOG}', 'bench_trainer')}.", ""]
    if ours or peer:
        base = ours[0] if ours else None
        lines += [f"| precision | tokens/s | model TFLOP/s | ms/step | speedup vs {base[0] if base else '-'} |",
                  "|---|---|---|---|---|"]
        for row_name, tokens, tflops, ms, _ in ours + peer:
            speedup = f"{tokens / base[1]:.2f}x" if base and base[1] > 0 else "-"
            lines.append(f"| {rf.markdown_cell(row_name)} | {tokens:.0f} | {tflops:.1f} | {ms:.1f} | {speedup} |")
        lines.append("")
    if not peer:
        lines += [f"PyTorch peer: not in the table: "
                  f"{why_missing(out, f'{name}/{rf.TORCH_PEER_LOG}', 'torch_peer.py')}.", ""]
    return lines


def notes_section(out: Path, name):
    """What bench_trainer and the peer said about their runs in folder `name` (device, shape, attention
    kernel, memory, how the GEMMs were chosen)."""
    folder = out / name
    notes = []
    for log_name, prefix in ((rf.BENCH_TRAINER_LOG, "bench_trainer:"), (rf.TORCH_PEER_LOG, "torch_peer:")):
        path = folder / log_name
        if path.is_file():
            notes += [f"- {line.strip()}" for line in path.read_text(errors="replace").splitlines()
                      if line.startswith(prefix)]
    return notes + [""] if notes else []


def profile_section(out: Path, passes):
    """GPU time per optimizer step by phase, one column per precision."""
    name = rf.speed_folder(passes)
    path = out / name / rf.PROFILE
    try:
        rows, _ = rf.read_table(path, (rf.PROFILE_PHASE,))
    except ValueError as error:
        return [f"GPU time per optimizer step by phase: `{name}/{rf.PROFILE}` unreadable: {error}.", ""]
    columns = [c for c in (rows[0].keys() if rows else []) if c != rf.PROFILE_PHASE]
    if not rows or not columns:
        why = why_missing(out, f"{name}/{rf.BENCH_TRAINER_LOG}", "bench_trainer")
        return [f"GPU time per optimizer step by phase: not measured: {why}.", ""]
    names = [c[:-len(rf.PROFILE_SUFFIX)] if c.endswith(rf.PROFILE_SUFFIX) else c for c in columns]
    lines = ["GPU time per optimizer step by phase (ms, CUDA events; the linear layers' casts and their GEMMs "
             "apart; all the step's passes, the optimizer once):", "",
             "| phase | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    sums = [0.0] * len(columns)
    for row in rows:
        cells = [rf.number(row[c]) for c in columns]
        lines.append(f"| {rf.markdown_cell(row[rf.PROFILE_PHASE])} | " +
                     " | ".join("?" if v is None else f"{v:.1f}" for v in cells) + " |")
        sums = [None if total is None or v is None else total + v for total, v in zip(sums, cells)]
    lines.append("| all phases | " + " | ".join("?" if v is None else f"{v:.1f}" for v in sums) + " |")
    # The timed steps (no events) beside the phases' sum: what the sum misses is time the GPU waited
    # for the host (launches, each pass's loss read back), which a CUDA graph would take away.
    try:
        timed = {precision: ms for precision, _, _, ms, _ in read_speed(out / name / rf.SPEED)}
    except ValueError:
        timed = {}
    lines.append("| the step, timed | " + " | ".join(f"{timed[n]:.1f}" if n in timed else "?" for n in names) +
                 " |")
    return lines + ["", "The timed step above the sum of its phases is time in which the GPU waited for the host "
                    "(kernel launches, after each pass's loss is read back; the read itself, microseconds, "
                    "falls in the loss phase, and the gradient norm's in the optimizer's).", ""]


KERNELS_SHOWN = 12  # per precision (kernels.csv has them all)
KERNEL_NAME_WIDTH = 90  # characters of a kernel's name in the table (template arguments run long)


def short_kernel_name(name):
    """A kernel's name cut to KERNEL_NAME_WIDTH characters, as code in a table cell."""
    if len(name) > KERNEL_NAME_WIDTH:
        name = name[:KERNEL_NAME_WIDTH - 1] + "…"
    return "`" + rf.markdown_cell(name.replace("`", "'")) + "`"


def kernels_section(out: Path, passes):
    """The longest kernels of each precision's traced step (bench_trainer --trace-steps), or why there
    are none: the trace's own line in the log where it said why, else why bench_trainer wrote nothing."""
    name = rf.speed_folder(passes)
    try:
        rows, _ = rf.read_table(out / name / rf.KERNELS, rf.KERNEL_COLUMNS)
    except ValueError as error:
        return [f"Kernels: `{name}/{rf.KERNELS}` unreadable: {error}.", ""]
    by_precision = {}
    for row in rows:
        calls, ms = rf.number(row["calls_per_step"]), rf.number(row["ms_per_step"])
        if calls is not None and ms is not None:
            by_precision.setdefault(row["precision"], []).append((row["kernel"], calls, ms))
    if not by_precision:
        log = out / name / rf.BENCH_TRAINER_LOG
        said = [line.split(": ", 1)[1] for line in (log.read_text(errors="replace").splitlines() if log.is_file() else [])
                if line.startswith("bench_trainer: ") and f": {rf.KERNEL_TRACE_NOTE} not run" in line]
        if said:
            return ["Kernels: not traced: " + "; ".join(f"`{rf.markdown_cell(s)}`" for s in said) + ".", ""]
        return [f"Kernels: not traced: {why_missing(out, f'{name}/{rf.BENCH_TRAINER_LOG}', 'bench_trainer')}.", ""]
    lines = []
    for precision, kernels in by_precision.items():
        kernels.sort(key=lambda k: -k[2])
        total = sum(ms for _, _, ms in kernels)
        lines += [f"{precision}: the {min(KERNELS_SHOWN, len(kernels))} longest of {len(kernels)} kernels, copies and "
                  f"memsets per optimizer step (CUPTI trace; {total:.1f} ms summed; `{name}/{rf.KERNELS}` has them all):",
                  "", "| kernel | calls | ms | share |", "|---|---|---|---|"]
        for kernel, calls, ms in kernels[:KERNELS_SHOWN]:
            share = 100.0 * ms / total if total > 0 else 0.0
            lines.append(f"| {short_kernel_name(kernel)} | {calls:.0f} | {ms:.2f} | {share:.1f}% |")
        lines.append("")
    return lines


def speed_section(out: Path):
    """One table, its notes and its profile per speed configuration."""
    lines = ["Two configurations of the same forward/backward passes (batch 2 x context 2048): one pass per "
             "optimizer step, where the optimizer (the same in BF16 and FP8) runs every 4096 tokens, and "
             f"{rf.SPEED_PASSES[-1]} passes accumulated per step, as a real run trains, which spreads it over "
             f"{rf.SPEED_PASSES[-1]} times the tokens. Tokens/s and model TFLOP/s count every pass; each table's "
             "speedups are against its own first row.", ""]
    for passes in rf.SPEED_PASSES:
        lines += (speed_table(out, passes) + notes_section(out, rf.speed_folder(passes)) +
                  profile_section(out, passes) + kernels_section(out, passes))
    return lines + tuned_section(out)


def tuned_section(out: Path):
    """The last configuration with every GEMM tuned (trainer_tables.sh --tuned): each precision's
    speed, its speedup against the tuned first row, and its gain over the same precision untuned.
    Nothing where the tuned runs were not asked for."""
    name = rf.SPEED_TUNED_FOLDER
    if not (out / name).is_dir():
        return []
    passes = rf.SPEED_PASSES[-1]
    heading = (f"### {passes} passes per optimizer step, every GEMM tuned on its first call "
               "(`bench_trainer --gemm-tuning on`)")
    try:
        tuned = read_speed(out / name / rf.SPEED)
        untuned = {row[0]: row for row in read_speed(out / rf.speed_folder(passes) / rf.SPEED)}
    except ValueError as error:
        return [heading, "", f"Speed: unreadable: {error}.", ""]
    if not tuned:
        return [heading, "", f"Not measured: {why_missing(out, f'{name}/{rf.BENCH_TRAINER_LOG}', 'bench_trainer')}.",
                ""]
    base = tuned[0]
    lines = [heading, "",
             f"| precision | tokens/s | model TFLOP/s | ms/step | speedup vs {base[0]} tuned | vs itself untuned |",
             "|---|---|---|---|---|---|"]
    for row_name, tokens, tflops, ms, _ in tuned:
        speedup = f"{tokens / base[1]:.2f}x" if base[1] > 0 else "-"
        plain = untuned.get(row_name)
        gain = f"{tokens / plain[1]:.2f}x" if plain and plain[1] > 0 else "-"
        lines.append(f"| {rf.markdown_cell(row_name)} | {tokens:.0f} | {tflops:.1f} | {ms:.1f} | {speedup} | {gain} |")
    return lines + [""] + notes_section(out, name)


def run_state(out: Path, name, seed):
    """Why a parity run has no final loss, from its log."""
    log_name = rf.parity_log(name, seed)
    last = last_line(out / log_name)
    if last is None:
        return f"seed {seed} did not run (`{log_name}` is missing or empty)"
    return f"seed {seed} did not finish (last line of `{log_name}`: `{last}`)"


def parity_results(out: Path, steps):
    """{name: seed_table.seed_results} of the parity configurations, in rf.PARITY_CONFIGS' order."""
    results = {}
    for name, label, switches in rf.PARITY_CONFIGS:
        losses = {}
        for seed in rf.PARITY_SEEDS:
            row = st.final_row(out / rf.PARITY_RUNS / rf.parity_run(name, seed) / rf.TRAINER_LOG, steps)
            losses[seed] = float(row["val_loss"]) if row else None
        results[name] = st.seed_results(label, switches, losses)
    return results


def parity_baseline(out: Path):
    """The unigram baseline the parity runs printed (the same text for all), or None."""
    for name, _, _ in rf.PARITY_CONFIGS:
        for seed in rf.PARITY_SEEDS:
            path = out / rf.parity_log(name, seed)
            baseline = st.unigram_baseline(path.read_text(errors="replace")) if path.is_file() else None
            if baseline is not None:
                return baseline
    return None


def parity_plot(out: Path, results, steps, baseline):
    """Draws the mean validation curve of each configuration over its finished seeds; returns the
    line the page shows and whether drawing failed."""
    curves = []
    for name, r in results.items():
        seeds = [seed for seed, loss in r.losses.items() if loss is not None]
        label = f"{r.label}, mean of seeds {', '.join(map(str, seeds))}"
        curves.append((label, [out / rf.PARITY_RUNS / rf.parity_run(name, seed) for seed in seeds]))
    if not any(folders for _, folders in curves):
        return f"(No loss plot: no parity run finished; `{rf.LOSS_PLOT}` was not drawn.)", False
    title = f"fp8_trainer --device cuda, {PARITY_SHAPE}: mean of seeds"
    plot = st.plot_mean_curves(out / rf.LOSS_PLOT, curves, title, baseline=baseline,
                               zoom_from=int(steps) // 2 if str(steps).isdigit() else None)
    if plot.returncode != 0:
        lines = plot.stderr.strip().splitlines()
        return f"(No loss plot: plot_loss.py failed: `{rf.markdown_cell(lines[-1] if lines else '?')}`.)", True
    return f"![loss parity: validation loss, mean over seeds]({rf.LOSS_PLOT})", False


def parity_section(out: Path, steps):
    """The seed table of the parity configurations, the per-seed losses and the plot; returns the
    lines and whether the plot failed."""
    results = parity_results(out, steps)
    baseline = parity_baseline(out)
    reference = rf.PARITY_CONFIGS[0][0]
    seeds = ", ".join(map(str, rf.PARITY_SEEDS))
    lines = [f"Each configuration trained with seeds {seeds} (the seed draws the weights and the batch order); "
             f"the {len(rf.PARITY_CONFIGS)} runs of a seed at once on the one GPU, the seeds one after another. "
             "Validation loss in nats per byte after the last step"
             + (f"; the unigram baseline (byte frequencies only) is {baseline:.4f}" if baseline is not None else "")
             + ". The FP8 rows keep the LM head in BF16 (the trainer's default). A configuration with seeds that "
             "stopped early is summarised over those that finished (the last column).", ""]
    lines += st.table(results, reference, rf.PARITY_TOLERANCE, judged=[n for n in results if n != reference],
                      extra=[("seeds finished", lambda name, r: f"{len(r.finished)} of {len(r.losses)}")])
    lines += ["", st.verdict_legend(rf.PARITY_TOLERANCE, results[reference].label, "the aim")
              + f" Final validation loss of each seed ({seeds}):", ""]
    lines += st.per_seed_lines(results, missing=lambda name, seed: run_state(out, name, seed))
    plot_line, plot_failed = parity_plot(out, results, steps, baseline)
    return lines + ["", plot_line], plot_failed


def results(out: Path, steps, data_name, device, date):
    """The whole page, as Markdown, and whether its plot failed."""
    lines = ["# The trainer on the GPU: measured tables", "",
             f"Generated by `bench/cuda/trainer_tables.sh` on {device}, {date}.", "",
             f"## Speed ({SPEED_SHAPE})", ""]
    lines += speed_section(out)
    parity, plot_failed = parity_section(out, steps)
    lines += [f"## Loss parity ({PARITY_SHAPE}, {steps} steps, {data_name})", ""] + parity
    return "\n".join(lines) + "\n", plot_failed


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
    text, plot_failed = results(args.out, args.steps, args.data_name, args.device or "unknown device", date)
    (args.out / "trainer_cuda_results.md").write_text(text)
    print(text)
    return 1 if plot_failed else 0


if __name__ == "__main__":
    sys.exit(main())
