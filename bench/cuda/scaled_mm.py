#!/usr/bin/env python3
"""torch._scaled_mm (FP8, cuBLASLt underneath) and torch.matmul (BF16) against fp8::cublaslt on the
same machine, interleaved: for each shape, rounds alternate between PyTorch in this process and
bench_gemm --only (a fresh process, the same GPU) so that clock and thermal drift hit both alike.

    python3 bench/cuda/scaled_mm.py <output-folder> --bench-gemm <path> [--quick] [--rounds N]

Shapes: 8192^3, the DeepSeek-V3 shape 4096 x 7168 x 16384 and, without --quick, 4096^3 and 16384^3.
Inputs are random normal (torch.randn) cast to E4M3 with unit scales, as bench_gemm's (whose products
then take an inverse scale of 2 for X, to check that scales are applied: the same work); several
copies are rotated so that more than twice the L2 size is touched between reuses; about a second of
warm-up precedes the first shape; each figure is the median over rounds of per-round medians.

Writes <output-folder>/torch_gemm.csv (kind,label,m,n,k,variant,ms,tflops) with the PyTorch variants
and the fp8::cublaslt variants of the same rounds (variant names prefixed "interleaved ").
Exits with status 3 (and a message) when PyTorch or a CUDA device is missing.
"""
import csv
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import result_files as rf


def time_ms(torch, calls, iterations, repetitions):
    """Median over repetitions of the mean time of `iterations` calls, rotating through `calls`."""
    samples = []
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    index = 0
    for _ in range(repetitions):
        start.record()
        for _ in range(iterations):
            calls[index % len(calls)]()
            index += 1
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) / iterations)
    return statistics.median(samples)


def warm_up(torch, calls, seconds):
    begin = time.monotonic()
    while time.monotonic() - begin < seconds:
        for call in calls:
            call()
        torch.cuda.synchronize()


def rotation_sets(fp8_bytes_per_set, l2_bytes):
    """Copies of a product's inputs to rotate: bench_gemm's rule (bench/cuda/bench_rules.hpp,
    rotation_sets), so that both sides of the comparison meet the L2 alike: between two uses of a
    copy the others span twice the L2 in FP8 bytes; one copy when it alone does; at most 64."""
    if fp8_bytes_per_set == 0 or fp8_bytes_per_set >= 2 * l2_bytes:
        return 1
    return min(64, -(-2 * l2_bytes // fp8_bytes_per_set) + 1)


def ours(bench_gemm, m, n, k):
    """fp8::cublaslt's figures for one shape: ({variant: ms}, whether every product passed) from
    bench_gemm --only. A product that failed there (an error, or a result outside its bound) is
    missing from its CSV or flagged in its output; the others still count. Raises when bench_gemm
    wrote no figures at all."""
    with tempfile.TemporaryDirectory() as folder:
        result = subprocess.run([bench_gemm, folder, "--quick", "--only", f"{m},{n},{k}"], capture_output=True,
                                text=True, check=False)
        table = Path(folder) / rf.GEMM_ONLY
        figures = {}
        if table.exists():
            with table.open() as f:
                figures = {row["variant"]: float(row["ms"]) for row in csv.DictReader(f)}
        if result.returncode != 0:
            print(f"scaled_mm.py: bench_gemm --only {m},{n},{k} exited with {result.returncode}:\n"
                  f"{result.stdout}\n{result.stderr}", file=sys.stderr, flush=True)
            if not figures:
                raise RuntimeError(f"bench_gemm --only {m},{n},{k} failed and wrote no figures")
        return figures, result.returncode == 0


def main() -> int:
    args = sys.argv[1:]
    if not args or "--bench-gemm" not in args:
        print(__doc__, file=sys.stderr)
        return 2
    folder = Path(args[0])
    bench_gemm = args[args.index("--bench-gemm") + 1]
    quick = "--quick" in args
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 3
    try:
        import torch
    except ImportError:
        print("scaled_mm.py: PyTorch is not installed here: no torch._scaled_mm comparison", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("scaled_mm.py: PyTorch sees no CUDA device", file=sys.stderr)
        return 3
    properties = torch.cuda.get_device_properties(0)
    l2_bytes = getattr(properties, "L2_cache_size", 50 << 20)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}", flush=True)

    # bench_gemm's kinds and labels for the same shapes (the summary finds rows by m, n, k).
    shapes = [(rf.SQUARE, "8192", *rf.HEADLINE), ("deepseek", "x".join(map(str, rf.DEEPSEEK)), *rf.DEEPSEEK)]
    if not quick:
        shapes = [(rf.SQUARE, "4096", 4096, 4096, 4096)] + shapes + [(rf.SQUARE, "16384", 16384, 16384, 16384)]

    # Rows are written as each shape ends, so a run cut short by its time limit keeps what it measured.
    table = (folder / rf.TORCH_GEMM).open("w", newline="")
    writer = csv.writer(table)
    writer.writerow(rf.TORCH_GEMM_COLUMNS)
    table.flush()
    first = True
    failures = 0
    for kind, label, m, n, k in shapes:
        flop = 2.0 * m * n * k
        copies = rotation_sets(m * k + n * k, l2_bytes)
        xs16 = [torch.randn(m, k, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
        ws16 = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
        xs8 = [x.to(torch.float8_e4m3fn) for x in xs16]
        ws8 = [w.to(torch.float8_e4m3fn) for w in ws16]
        one = torch.ones((), device="cuda", dtype=torch.float32)
        # Y[m, n] = X[m, k] @ W[n, k]^T: _scaled_mm wants the second operand column-major, i.e. W^T.
        variants = {
            rf.TORCH_BF16: [lambda i=i: torch.matmul(xs16[i], ws16[i].t()) for i in range(copies)],
            rf.TORCH_FAST: [
                lambda i=i: torch._scaled_mm(xs8[i], ws8[i].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                             use_fast_accum=True) for i in range(copies)],
            rf.TORCH_SPLIT: [
                lambda i=i: torch._scaled_mm(xs8[i], ws8[i].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                             use_fast_accum=False) for i in range(copies)],
        }
        iterations = max(2, int(2e12 / flop))
        torch_ms = {name: [] for name in variants}
        our_ms = {}
        for _ in range(rounds):
            for name, calls in variants.items():
                warm_up(torch, calls, 1.0 if first else 0.05)
                first = False
                torch_ms[name].append(time_ms(torch, calls, iterations, 5))
            figures, passed = ours(bench_gemm, m, n, k)
            failures += 0 if passed else 1
            for name, ms in figures.items():
                our_ms.setdefault(name, []).append(ms)
        for name, samples in list(torch_ms.items()) + [(rf.interleaved(v), s) for v, s in our_ms.items()]:
            ms = statistics.median(samples)
            tflops = flop / (ms * 1e-3) / 1e12
            writer.writerow([kind, label, m, n, k, name, f"{ms:.6f}", f"{tflops:.3f}"])
            print(f"{kind:8s} {label:16s} {m:6d} {n:6d} {k:6d} {name:34s} {ms:9.4f} ms {tflops:9.1f} TFLOP/s", flush=True)
        table.flush()
        del xs16, ws16, xs8, ws8
        torch.cuda.empty_cache()

    table.close()
    if failures:
        print(f"scaled_mm.py: {failures} bench_gemm --only runs reported failures (see above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
