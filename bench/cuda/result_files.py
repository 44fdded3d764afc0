"""The result files of the GPU check and of the trainer's GPU tables: their names, the columns and row
keys the summary scripts look up, and a reader that survives a run cut short.

One copy of every name the readers (summarize.py, plot_speedup.py, trainer_results.py) depend on. The
Python writers (scaled_mm.py, torch_peer.py) write with these names; the C++ writers (bench_gemm,
bench_quantize, bench_layer, bench_trainer, the trainer's log.csv) and bench/gpu_check.sh are held to
them by bench/cuda/tests, which reads the names out of their sources: renaming a column or a variant
on one side only fails that test instead of leaving a hole in the one table a GPU run brings back.
"""
import csv
from pathlib import Path

# --- bench/gpu_check.sh -------------------------------------------------------------------------------
STEPS = "steps.csv"  # step,result,seconds; a step name may hold a comma (summarize.py splits from the right)
STEP_COLUMNS = ("step", "result", "seconds")
DEVICE = "device.txt"  # nvidia-smi --query-gpu=name,compute_cap,driver_version, one line per GPU

# --- bench_gemm (and scaled_mm.py, which writes the same columns less max_error and timing) -----------
GEMM = "gemm.csv"
# timing: "graph" (the calls replayed from a CUDA graph) or "enqueued" (where capture failed).
GEMM_COLUMNS = ("kind", "label", "m", "n", "k", "variant", "ms", "tflops", "max_error", "timing")
GEMM_NEEDED = GEMM_COLUMNS[:-1]  # what a row must have: the first H100 run's files have no timing
GEMM_ONLY = "gemm_only.csv"  # bench_gemm --only M,N,K: one shape, for scaled_mm.py's interleaved rounds
TORCH_GEMM = "torch_gemm.csv"
TORCH_GEMM_COLUMNS = GEMM_COLUMNS[:-2]
SQUARE = "square"  # the kind of the M = N = K sizes (the speedup curve)
HEADLINE = (8192, 8192, 8192)  # m, n, k of the FP8 / BF16 and the _scaled_mm targets
DEEPSEEK = (4096, 7168, 16384)  # m, n, k of the DeepSeek-V3 shape (row-wise and block scales)
BF16 = "bf16"
FP8_FAST = "fp8 fast_accum"
FP8_SPLIT = "fp8 split_accum"
FP8_ROW_WISE = "fp8 row_wise"
FP8_BLOCKS_2D = "fp8 1x128x128x128"  # X in 1x128 tiles, W in 128x128 blocks
FP8_BLOCKS_1D = "fp8 1x128x1x128"  # both in 1x128 tiles
TORCH_BF16 = "torch bf16"
TORCH_FAST = "torch _scaled_mm fast_accum"
TORCH_SPLIT = "torch _scaled_mm split_accum"
INTERLEAVED = "interleaved "  # scaled_mm.py's prefix for bench_gemm's figures taken between its own
TUNED = " tuned"  # bench_gemm's suffix for a variant measured through a tuned plan (fastest candidate)
TUNING = "tuning.csv"  # bench_gemm: what each tuning measured
TUNING_COLUMNS = ("kind", "label", "m", "n", "k", "variant", "candidates", "ran", "heuristic_ms", "fastest_ms")


def interleaved(variant):
    """The name scaled_mm.py gives a bench_gemm variant measured in its interleaved rounds."""
    return INTERLEAVED + variant


def tuned(variant):
    """The name bench_gemm gives a variant measured through its tuned plan."""
    return variant + TUNED


CEILINGS = "ceilings.csv"
CEILING_COLUMNS = ("name", "value")
COPY_BANDWIDTH = "device-to-device copy"  # GB/s, read + write
CEILING_VERSIONS = ("device", "driver CUDA version", "runtime CUDA version", "cuBLASLt version")
OVERHEAD = "overhead.csv"
OVERHEAD_COLUMNS = ("variant", "us_per_call")
WITH_CACHE, WITHOUT_CACHE, BARE_MATMUL = "with_cache", "without_cache", "bare_cublasLtMatmul"

# --- bench_quantize ------------------------------------------------------------------------------------
QUANTIZE = "quantize.csv"
QUANTIZE_COLUMNS = ("kernel", "gbps", "copy_gbps", "ratio")
# Kernels whose ratio is reported, not held to the 0.85 aim: two passes over the input by design
# ("2 reads"), or a per-row reduction the aim was not set for.
QUANTIZE_REPORTED = ("2 reads", "per_row")

# --- bench_layer ---------------------------------------------------------------------------------------
LAYER = "layer.csv"
LAYER_COLUMNS = ("linear", "variant", "ms")
LAYER_SUM = "layer"  # the line that sums the four linears
LAYER_BF16, LAYER_GEMMS, LAYER_CASTS, LAYER_TOTAL = "bf16", "fp8 gemms", "fp8 casts", "fp8 total"
LAYER_DELAYED_TOTAL = "fp8 delayed total"  # the GEMMs with delayed-scaling casts (one read each)
# Current per-tensor casts from the amaxes their producers recorded (one read each), the recording's
# cost included; and the stand-in producers' time without and with recording.
LAYER_PRODUCER_TOTAL = "fp8 producer amax total"
LAYER_PRODUCER, LAYER_PRODUCER_TRACKED = "producer", "producer with amax"

# What gpu_check.sh's log folder should hold after a full run, and which program writes each file.
GPU_CHECK_FILES = {
    STEPS: "bench/gpu_check.sh",
    DEVICE: "bench/gpu_check.sh (nvidia-smi)",
    GEMM: "bench_gemm",
    TUNING: "bench_gemm",
    CEILINGS: "bench_gemm",
    OVERHEAD: "bench_gemm",
    QUANTIZE: "bench_quantize",
    LAYER: "bench_layer",
    TORCH_GEMM: "scaled_mm.py (needs PyTorch with CUDA)",
}

# --- bench_trainer and torch_peer.py (bench/cuda/trainer_tables.sh) ------------------------------------
# The speed configurations: forward/backward passes of bench_trainer's batch (2 x 2048 tokens) per
# optimizer step. 1: the optimizer's cost in every step; 8: the accumulation a real run uses, which
# spreads it over 32768 tokens. Each has its own folder of the files below.
SPEED_PASSES = (1, 8)
SPEED_PASS_TOKENS = 2 * 2048  # bench_trainer's and torch_peer.py's default --batch x --context


def speed_folder(passes):
    """The folder (in trainer_tables.sh's output) of the speed runs with `passes` per optimizer step."""
    return f"speed_passes{passes}"


# The last configuration again with every GEMM tuned on its first call (trainer_tables.sh --tuned).
SPEED_TUNED_FOLDER = speed_folder(SPEED_PASSES[-1]) + "_tuned"


SPEED = "speed.csv"  # bench_trainer: one line per precision
SPEED_COLUMNS = ("precision", "tokens_per_s", "model_tflops", "ms_per_step", "loss")  # what the table needs
SPEED_HEADER = SPEED_COLUMNS + ("passes", "tokens_per_step")  # what the writers write (per optimizer step)
PROFILE = "profile.csv"  # bench_trainer: phase,<precision>_ms for each precision
PROFILE_PHASE = "phase"
PROFILE_SUFFIX = "_ms"
KERNELS = "kernels.csv"  # bench_trainer's kernel trace: one line per precision and kernel, the longest first
KERNEL_COLUMNS = ("precision", "kernel", "calls_per_step", "ms_per_step")
KERNEL_TRACE_NOTE = "kernel trace:"  # after "bench_trainer: <precision>: " in its log, what the trace found
TORCH_PEER = "torch_peer.csv"  # torch_peer.py: the columns of speed.csv
TORCH_PEER_PREFIX = "torch_bf16_"  # + "compile" or "eager"
BENCH_TRAINER_LOG = "bench_trainer.log"
TORCH_PEER_LOG = "torch_peer.log"

# --- the loss-parity runs of fp8_trainer --device cuda (trainer_tables.sh) -------------------------
# (name, label, trainer switches): each trained with every seed of PARITY_SEEDS, the first is the
# reference the others are measured against.
PARITY_CONFIGS = (
    ("bf16", "BF16", "--precision bf16"),
    ("fp8-delayed", "FP8 delayed (the default recipe)", "--precision fp8"),
    ("fp8-current", "FP8 current", "--precision fp8 --scaling current"),
    ("fp8-blocks", "FP8 blocks (1x128 tiles, 128x128 weight blocks)",
     "--precision fp8 --scaling current --granularity block"),
    # The default keeps the largest amax of the last 1024 steps, so for a short run the scales stay
    # set by the first steps' large amaxes; a 16-step history says whether that costs loss.
    ("fp8-delayed-h16", "FP8 delayed, amax history 16", "--precision fp8 --amax-history 16"),
    # Hopper's fast accumulation (the default for fprop, as Transformer Engine's) keeps the tensor
    # cores' partial sums in their own reduced precision: a run with every product promoting them to
    # FP32 says whether that costs loss.
    ("fp8-delayed-split", "FP8 delayed, no fast accumulation", "--precision fp8 --fast-accumulation none"),
    # Megatron-Core's recipe keeps the first and last blocks in BF16 (the head is BF16 in every row).
    ("fp8-delayed-first-last", "FP8 delayed, first and last blocks BF16", "--precision fp8 --first-last-bf16"),
)
PARITY_SEEDS = (1, 2, 3)
PARITY_TOLERANCE = 0.005  # the aim: each FP8 mean within 0.5% of the BF16 mean


def parity_run(name, seed):
    """The name of one loss-parity run: its folder under runs/ and its log's stem."""
    return f"{name}-s{seed}"


def parity_log(name, seed):
    """The stdout + stderr of one loss-parity run of fp8_trainer."""
    return f"parity_{parity_run(name, seed)}.log"


PARITY_RUNS = "runs"  # the runs' --out folders: runs/<name>-s<seed>
FINAL_PREFIX = "final:"  # fp8_trainer's last line after a finished run
LOSS_PLOT = "loss_parity.png"
TRAINER_LOG = "log.csv"  # fp8_trainer --out DIR: one line per step
TRAINER_LOG_COLUMNS = ("step", "train_loss", "val_loss")


def read_table(path: Path, columns):
    """The rows of a CSV file that have every one of `columns` filled in, and how many did not.

    A benchmark killed by its step's time limit leaves its file with the last line cut anywhere (a
    number may lose digits and still parse), so a last line without its newline is dropped, and a
    line missing a column is counted, not trusted. A missing or empty file gives no rows. A header
    that lacks one of `columns` raises ValueError naming the file and the column (a writer renamed
    it): a clear stop, not a table silently missing its rows.
    """
    if not path.is_file():
        return [], 0
    lines = path.read_text(errors="replace").splitlines(keepends=True)
    incomplete = 0
    if lines and not lines[-1].endswith("\n"):
        lines.pop()
        incomplete += 1
    reader = csv.DictReader(lines)
    header = reader.fieldnames or []
    if not header:
        return [], incomplete
    absent = [c for c in columns if c not in header]
    if absent:
        raise ValueError(f"{path.name}: no column {', '.join(absent)} in its header '{','.join(header)}'")
    rows = []
    for row in reader:
        if None not in row and all(row.get(c) not in (None, "") for c in columns):
            rows.append(row)
        else:
            incomplete += 1
    return rows, incomplete


def number(text):
    """A float from a CSV cell, or None where it is not a number (a line cut in the middle of one)."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def markdown_cell(text):
    """Text safe inside a Markdown table cell: a bare | (trainer progress lines have them) splits it."""
    return text.replace("|", "\\|")
