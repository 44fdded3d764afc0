#!/usr/bin/env python3
"""The short table at the end of bench/gpu_check.sh: test outcomes, the FP8/BF16 and
FP8/torch._scaled_mm ratios at 8192^3, the DeepSeek-V3 shape with row-wise and block scales, the
layer GEMM set, the quantize kernels against copy and the per-call overhead, each beside its target
and the ceilings measured in the same run. Reads the CSV files and steps.csv of a log folder.

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
    ceilings = {row["name"]: row["value"] for row in rows(logs / "ceilings.csv")}
    if ceilings:
        lines.append(f"Device {ceilings.get('device', '?')}, driver CUDA {ceilings.get('driver CUDA version', '?')}, "
                     f"runtime CUDA {ceilings.get('runtime CUDA version', '?')}, cuBLASLt "
                     f"{ceilings.get('cuBLASLt version', '?')}; device-to-device copy "
                     f"{float(ceilings.get('device-to-device copy', 0)):.0f} GB/s (read + write), same run.\n")
    lines.append("| figure | measured | target |\n|---|---|---|")

    def verdict(ok):
        return "met" if ok else "NOT met"

    bf16 = tflops(gemm, "8192", "bf16")
    fast = tflops(gemm, "8192", "fp8 fast_accum")
    split = tflops(gemm, "8192", "fp8 split_accum")
    if bf16 and fast:
        lines.append(f"| FP8 (fast accum) / BF16 at 8192^3, same wrapper | {fast:.0f} / {bf16:.0f} TFLOP/s = "
                     f"{fast / bf16:.2f}x | >= 1.8x ({verdict(fast / bf16 >= 1.8)}) |")
    if bf16 and split:
        lines.append(f"| FP8 (split accum) / BF16 at 8192^3 | {split / bf16:.2f}x | (reported) |")
    ours_interleaved = tflops(torch, "8192", "interleaved fp8 fast_accum")
    torch_fast = tflops(torch, "8192", "torch _scaled_mm fast_accum")
    if ours_interleaved and torch_fast:
        ratio = ours_interleaved / torch_fast
        lines.append(f"| fp8::cublaslt / torch._scaled_mm at 8192^3, interleaved | {ours_interleaved:.0f} / "
                     f"{torch_fast:.0f} TFLOP/s = {ratio:.3f} | >= 0.97 ({verdict(ratio >= 0.97)}) |")
    else:
        lines.append("| fp8::cublaslt / torch._scaled_mm at 8192^3 | no PyTorch comparison in this run | >= 0.97 (unchecked) |")
    deepseek_bf16 = tflops(gemm, "4096x7168x16384", "bf16")
    for variant in ("fp8 fast_accum", "fp8 row_wise", "fp8 1x128x128x128", "fp8 1x128x1x128"):
        value = tflops(gemm, "4096x7168x16384", variant)
        if value and deepseek_bf16:
            target = ">= 1.5x" if variant != "fp8 fast_accum" else "(reported)"
            ok = "" if variant == "fp8 fast_accum" else f" ({verdict(value / deepseek_bf16 >= 1.5)})"
            lines.append(f"| {variant} / BF16 at 4096 x 7168 x 16384 | {value:.0f} / {deepseek_bf16:.0f} TFLOP/s = "
                         f"{value / deepseek_bf16:.2f}x | {target}{ok} |")
    layer = {(row["linear"], row["variant"]): float(row["ms"]) for row in rows(logs / "layer.csv")}
    if ("layer", "bf16") in layer and ("layer", "fp8 total") in layer:
        bf16_ms, fp8_ms = layer[("layer", "bf16")], layer[("layer", "fp8 total")]
        casts = layer.get(("layer", "fp8 casts"), 0.0)
        gemms = layer.get(("layer", "fp8 gemms"), 0.0)
        share = 100.0 * casts / (casts + gemms) if casts + gemms > 0 else 0.0
        lines.append(f"| layer GEMM set with its casts (hidden 4096, FFN 16384, 15872 tokens, current scaling) | "
                     f"{bf16_ms:.2f} / {fp8_ms:.2f} ms = {bf16_ms / fp8_ms:.2f}x (casts {share:.0f}% of FP8 time) | "
                     f">= 1.7x ({verdict(bf16_ms / fp8_ms >= 1.7)}) |")
    worst = max((float(row["max_error"]) for row in gemm if row.get("max_error")), default=None)
    if worst is not None:
        lines.append(f"| largest sampled error of any product, / sum|x w| | {worst:.2e} | within each bound "
                     f"(bench_gemm fails otherwise) |")
    for row in rows(logs / "quantize.csv"):
        ratio = float(row["ratio"])
        reported = "2 reads" in row["kernel"] or "per_row" in row["kernel"]
        target = "(reported)" if reported else f">= 0.85 ({verdict(ratio >= 0.85)})"
        lines.append(f"| {row['kernel']} | {float(row['gbps']):.0f} GB/s = {ratio:.2f} of copy "
                     f"({float(row['copy_gbps']):.0f} GB/s) | {target} |")
    overhead = {row["variant"]: float(row["us_per_call"]) for row in rows(logs / "overhead.csv")}
    if "with_cache" in overhead and "without_cache" in overhead:
        lines.append(f"| host time per call, with / without the plan cache | {overhead['with_cache']:.2f} / "
                     f"{overhead['without_cache']:.2f} us | (reported) |")
    if "with_cache" in overhead and "bare_cublasLtMatmul" in overhead:
        # The wrapper's own work: a cached call less the bare cublasLtMatmul it ends in.
        own = overhead["with_cache"] - overhead["bare_cublasLtMatmul"]
        lines.append(f"| the wrapper's own host time per cached call (the call less the bare cublasLtMatmul, "
                     f"{overhead['bare_cublasLtMatmul']:.2f} us) | {own:.2f} us | < 1 us ({verdict(own < 1.0)}) |")
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
