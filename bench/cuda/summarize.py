#!/usr/bin/env python3
"""The short table at the end of bench/gpu_check.sh: test outcomes, the FP8/BF16 and
FP8/torch._scaled_mm ratios at 8192^3, the DeepSeek-V3 shape with row-wise and block scales (through
the heuristic's pick and tuned), what tuning gained, the layer GEMM set, the quantize kernels against
copy and the per-call overhead, each beside its target and the ceilings measured in the same run.
Reads the CSV files and steps.csv of a log folder.

    python3 bench/cuda/summarize.py <log-folder> [--docs <docs-folder>]

Writes <log-folder>/summary.md, and <docs-folder>/cuda_results.md when --docs is given. A run cut
short still gets its table: a figure whose file or rows are missing says so beside its target, and
the files not written are listed.
"""
import sys
from pathlib import Path

import result_files as rf


def read_steps(path: Path):
    """(step, result, seconds) per line of gpu_check.sh's steps.csv.

    Split from the right: a step name may hold a comma ("torch._scaled_mm, interleaved"), the
    result and the seconds that gpu_check.sh's record() appends never do."""
    if not path.is_file():
        return []
    steps = []
    for line in path.read_text(errors="replace").splitlines()[1:]:
        fields = line.rsplit(",", 2)
        if len(fields) == 3:
            steps.append(tuple(field.strip() for field in fields))
        elif line.strip():
            steps.append((line.strip(), "(incomplete line)", ""))
    return steps


class log_folder:
    """The CSV files of one gpu_check.sh log folder, read once, with what was wrong with each."""

    def __init__(self, logs: Path):
        self.logs = logs
        self.problems = []  # lines for the summary: files missing, lines cut short, unreadable headers
        self.gemm = self.table(rf.GEMM, rf.GEMM_NEEDED)
        self.tuning = self.table(rf.TUNING, rf.TUNING_COLUMNS)
        self.torch = self.table(rf.TORCH_GEMM, rf.TORCH_GEMM_COLUMNS)
        self.ceilings = {r["name"]: r["value"] for r in self.table(rf.CEILINGS, rf.CEILING_COLUMNS)}
        self.overhead = {r["variant"]: rf.number(r["us_per_call"])
                         for r in self.table(rf.OVERHEAD, rf.OVERHEAD_COLUMNS)}
        self.quantize = self.table(rf.QUANTIZE, rf.QUANTIZE_COLUMNS)
        self.layer = {(r["linear"], r["variant"]): rf.number(r["ms"]) for r in self.table(rf.LAYER, rf.LAYER_COLUMNS)}
        missing = [f"`{name}` ({writer})" for name, writer in rf.GPU_CHECK_FILES.items()
                   if not (logs / name).is_file()]
        if missing:
            self.problems.insert(0, "Not in the log folder (the run stopped before, or the step failed or did "
                                    "not run): " + ", ".join(missing) + ".")

    def table(self, name, columns):
        """The complete rows of one file; notes a cut-short or unreadable file among the problems."""
        try:
            rows, incomplete = rf.read_table(self.logs / name, columns)
        except ValueError as error:
            self.problems.append(f"`{name}` unreadable: {error}.")
            return []
        if incomplete:
            self.problems.append(f"`{name}`: {incomplete} incomplete line(s) left out (the writer was stopped "
                                 f"mid-line).")
        return rows


def tflops(table, shape, variant):
    """TFLOP/s of one variant at one (m, n, k), or None where the run did not measure it."""
    for row in table:
        if row["variant"] == variant and tuple(rf.number(row[c]) for c in "mnk") == shape:
            return rf.number(row["tflops"])
    return None


def verdict(ok):
    return "met" if ok else "NOT met"


def target(aim, ok):
    """The target cell: the aim and whether this run met it ("unchecked" where nothing was measured)."""
    return f"{aim} ({'unchecked' if ok is None else verdict(ok)})"


def not_measured(source):
    return f"not measured in this run (no rows in `{source}`)"


def headline_rows(f):
    """FP8 / BF16 and fp8::cublaslt / torch._scaled_mm at 8192^3."""
    bf16, fast = tflops(f.gemm, rf.HEADLINE, rf.BF16), tflops(f.gemm, rf.HEADLINE, rf.FP8_FAST)
    split = tflops(f.gemm, rf.HEADLINE, rf.FP8_SPLIT)
    lines = []
    if bf16 and fast:
        lines.append(f"| FP8 (fast accum) / BF16 at 8192^3, same wrapper | {fast:.0f} / {bf16:.0f} TFLOP/s = "
                     f"{fast / bf16:.2f}x | {target('>= 1.8x', fast / bf16 >= 1.8)} |")
    else:
        lines.append(f"| FP8 (fast accum) / BF16 at 8192^3, same wrapper | {not_measured(rf.GEMM)} | "
                     f"{target('>= 1.8x', None)} |")
    if bf16 and split:
        lines.append(f"| FP8 (split accum) / BF16 at 8192^3 | {split / bf16:.2f}x | (reported) |")
    bf16_tuned, fast_tuned = (tflops(f.gemm, rf.HEADLINE, rf.tuned(v)) for v in (rf.BF16, rf.FP8_FAST))
    if bf16_tuned and fast_tuned:
        lines.append(f"| FP8 (fast accum) / BF16 at 8192^3, both tuned | {fast_tuned:.0f} / {bf16_tuned:.0f} TFLOP/s = "
                     f"{fast_tuned / bf16_tuned:.2f}x | (reported) |")
    ours = tflops(f.torch, rf.HEADLINE, rf.interleaved(rf.FP8_FAST))
    theirs = tflops(f.torch, rf.HEADLINE, rf.TORCH_FAST)
    if ours and theirs:
        lines.append(f"| fp8::cublaslt / torch._scaled_mm at 8192^3, interleaved | {ours:.0f} / {theirs:.0f} "
                     f"TFLOP/s = {ours / theirs:.3f} | {target('>= 0.97', ours / theirs >= 0.97)} |")
    else:
        lines.append("| fp8::cublaslt / torch._scaled_mm at 8192^3 | no PyTorch comparison in this run | "
                     f"{target('>= 0.97', None)} |")
    return lines


def deepseek_rows(f):
    """Tensorwise (reported), row-wise and block-scaled FP8 against BF16 at 4096 x 7168 x 16384, through
    the heuristic's pick and then with both products tuned."""
    lines = []
    for name in (lambda v: v, rf.tuned):
        bf16 = tflops(f.gemm, rf.DEEPSEEK, name(rf.BF16))
        for variant in (rf.FP8_FAST, rf.FP8_ROW_WISE, rf.FP8_BLOCKS_2D, rf.FP8_BLOCKS_1D):
            value = tflops(f.gemm, rf.DEEPSEEK, name(variant))
            reported = variant == rf.FP8_FAST
            figure = f"{name(variant)} / {name('BF16')} at 4096 x 7168 x 16384"
            if value and bf16:
                aim = "(reported)" if reported else target(">= 1.5x", value / bf16 >= 1.5)
                lines.append(f"| {figure} | {value:.0f} / {bf16:.0f} TFLOP/s = {value / bf16:.2f}x | {aim} |")
            elif not reported:
                lines.append(f"| {figure} | {not_measured(rf.GEMM)} | {target('>= 1.5x', None)} |")
    return lines


def tuning_rows(f):
    """What timing every candidate gained over the heuristic's pick: the largest gain and its product."""
    gains = []
    for row in f.tuning:
        heuristic, fastest = rf.number(row["heuristic_ms"]), rf.number(row["fastest_ms"])
        if heuristic and fastest and heuristic == heuristic:  # a NaN heuristic time: its pick failed
            gains.append((heuristic / fastest, f"{row['variant']} at {row['m']} x {row['n']} x {row['k']}"))
    if not gains:
        return [f"| tuning: the heuristic's pick / the fastest candidate | {not_measured(rf.TUNING)} | (reported) |"]
    gain, product = max(gains)
    return [f"| tuning: the heuristic's pick / the fastest candidate, largest over {len(gains)} products | "
            f"{gain:.2f}x ({rf.markdown_cell(product)}) | (reported) |"]


def layer_rows(f):
    """The layer's GEMM set with its casts, BF16 time over FP8 time, and the casts' share."""
    name = "layer GEMM set with its casts (hidden 4096, FFN 16384, 15872 tokens, current scaling)"
    bf16_ms, fp8_ms = f.layer.get((rf.LAYER_SUM, rf.LAYER_BF16)), f.layer.get((rf.LAYER_SUM, rf.LAYER_TOTAL))
    if not bf16_ms or not fp8_ms:
        return [f"| {name} | {not_measured(rf.LAYER)} | {target('>= 1.7x', None)} |"]
    casts = f.layer.get((rf.LAYER_SUM, rf.LAYER_CASTS)) or 0.0
    gemms = f.layer.get((rf.LAYER_SUM, rf.LAYER_GEMMS)) or 0.0
    share = 100.0 * casts / (casts + gemms) if casts + gemms > 0 else 0.0
    lines = [f"| {name} | {bf16_ms:.2f} / {fp8_ms:.2f} ms = {bf16_ms / fp8_ms:.2f}x (casts {share:.0f}% of FP8 "
             f"time) | {target('>= 1.7x', bf16_ms / fp8_ms >= 1.7)} |"]
    delayed_ms = f.layer.get((rf.LAYER_SUM, rf.LAYER_DELAYED_TOTAL))
    if delayed_ms:
        lines.append(f"| the same with delayed-scaling casts (one read each) | {bf16_ms:.2f} / {delayed_ms:.2f} ms = "
                     f"{bf16_ms / delayed_ms:.2f}x | (reported) |")
    given_ms = f.layer.get((rf.LAYER_SUM, rf.LAYER_PRODUCER_TOTAL))
    if given_ms:
        plain = f.layer.get((rf.LAYER_SUM, rf.LAYER_PRODUCER)) or 0.0
        tracked = f.layer.get((rf.LAYER_SUM, rf.LAYER_PRODUCER_TRACKED)) or 0.0
        lines.append(f"| the same, current scaling with the producers' amaxes (one read each; recording them "
                     f"costs the producers {plain:.2f} -> {tracked:.2f} ms, included) | {bf16_ms:.2f} / "
                     f"{given_ms:.2f} ms = {bf16_ms / given_ms:.2f}x | "
                     f"{target('>= 1.7x', bf16_ms / given_ms >= 1.7)} |")
    return lines


def error_rows(f):
    errors = [rf.number(row["max_error"]) for row in f.gemm]
    errors = [e for e in errors if e is not None]
    if not errors:
        return []
    # The pipes of |x w| escaped: bare, they would split the Markdown cell.
    return [f"| largest sampled error of any product, / sum \\|x w\\| | {max(errors):.2e} | within each bound "
            f"(bench_gemm fails otherwise) |"]


def timing_rows(f):
    """bench_gemm replays each product's calls from a CUDA graph; names the products it could not."""
    enqueued = [f"{row['label']} {row['variant']}" for row in f.gemm if row.get("timing") == "enqueued"]
    if not enqueued:
        return []
    return [f"| products timed as enqueued, not from a graph (small ones then time the host) | "
            f"{rf.markdown_cell(', '.join(enqueued))} | (reported) |"]


def quantize_rows(f):
    """Each quantize kernel's GB/s against a copy of the same bytes, aim 0.85 unless reported only."""
    if not f.quantize:
        return [f"| quantize kernels | {not_measured(rf.QUANTIZE)} | {target('>= 0.85', None)} |"]
    lines = []
    for row in f.quantize:
        ratio, gbps, copy = rf.number(row["ratio"]), rf.number(row["gbps"]), rf.number(row["copy_gbps"])
        if None in (ratio, gbps, copy):
            continue
        reported = any(mark in row["kernel"] for mark in rf.QUANTIZE_REPORTED)
        aim = "(reported)" if reported else target(">= 0.85", ratio >= 0.85)
        lines.append(f"| {rf.markdown_cell(row['kernel'])} | {gbps:.0f} GB/s = {ratio:.2f} of copy ({copy:.0f} GB/s) | {aim} |")
    return lines


def overhead_rows(f):
    """Host time per call with and without the plan cache, and the wrapper's own share (< 1 us)."""
    o = f.overhead
    lines = []
    if o.get(rf.WITH_CACHE) is not None and o.get(rf.WITHOUT_CACHE) is not None:
        lines.append(f"| host time per call, with / without the plan cache | {o[rf.WITH_CACHE]:.2f} / "
                     f"{o[rf.WITHOUT_CACHE]:.2f} us | (reported) |")
    name = "the wrapper's own host time per cached call (the call less the bare cublasLtMatmul"
    if o.get(rf.WITH_CACHE) is not None and o.get(rf.BARE_MATMUL) is not None:
        # The wrapper's own work: a cached call less the bare cublasLtMatmul it ends in.
        own = o[rf.WITH_CACHE] - o[rf.BARE_MATMUL]
        lines.append(f"| {name}, {o[rf.BARE_MATMUL]:.2f} us) | {own:.2f} us | {target('< 1 us', own < 1.0)} |")
    else:
        lines.append(f"| {name}) | {not_measured(rf.OVERHEAD)} | {target('< 1 us', None)} |")
    return lines


def ceiling_line(ceilings):
    """The device, versions and copy bandwidth of the same run, as one sentence."""
    if not ceilings:
        return []
    device, driver, runtime, cublaslt = (ceilings.get(name, "?") for name in rf.CEILING_VERSIONS)
    copy = rf.number(ceilings.get(rf.COPY_BANDWIDTH))
    copy_text = f"{copy:.0f} GB/s (read + write)" if copy is not None else "not measured"
    return [f"Device {device}, driver CUDA {driver}, runtime CUDA {runtime}, cuBLASLt {cublaslt}; "
            f"device-to-device copy {copy_text}, same run.\n"]


def summary(logs: Path):
    """The whole summary of one log folder, as Markdown."""
    device_file = logs / rf.DEVICE
    devices = device_file.read_text(errors="replace").split("\n") if device_file.is_file() else []
    device = "; ".join(d.strip() for d in devices if d.strip()) or "unknown device"
    lines = [f"# GPU check: {device}\n", "| step | result | seconds |", "|---|---|---|"]
    steps = read_steps(logs / rf.STEPS)
    lines += [f"| {rf.markdown_cell(step)} | {rf.markdown_cell(result)} | {seconds} |" for step, result, seconds in steps]
    if not steps:
        lines.append(f"| (none) | `{rf.STEPS}` is missing or empty | |")
    lines.append("")
    f = log_folder(logs)
    if f.problems:
        lines += [f"- {problem}" for problem in f.problems] + [""]
    lines += ceiling_line(f.ceilings)
    lines += ["| figure | measured | target |", "|---|---|---|"]
    for rows in (headline_rows, deepseek_rows, tuning_rows, layer_rows, error_rows, timing_rows, quantize_rows,
                 overhead_rows):
        lines += rows(f)
    return "\n".join(lines) + "\n"


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    logs = Path(sys.argv[1])
    if not logs.is_dir():
        print(f"summarize.py: {logs} is not a folder (give gpu_check.sh's log folder)", file=sys.stderr)
        return 2
    docs = None
    if "--docs" in sys.argv:
        where = sys.argv.index("--docs") + 1
        if where >= len(sys.argv):
            print("summarize.py: --docs needs a folder", file=sys.stderr)
            return 2
        docs = Path(sys.argv[where])
    text = summary(logs)
    print(text)
    (logs / "summary.md").write_text(text)
    if docs is not None:
        docs.mkdir(parents=True, exist_ok=True)
        (docs / "cuda_results.md").write_text(
            "<!-- Written by bench/gpu_check.sh (bench/cuda/summarize.py); full logs in its log folder. -->\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
