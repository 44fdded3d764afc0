#!/usr/bin/env python3
"""torch._scaled_mm (FP8, cuBLASLt underneath) and torch.matmul (BF16) at the shapes bench_gemm
measures, in the same run of the same machine, so the wrapper can be compared with PyTorch.

    python3 bench/cuda/scaled_mm.py <output-folder> [--quick]

Reads <output-folder>/gemm.csv (written by bench_gemm) for the shapes and writes
<output-folder>/torch_gemm.csv with the same columns: kind,label,m,n,k,variant,ms,tflops.
Exits with status 3 (and a message) when PyTorch or a CUDA device is missing.
"""
import csv
import statistics
import sys
from pathlib import Path


def shapes_from(gemm_csv: Path):
    seen = []
    with gemm_csv.open() as f:
        for row in csv.DictReader(f):
            key = (row["kind"], row["label"], int(row["m"]), int(row["n"]), int(row["k"]))
            if key not in seen:
                seen.append(key)
    return seen


def time_ms(torch, call, iterations, repetitions):
    for _ in range(3):
        call()
    samples = []
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    for _ in range(repetitions):
        start.record()
        for _ in range(iterations):
            call()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) / iterations)
    return statistics.median(samples)


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder = Path(sys.argv[1])
    quick = "--quick" in sys.argv[2:]
    try:
        import torch
    except ImportError:
        print("scaled_mm.py: PyTorch is not installed here: no torch._scaled_mm comparison", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("scaled_mm.py: PyTorch sees no CUDA device", file=sys.stderr)
        return 3
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}")

    rows = []
    for kind, label, m, n, k in shapes_from(folder / "gemm.csv"):
        # Y[m, n] = X[m, k] @ W[n, k]^T: _scaled_mm wants the second operand column-major, i.e. W^T.
        x16 = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w16 = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        x8 = x16.to(torch.float8_e4m3fn)
        w8 = w16.to(torch.float8_e4m3fn)
        one = torch.ones((), device="cuda", dtype=torch.float32)
        flop = 2.0 * m * n * k
        iterations = 5 if flop > 1e12 else (20 if flop > 1e11 else 100)
        repetitions = 3 if quick else 7
        variants = {
            "torch bf16": lambda: torch.matmul(x16, w16.t()),
            "torch _scaled_mm fast_accum": lambda: torch._scaled_mm(
                x8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True),
            "torch _scaled_mm split_accum": lambda: torch._scaled_mm(
                x8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=False),
        }
        for name, call in variants.items():
            ms = time_ms(torch, call, iterations, repetitions)
            tflops = flop / (ms * 1e-3) / 1e12
            rows.append([kind, label, m, n, k, name, f"{ms:.6f}", f"{tflops:.3f}"])
            print(f"{kind:8s} {label:16s} {m:6d} {n:6d} {k:6d} {name:30s} {ms:9.4f} ms {tflops:9.1f} TFLOP/s", flush=True)
        del x16, w16, x8, w8
        torch.cuda.empty_cache()

    with (folder / "torch_gemm.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["kind", "label", "m", "n", "k", "variant", "ms", "tflops"])
        writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
