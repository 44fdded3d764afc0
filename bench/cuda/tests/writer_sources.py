"""What the GPU-side writers put into their files and logs, read out of their sources: CSV header
lines, variant and kernel names, printf formats, gpu_check.sh's step names.

The tests of the summary scripts plant logs built from these, so that the planted files are the
files the programs write: a column or a variant renamed in a writer, or a printf changed, fails
the test on the CPU instead of leaving a hole in the tables of the next (rare) GPU run. Each
extraction fails with a message naming the file and what it looked for, so that a rewrite of a
writer points here.
"""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


class source_changed(AssertionError):
    """A writer's source no longer has the line a test reads its format from."""


def text(relative):
    return (ROOT / relative).read_text()


def require(found, relative, what):
    if not found:
        raise source_changed(f"{relative}: cannot find {what}; update bench/cuda/tests/writer_sources.py "
                             f"and the readers together with the writer")
    return found


def string_literals(code):
    """The C/C++ string literals at the start of `code`, adjacent ones joined, escapes \\n and \\" undone."""
    parts = []
    for m in re.finditer(r'\s*"((?:[^"\\]|\\.)*)"', code):
        if m.start() != (parts[-1][0] if parts else 0):
            break
        parts.append((m.end(), m.group(1)))
    return "".join(p for _, p in parts).replace("\\n", "\n").replace('\\"', '"')


def csv_header(relative, stream, file_literal):
    """The header line a C++ writer streams first (`stream << "a,b,c\\n"`, adjacent literals joined)
    into the file it opens with `file_literal` in its path."""
    code = text(relative)
    require(f'"/{file_literal}' in code, relative, f'the file name "/{file_literal}..."')
    m = require(re.search(rf'\b{stream} << (?=")', code), relative, f'the header line `{stream} << "...\\n"`')
    header = string_literals(code[m.end():])
    require(re.fullmatch(r"[A-Za-z_,]+\n", header), relative, f'a header line of column names after `{stream} << `')
    return header[:-1].split(",")


def printf_format(relative, prefix):
    """The printf format (adjacent literals joined) that starts with `prefix`, in Python % syntax."""
    code = text(relative)
    for m in re.finditer(r"printf\((?:stderr,\s*)?", code):
        fmt = string_literals(code[m.end():])
        if fmt.startswith(prefix):
            return re.sub(r"%(l|ll|z)([du])", r"%d", fmt)
    raise source_changed(f"{relative}: no printf format starting with {prefix!r}")


# --- bench_gemm -------------------------------------------------------------------------------------
GEMM_SOURCE = "bench/cuda/bench_gemm.cpp"


def gemm_variants():
    """{kind: [variant names]} as bench_gemm's variants_for gives them ("square" for the default)."""
    code = text(GEMM_SOURCE)
    names = dict(re.findall(r'const variant (\w+)\{"([^"]+)"', code))
    body = require(re.search(r"variants_for\(const std::string& kind\) \{(.*?)\n\}", code, re.S), GEMM_SOURCE,
                   "variants_for")
    kinds = {}
    for kind, identifiers in re.findall(r'(?:if \(kind == "(\w+)"\) )?return \{([^}]*)\};', body.group(1)):
        kinds[kind or "square"] = [names[i.strip()] for i in identifiers.split(",")]
    require("deepseek" in kinds and "square" in kinds, GEMM_SOURCE, "the deepseek and default variant lists")
    return kinds


def square_sizes(quick):
    """The M = N = K sizes bench_gemm measures (with --quick or without)."""
    code = text(GEMM_SOURCE)
    m = require(re.search(r"for \(std::int64_t size = (\d+); size <= \(quick \? (\d+) : (\d+)\); size \*= 2\)\s*"
                          r'\{\s*shapes\.push_back\(\{"square", std::to_string\(size\), size, size, size', code),
                GEMM_SOURCE, "the loop over square sizes")
    first, last = int(m.group(1)), int(m.group(2) if quick else m.group(3))
    sizes = []
    while first <= last:
        sizes.append(first)
        first *= 2
    return sizes


def deepseek_shape():
    """(label, m, n, k) of bench_gemm's DeepSeek-V3 shape."""
    m = require(re.search(r'\{"deepseek", "([^"]+)", (\d+), (\d+), (\d+)', text(GEMM_SOURCE)), GEMM_SOURCE,
                "the deepseek shape")
    return m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))


def quoted_names_present(relative, names, after='"', before=""):
    """The names that do not appear in a source as `after + name + before` (a literal's start)."""
    code = text(relative)
    return [n for n in names if f"{after}{n}{before}" not in code]


# --- bench_quantize, bench_trainer, the trainer -------------------------------------------------------
def quantize_kernels():
    """bench_quantize's kernel names, in the order it writes them."""
    names = re.findall(r'\{"([^"]+)", n, n \* \d+', text("bench/cuda/bench_quantize.cu"))
    return require(names, "bench/cuda/bench_quantize.cu", "the kernel list {\"name\", n, n * bytes, ...}")


def phase_names():
    """The phases of bench_trainer's profile (trainer::cuda::phase_name), in order."""
    relative = "examples/trainer/cuda/phase_profile.hpp"
    m = require(re.search(r"names\{(.*?)\};", text(relative), re.S), relative, "phase_name's names{...}")
    return re.findall(r'"([^"]+)"', m.group(1))


def trainer_log_header():
    relative = "examples/trainer/logging.hpp"
    m = require(re.search(r'header =\s*"([^"]+)"', text(relative)), relative, "csv_log::header")
    return m.group(1).split(",")


# --- bench/gpu_check.sh --------------------------------------------------------------------------------
GPU_CHECK = "bench/gpu_check.sh"


def gpu_check_steps():
    """The step names gpu_check.sh records through step() and sanitize(), and the other lines it
    writes into steps.csv itself (shell variables shown as {name})."""
    code = text(GPU_CHECK)
    require('echo "step,result,seconds" >"$steps"' in code, GPU_CHECK, "the header of steps.csv")
    require('echo "$1,$result,$4" >>"$steps"' in code, GPU_CHECK, "record()'s line format")
    names = [n for n in re.findall(r'^\s*step "([^"]+)"', code, re.M) if "$" not in n]
    for tool, program in re.findall(r"^\s*sanitize (\w+) (\S+)", code, re.M):
        names.append(f"compute-sanitizer {tool} {program.rsplit('/', 1)[-1]}")
    lines = [re.sub(r"\$\{?(\w+)\}?", r"{\1}", line)
             for line in re.findall(r'^\s*echo "([^"]*)" >>"\$steps"', code, re.M) if line != "$1,$result,$4"]
    return require(names, GPU_CHECK, 'step "name" lines'), require(lines, GPU_CHECK, 'echo "..." >>"$steps"')
