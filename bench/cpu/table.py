#!/usr/bin/env python3
"""The markdown table of docs/cpu_quantize_benchmark.md from bench_cpu_quantize's JSON output.

    bench_cpu_quantize --benchmark_repetitions=7 --benchmark_out=cpu.json --benchmark_out_format=json
    python3 bench/cpu/table.py cpu.json

Each figure is the median over the repetitions (the single run without repetitions); "cv %" is the
coefficient of variation of the fast kernels' GB/s, to show the spread. "x scalar" divides the fast
kernels' GB/s by the scalar path's, measured in the same run.
"""
import json
import sys


def figures(benchmarks):
    """{run_name: row} using the median aggregate where there is one, and the cv aggregates apart."""
    plain, median, cv = {}, {}, {}
    for b in benchmarks:
        name = b["run_name"]
        kind = b.get("aggregate_name")
        if kind == "median":
            median[name] = b
        elif kind == "cv":
            cv[name] = b
        elif kind is None:
            plain.setdefault(name, b)
    return {**plain, **median}, cv


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        report = json.load(f)
    rows, cv = figures(report["benchmarks"])
    context = report["context"]
    print(f"{context.get('kernels', '?')} kernels, {context.get('elements', '?')} elements, "
          f"{context.get('num_cpus', '?')} CPUs at {context.get('mhz_per_cpu', '?')} MHz\n")
    print("| conversion | GB/s | Gelem/s | memcpy GB/s | x memcpy | scalar GB/s | x scalar | cv % |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, fast in rows.items():
        conversion, kernels, *_ = name.split("/")
        if kernels == "kernels:scalar":
            continue
        scalar = rows.get(f"{conversion}/kernels:scalar/real_time")
        gbps = fast["bytes_per_second"] / 1e9
        scalar_gbps = scalar["bytes_per_second"] / 1e9 if scalar else float("nan")
        spread = cv.get(name, {}).get("bytes_per_second", float("nan")) * 100
        print(f"| {conversion} | {gbps:.1f} | {fast['items_per_second'] / 1e9:.2f} | "
              f"{fast['memcpy_bytes_per_second'] / 1e9:.1f} | {fast['x_memcpy']:.2f} | {scalar_gbps:.2f} | "
              f"{gbps / scalar_gbps:.1f} | {spread:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
