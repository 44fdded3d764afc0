#!/usr/bin/env python3
"""The short table at the end of bench/gpu_check.sh: test outcomes, the FP8/BF16 and
FP8/torch._scaled_mm ratios at 8192^3, the quantize kernels against copy, and the per-call overhead,
each beside its target. Reads the CSV files and steps.txt of a log folder.

    python3 bench/cuda/summarize.py <log-folder> [--docs <docs-folder>]

Writes <log-folder>/summary.md, and <docs-folder>/cuda_results.md when --docs is given.
"""
import csv
import sys
from pathlib import Path


def rows(path: Path):
    if not path.exists():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


def tflops(table, label, variant):
    for row in table:
        if row["label"] == label and row["variant"] == variant:
            return float(row["tflops"])
    return None


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    logs = Path(sys.argv[1])
    docs = Path(sys.argv[sys.argv.index("--docs") + 1]) if "--docs" in sys.argv else None
    lines = []
    device = (logs / "device.txt").read_text().strip() if (logs / "device.txt").exists() else "unknown device"
    lines.append(f"# GPU check: {device}\n")

    lines.append("| step | result |\n|---|---|")
    for step in rows(logs / "steps.csv"):
        lines.append(f"| {step['step']} | {step['result']} |")
    lines.append("")

    gemm = rows(logs / "gemm.csv")
    torch = rows(logs / "torch_gemm.csv")
    lines.append("| figure | measured | target |\n|---|---|---|")
    bf16 = tflops(gemm, "8192", "bf16")
    fast = tflops(gemm, "8192", "fp8 fast_accum")
    split = tflops(gemm, "8192", "fp8 split_accum")
    if bf16 and fast:
        verdict = "met" if fast / bf16 >= 1.6 else "NOT met"
        lines.append(f"| FP8 fast-accum / BF16 at 8192^3 | {fast:.0f} / {bf16:.0f} TFLOP/s = {fast / bf16:.2f}x | >= 1.6x ({verdict}) |")
    if bf16 and split:
        lines.append(f"| FP8 split-accum / BF16 at 8192^3 | {split / bf16:.2f}x | (reported) |")
    torch_fast = tflops(torch, "8192", "torch _scaled_mm fast_accum")
    if fast and torch_fast:
        verdict = "met" if fast >= 0.95 * torch_fast else "NOT met"
        lines.append(f"| fp8::cublaslt / torch._scaled_mm at 8192^3 | {fast:.0f} / {torch_fast:.0f} TFLOP/s = "
                     f"{fast / torch_fast:.3f} | >= 0.95 ({verdict}) |")
    elif fast:
        lines.append("| fp8::cublaslt / torch._scaled_mm at 8192^3 | no PyTorch in this run | >= 0.95 (unchecked) |")
    for row in rows(logs / "quantize.csv"):
        ratio = float(row["ratio"])
        target = ">= 0.80" if "current per_tensor" not in row["kernel"] else "(reads twice; reported)"
        verdict = "" if "reported" in target else (" (met)" if ratio >= 0.8 else " (NOT met)")
        lines.append(f"| {row['kernel']} | {float(row['gbps']):.0f} GB/s = {ratio:.2f} of copy "
                     f"({float(row['copy_gbps']):.0f} GB/s) | {target}{verdict} |")
    overhead = {row["variant"]: float(row["us_per_call"]) for row in rows(logs / "overhead.csv")}
    if "with_cache" in overhead and "without_cache" in overhead:
        lines.append(f"| host time per call, with / without the algorithm cache | {overhead['with_cache']:.2f} / "
                     f"{overhead['without_cache']:.2f} us | (reported) |")
    text = "\n".join(lines) + "\n"
    print(text)
    (logs / "summary.md").write_text(text)
    if docs is not None:
        docs.mkdir(parents=True, exist_ok=True)
        (docs / "cuda_results.md").write_text(
            "<!-- Written by bench/gpu_check.sh (bench/cuda/summarize.py); full logs in its log folder. -->\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
