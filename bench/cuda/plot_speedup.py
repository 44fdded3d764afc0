#!/usr/bin/env python3
"""The curve of FP8 speedup over BF16 against matrix size, from bench_gemm (and scaled_mm.py) CSVs.

    python3 bench/cuda/plot_speedup.py <log-folder> <docs-folder>

Writes <docs-folder>/fp8_gemm_speedup.csv (size, speedups of the wrapper's tensorwise, row-wise and
block-scaled products and of torch._scaled_mm) and <docs-folder>/fp8_gemm_speedup.png (matplotlib).
"""
import csv
import sys
from pathlib import Path


def read(path: Path):
    table = {}
    if not path.exists():
        return table
    with path.open() as f:
        for row in csv.DictReader(f):
            if row["kind"] == "square":
                table[(int(row["m"]), row["variant"])] = float(row["tflops"])
    return table


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    logs, docs = Path(sys.argv[1]), Path(sys.argv[2])
    ours = read(logs / "gemm.csv")
    torch = read(logs / "torch_gemm.csv")
    if not ours:
        print(f"plot_speedup.py: no square-size results in {logs / 'gemm.csv'}", file=sys.stderr)
        return 1
    sizes = sorted({size for size, _ in ours})

    def ratio(table, size, fp8, base):
        if (size, fp8) in table and (size, base) in table:
            return table[(size, fp8)] / table[(size, base)]
        return None

    series = {
        "fp8::cublaslt fast accumulation": [ratio(ours, s, "fp8 fast_accum", "bf16") for s in sizes],
        "fp8::cublaslt split accumulation": [ratio(ours, s, "fp8 split_accum", "bf16") for s in sizes],
        "fp8::cublaslt row-wise scales": [ratio(ours, s, "fp8 row_wise", "bf16") for s in sizes],
        "fp8::cublaslt 1x128 x 128x128 blocks": [ratio(ours, s, "fp8 1x128x128x128", "bf16") for s in sizes],
        "torch._scaled_mm fast accumulation": [ratio(torch, s, "torch _scaled_mm fast_accum", "torch bf16") for s in sizes],
        "torch._scaled_mm split accumulation": [ratio(torch, s, "torch _scaled_mm split_accum", "torch bf16") for s in sizes],
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
