"""scaled_mm.py's host logic on the CPU (no PyTorch, no GPU needed): the rotation count it shares
with bench_gemm (bench_rules.hpp's rotation_sets, same cases as test_bench_rules), and how it reads
bench_gemm --only: the figures of a run that reported a failure are kept, a run that wrote none is
an error. bench_gemm is stood in for by a small shell script.

Usage: test_scaled_mm_python.py
"""
import os
import stat
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/cuda
import scaled_mm  # noqa: E402  (after the path above)

L2 = 50 << 20  # cudaDevAttrL2CacheSize of an H100 and of an H200

FAKE_BENCH_GEMM = """#!/bin/sh
# bench_gemm <folder> --quick --only M,N,K: two figures, then the exit status it is told to give.
if [ "${FAKE_WRITES:-1}" = 1 ]; then
  printf 'kind,label,m,n,k,variant,ms,tflops,max_error\\n' > "$1/gemm_only.csv"
  printf 'only,x,8,8,16,bf16,1.5,1,0\\nonly,x,8,8,16,fp8 fast_accum,0.75,2,0\\n' >> "$1/gemm_only.csv"
fi
echo "fp8 row_wise FAILED: a refusal"
exit "${FAKE_STATUS:-0}"
"""

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print(f"FAILED: {what}")


def main() -> int:
    # The rotation count, as bench_gemm's (test_bench_rules checks the same cases in C++).
    check(scaled_mm.rotation_sets(2 * 1024 * 1024, L2) == 51, "1024^3 rotates 51 copies")
    check(scaled_mm.rotation_sets(2 * 8192 * 8192, L2) == 1, "8192^3 needs one copy")
    check(scaled_mm.rotation_sets(2 * L2, L2) == 1, "a copy of twice the L2 needs no other")
    check(scaled_mm.rotation_sets(2 * L2 - 1, L2) == 3, "just under twice the L2: two others")
    check(scaled_mm.rotation_sets(2 * 64 * 64, L2) == 64, "tiny products are capped at 64 copies")
    for side in (1024, 2048, 4096, 5120):
        fp8_bytes = 2 * side * side
        sets = scaled_mm.rotation_sets(fp8_bytes, L2)
        check((sets - 1) * fp8_bytes >= 2 * L2, f"{side}^3: the other copies span twice the L2")

    with tempfile.TemporaryDirectory() as folder:
        fake = Path(folder) / "bench_gemm"
        fake.write_text(FAKE_BENCH_GEMM)
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
        figures = {"bf16": 1.5, "fp8 fast_accum": 0.75}

        os.environ["FAKE_STATUS"] = "0"
        check(scaled_mm.ours(str(fake), 8, 8, 16) == (figures, True), "a clean run: its figures, passed")
        os.environ["FAKE_STATUS"] = "1"
        check(scaled_mm.ours(str(fake), 8, 8, 16) == (figures, False),
              "a run that reported a failure: its figures kept, not passed")
        os.environ["FAKE_WRITES"] = "0"
        try:
            scaled_mm.ours(str(fake), 8, 8, 16)
            check(False, "a failed run without figures raises")
        except RuntimeError as error:
            check("wrote no figures" in str(error), "the error says no figures were written")

    print("test_scaled_mm_python: " + ("all checks passed" if not failures else f"{len(failures)} failed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
