#!/usr/bin/env python3
"""The curve of FP8 speedup over BF16 against matrix size, from bench_gemm (and scaled_mm.py) CSVs.

    python3 bench/cuda/plot_speedup.py <log-folder> <docs-folder>

Writes <docs-folder>/fp8_gemm_speedup.csv (size, speedups of the wrapper's tensorwise, row-wise and
block-scaled products and of torch._scaled_mm) and <docs-folder>/fp8_gemm_speedup.png (matplotlib).
"""
import csv
import sys
from pathlib import Path

import result_files as rf


def read(path: Path):
    """{(size, variant): TFLOP/s} of the square sizes in one CSV file (empty where it is missing).

    Lines cut short by a stopped run are left out (rf.read_table); a header without a needed column
    is an error that names it."""
    table = {}
    rows, _ = rf.read_table(path, ("kind", "m", "variant", "tflops"))
    for row in rows:
        size, value = rf.number(row["m"]), rf.number(row["tflops"])
        if row["kind"] == rf.SQUARE and size is not None and value is not None:
            table[(int(size), row["variant"])] = value
    return table


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    logs, docs = Path(sys.argv[1]), Path(sys.argv[2])
    try:
        ours = read(logs / rf.GEMM)
        torch = read(logs / rf.TORCH_GEMM)
    except ValueError as error:
        print(f"plot_speedup.py: {error}", file=sys.stderr)
        return 1
    if not ours:
        print(f"plot_speedup.py: no square-size results in {logs / rf.GEMM}", file=sys.stderr)
        return 1
    sizes = sorted({size for size, _ in ours})

    def ratio(table, size, fp8, base):
        if (size, fp8) in table and (size, base) in table:
            return table[(size, fp8)] / table[(size, base)]
        return None

    series = {
        "fp8::cublaslt fast accumulation": [ratio(ours, s, rf.FP8_FAST, rf.BF16) for s in sizes],
        "fp8::cublaslt split accumulation": [ratio(ours, s, rf.FP8_SPLIT, rf.BF16) for s in sizes],
        "fp8::cublaslt row-wise scales": [ratio(ours, s, rf.FP8_ROW_WISE, rf.BF16) for s in sizes],
        "fp8::cublaslt 1x128 x 128x128 blocks": [ratio(ours, s, rf.FP8_BLOCKS_2D, rf.BF16) for s in sizes],
        "torch._scaled_mm fast accumulation": [ratio(torch, s, rf.TORCH_FAST, rf.TORCH_BF16) for s in sizes],
        "torch._scaled_mm split accumulation": [ratio(torch, s, rf.TORCH_SPLIT, rf.TORCH_BF16) for s in sizes],
    }
    series = {name: values for name, values in series.items() if any(v is not None for v in values)}

    docs.mkdir(parents=True, exist_ok=True)
    table_path = docs / "fp8_gemm_speedup.csv"
    with table_path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["size"] + list(series))
        for i, size in enumerate(sizes):
            writer.writerow([size] + ["" if v[i] is None else f"{v[i]:.3f}" for v in series.values()])
    print(f"wrote {table_path}")

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_speedup.py: matplotlib is missing (python3-matplotlib): wrote the table only", file=sys.stderr)
        return 1

    figure, axes = plt.subplots(figsize=(9, 5.4))
    for name, values in series.items():
        points = [(s, v) for s, v in zip(sizes, values) if v is not None]
        axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
    axes.set_xscale("log", base=2)
    axes.set_xticks(sizes)
    axes.set_xticklabels([str(s) for s in sizes])
    axes.axhline(1.0, color="gray", linewidth=0.8)
    axes.set_xlabel("M = N = K")
    axes.set_ylabel("speedup over BF16 (same library, same run)")
    axes.set_title("FP8 (E4M3, BF16 output) vs BF16 GEMM, random normal data")
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.tight_layout()
    image = docs / "fp8_gemm_speedup.png"
    figure.savefig(image, dpi=120)
    print(f"wrote {image}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
