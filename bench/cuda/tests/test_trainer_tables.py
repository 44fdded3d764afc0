#!/usr/bin/env python3
"""trainer_results.py (with the seed table and plot it shares with the CPU trainer's results_table.py)
on planted output folders of trainer_tables.sh.

The trainer's GPU tables are made once, on a rarely lent GPU machine, from what bench_trainer,
torch_peer.py and fp8_trainer leave in one folder. This test plants that folder the way those
programs write it (CSV headers, phase names and printf formats read from their sources by
writer_sources.py; the trainer's log.csv in its own header and number format) and checks the page:
a speed table per configuration (1 and 8 passes per optimizer step) with the peer as one more row,
speedups and tokens per optimizer step from the planted numbers, the phase tables; the loss-parity
table over seeds (mean ± std, min – max, the difference from the BF16 mean against the 0.5% aim,
worked out here independently), the per-seed losses, and the plot of the mean curves. A folder cut
short (bench_trainer never ran or stopped with an error, parity runs killed mid-way or never
started) must give lines that say so, not empty tables or a traceback. trainer_tables.sh itself runs
against stand-ins for the GPU programs that record their arguments.
"""
import math
import re
import statistics
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import result_files as rf  # noqa: E402
import writer_sources as ws  # noqa: E402
from markdown_tables import ragged_rows  # noqa: E402

RESULTS = HERE.parent / "trainer_results.py"
TABLES = HERE.parent / "trainer_tables.sh"
PEER = HERE.parent / "torch_peer.py"
BENCH = "bench/cuda/bench_trainer.cu"

try:  # plot_loss.py draws with it; without it the plot half of this test cannot pass
    import matplotlib  # noqa: F401
except ImportError:
    sys.exit("test_trainer_tables: matplotlib is missing (python3-matplotlib, scripts/setup.sh): "
             "plot_loss.py cannot be checked")

DEVICE = "NVIDIA H100 80GB HBM3"
STEPS = 600  # of each parity run
# Planted speed per configuration (passes per optimizer step): precision -> (tokens/s, model TFLOP/s,
# ms/step, loss), and the peer's row.
SPEED = {1: {"bf16": (67469.3, 421.5, 60.7, 5.61), "fp8": (81486.1, 509.1, 50.3, 5.62)},
         8: {"bf16": (80123.4, 500.6, 409.0, 5.58), "fp8": (106432.0, 665.0, 307.9, 5.59)}}
PEER_ROW = {1: ("torch_bf16_compile", 71229.3, 445.0, 57.5, 5.60), 8: ("torch_bf16_compile", 78000.0, 487.3, 420.1, 5.57)}
# Per phase, in trainer::cuda::phase_name's order (linear casts, linear GEMMs, staging, attention,
# RMSNorm, SwiGLU, residual, embedding, loss, other, optimizer).
PROFILE_MS = {1: {"bf16": (0.0, 32.6, 1.2, 4.1, 2.3, 1.9, 1.1, 0.2, 0.3, 0.1, 14.4),
                  "fp8": (3.1, 18.8, 1.2, 3.9, 2.2, 1.8, 1.0, 0.2, 0.3, 0.1, 14.4)},
              8: {"bf16": (0.0, 260.8, 9.6, 32.8, 18.4, 15.2, 8.8, 1.6, 2.4, 0.8, 17.1),
                  "fp8": (24.8, 150.4, 9.6, 31.2, 17.6, 14.4, 8.0, 1.6, 2.4, 0.8, 17.2)}}
# Final validation loss of each parity run: configuration -> (seed 1, seed 2, seed 3).
LOSSES = {"bf16": (1.4850, 1.4870, 1.4830), "fp8-delayed": (1.4900, 1.4920, 1.4910),
          "fp8-current": (1.4860, 1.4880, 1.4850), "fp8-blocks": (1.5000, 1.5050, 1.4990),
          "fp8-delayed-h16": (1.4870, 1.4890, 1.4860), "fp8-delayed-split": (1.4880, 1.4860, 1.4870),
          "fp8-delayed-first-last": (1.4860, 1.4865, 1.4855)}
BASELINE = 3.4756
# The traced kernels of each precision (bench_trainer --trace-steps): (name, calls, ms) per optimizer
# step, in no particular order. More than the page shows (12), one name with commas in its template
# arguments and one longer than the page's width; the same for both configurations, times the passes.
KERNELS = {"bf16": [("nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NTT", 24, 30.1),
                    ("trainer::cuda::adamw_kernel", 40, 14.2),
                    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128_4x1x1_kernel0_0", 4, 1.3),
                    ("fp8::cuda::detail::amax_kernel<__nv_bfloat16, 256>", 16, 0.9)]
                   + [(f"trainer::cuda::elementwise_{i}", 8, 0.1 * i) for i in range(1, 11)],
           "fp8": [("nvjet_qqtst_256x128_128x6_1x2_h_bz_coopA_TNT", 24, 18.3),
                   ("trainer::cuda::adamw_kernel", 40, 14.2),
                   ("fp8::cuda::detail::quantize_transpose_kernel<__nv_bfloat16, fp8::float8_e4m3, (fp8::rounding)0>", 16, 2.4),
                   ("[memset]", 3, 0.01)]
                  + [(f"trainer::cuda::elementwise_{i}", 8, 0.1 * i) for i in range(1, 11)]}
TRACE_NOTE = ("fp8: kernel trace: not run: CUPTI: cuptiActivityEnable failed: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES")
LABELS = {name: label for name, label, _ in rf.PARITY_CONFIGS}
SWITCHES = {name: switches for name, _, switches in rf.PARITY_CONFIGS}


def cpp(value):
    """A number as C++'s ostream writes a double by default (6 significant digits)."""
    return f"{value:g}"


def bench_trainer_log(passes, precisions=("bf16", "fp8"), error=None):
    """bench_trainer's stdout (and stderr: trainer_tables.sh sends both to its log)."""
    config = ws.printf_format(BENCH, "bench_trainer: %s; d_model")
    lines = [config % (DEVICE, 4096, 14336, 32, 2048, 4, 256, 975175680, 2, passes, passes * 4096, 3, 10, 3)]
    for p in precisions:
        lines.append(ws.printf_format(BENCH, "bench_trainer: %s: attention") %
                     (p, "fused (cuDNN)", "; no amax recording (plain BF16)" if p == "bf16" else "",
                      "through the heuristic's pick"))
        lines.append(ws.printf_format(BENCH, "bench_trainer: %s: memory") % (p, "31.2 GiB held, 46.9 GiB free"))
    if error:
        return "".join(lines) + f"bench_trainer: error: {error}\n"
    lines.append(ws.printf_format(BENCH, "\n| precision |"))
    row = ws.printf_format(BENCH, "| %s | %.0f |")
    for p in precisions:
        tokens, tflops, ms, _ = SPEED[passes][p]
        lines.append(row % (p, tokens, tflops, ms, tokens / SPEED[passes][precisions[0]][0]))
    lines.append("\nGPU time per optimizer step by phase (...)\n")
    for p in precisions:  # the traces follow the tables: every precision is timed first
        traced = sum(calls for _, calls, _ in KERNELS[p]) * passes
        ms = sum(ms for _, _, ms in KERNELS[p]) * passes
        lines.append(ws.printf_format(BENCH, "bench_trainer: %s: kernel trace: %.0f") % (p, traced, 1, ms, ms, ""))
    return "".join(lines)


def speed_folder(out: Path, passes):
    folder = out / rf.speed_folder(passes)
    folder.mkdir(exist_ok=True)
    return folder


def plant_speed(out: Path, passes, with_pass_columns=True):
    """speed.csv and profile.csv as bench_trainer --passes P --out writes them, with the header from
    its source (without its pass columns: a file written before they were added)."""
    folder = speed_folder(out, passes)
    (folder / rf.BENCH_TRAINER_LOG).write_text(bench_trainer_log(passes))
    header = ws.csv_header(BENCH, "speed", "speed.csv")
    rows = []
    for p, values in SPEED[passes].items():
        cells = {"precision": p, **{c: cpp(v) for c, v in zip(rf.SPEED_COLUMNS[1:], values)},
                 "passes": str(passes), "tokens_per_step": str(passes * 4096)}
        rows.append(",".join(cells[c] for c in header))
    if not with_pass_columns:
        header = header[:len(rf.SPEED_COLUMNS)]
        rows = [",".join(r.split(",")[:len(rf.SPEED_COLUMNS)]) for r in rows]
    (folder / rf.SPEED).write_text(",".join(header) + "\n" + "\n".join(rows) + "\n")
    code = ws.text(BENCH)
    assert 'profile << "phase";' in code and '<< "_ms";' in code and '"/profile.csv"' in code, \
        f"{BENCH}: profile.csv's header is no longer phase,<precision>_ms...: update this test and the reader"
    lines = ["phase," + ",".join(p + "_ms" for p in PROFILE_MS[passes])]
    for i, name in enumerate(ws.phase_names()):
        lines.append(f'"{name}",' + ",".join(cpp(ms[i]) for ms in PROFILE_MS[passes].values()))
    (folder / rf.PROFILE).write_text("\n".join(lines) + "\n")
    plant_kernels(out, passes)


def csv_quoted(text):
    """A field as kernel_table.hpp's csv_quoted writes it."""
    return '"' + text.replace('"', '""') + '"'


def plant_kernels(out: Path, passes):
    """kernels.csv as bench_trainer --trace-steps 1 --out writes it: the header from its source, each
    precision's kernels the longest first, names quoted."""
    header = ws.csv_header(BENCH, "kernels", "kernels.csv")
    lines = [",".join(header)]
    for p, kernels in KERNELS.items():
        for name, calls, ms in sorted(kernels, key=lambda k: -k[2]):
            cells = {"precision": p, "kernel": csv_quoted(name), "calls_per_step": cpp(calls * passes),
                     "ms_per_step": cpp(ms * passes)}
            lines.append(",".join(cells[c] for c in header))
    (speed_folder(out, passes) / rf.KERNELS).write_text("\n".join(lines) + "\n")


def plant_peer(out: Path, passes):
    """torch_peer.csv and torch_peer.log as torch_peer.py --passes P --out writes them."""
    folder = speed_folder(out, passes)
    name, tokens, tflops, ms, loss = PEER_ROW[passes]
    (folder / rf.TORCH_PEER).write_text(",".join(rf.SPEED_HEADER) + "\n" +
                                        f"{name},{tokens},{tflops},{ms},{loss},{passes},{passes * 4096}\n")
    (folder / rf.TORCH_PEER_LOG).write_text(
        f"torch_peer: 3 warm-up steps in 3.1 s (torch.compile included)\n"
        f"torch_peer: {DEVICE}, torch 2.11.0, torch.compile, BF16 autocast; 975175680 parameters, batch 2 x "
        f"context 2048, passes {passes} ({passes * 4096} tokens per optimizer step)\n"
        f"| PyTorch BF16 (torch.compile) | {tokens:.0f} tokens/s | {tflops:.1f} model TFLOP/s | {ms:.1f} ms/step | "
        f"loss {loss:.3f} |\n")


def progress_lines(steps, last):
    """fp8_trainer's --no-progress lines (stderr, in the parity log), from progress.cpp's format."""
    fmt = ws.printf_format("examples/trainer/progress.cpp", "step %")
    return "".join(fmt % (s, steps, 2.0 - s / 1000, "", 5000.0, "1m 10s") for s in range(50, last + 1, 50))


def number(value):
    """A log.csv cell as logging.cpp writes it: %.9g, empty for NaN (not measured)."""
    return "" if math.isnan(value) else f"{value:.9g}"


def plant_parity(out: Path, name, seed, last=STEPS):
    """One parity run as fp8_trainer --out runs/<run> leaves it: its log (the data line, progress and,
    when it finished, the final line) and its log.csv up to step `last`, with a validation loss every
    50 steps that ends at its planted final loss."""
    final = LOSSES[name][seed - 1]
    text = (f"data:      fortunes: 42 cookie files in /usr/share/games/fortunes\n"
            f"           2313695 training bytes, 257102 validation bytes; unigram baseline {BASELINE} nats/byte\n"
            + progress_lines(STEPS, last))
    if last == STEPS:
        text += ws.printf_format("examples/trainer/trainer.cpp", rf.FINAL_PREFIX) % (final, BASELINE, STEPS, "0:41")
    (out / rf.parity_log(name, seed)).write_text(text)
    folder = out / rf.PARITY_RUNS / rf.parity_run(name, seed)
    folder.mkdir(parents=True)
    header = ws.trainer_log_header()
    lines = [",".join(header)]
    for step in range(1, last + 1):
        val = final + (STEPS - step) * 0.002 if step % 50 == 0 else math.nan
        values = {"step": step, "tokens": step * 2048, "lr": 1e-3, "train_loss": final + 0.05 + (STEPS - step) * 0.002,
                  "val_loss": val, "grad_norm": 0.8, "shadow_loss": math.nan, "shadow_diff": math.nan,
                  "tokens_per_s": 51234.5, "elapsed_s": step * 0.07}
        lines.append(",".join(str(values[c]) if c in ("step", "tokens") else number(values[c]) for c in header))
    (folder / rf.TRAINER_LOG).write_text("\n".join(lines) + "\n")


def run(*command, **kwargs):
    return subprocess.run([str(c) for c in command], capture_output=True, text=True, check=False, **kwargs)


def results(out: Path):
    """trainer_results.py as trainer_tables.sh calls it; returns (process, page)."""
    process = run(sys.executable, RESULTS, out, "--steps", STEPS, "--data-name", "Debian's fortunes",
                  "--device", DEVICE)
    page = out / "trainer_cuda_results.md"
    return process, page.read_text() if page.exists() else ""


def expected_row(name, losses, reference):
    """A parity table row worked out here: mean ± sample std, min – max, percent from the reference."""
    mean = statistics.mean(losses)
    std = statistics.stdev(losses) if len(losses) > 1 else 0.0
    relative = (mean - statistics.mean(reference)) / statistics.mean(reference)
    verdict = "" if name == "bf16" else (" ✓" if abs(relative) <= 0.005 else " ✗")
    return (f"| {LABELS[name]} | `{SWITCHES[name]}` | {mean:.4f} ± {std:.4f} | {min(losses):.4f} – {max(losses):.4f} | "
            f"{relative * 100:+.2f}%{verdict} | {len(losses)} of 3 |")


class tables_script_wiring(unittest.TestCase):
    """trainer_tables.sh writes the files under the names trainer_results.py reads, and runs the
    configurations it renders."""

    def test_names(self):
        code = TABLES.read_text()
        for piece in ("for passes in " + " ".join(map(str, rf.SPEED_PASSES)) + "; do",
                      f"speed=$out/{rf.speed_folder('$passes')}",
                      'speed_run "$speed" --passes "$passes"',
                      '"$build/bench/cuda/bench_trainer" "$@" --out "$folder" 2>&1 |',
                      f'tee "$folder/{rf.BENCH_TRAINER_LOG}"',
                      'torch_peer.py" --passes "$passes" --steps "$timed" --out "$speed" 2>&1 |',
                      f'tee "$speed/{rf.TORCH_PEER_LOG}"',
                      "configs=(" + " ".join(name for name, _, _ in rf.PARITY_CONFIGS) + ")",
                      "seeds=(" + " ".join(map(str, rf.PARITY_SEEDS)) + ")",
                      f"run={rf.parity_run('$config', '$seed')}", '--seed "$seed"',
                      f'--out "$out/{rf.PARITY_RUNS}/$run"', '>"$out/parity_$run.log" 2>&1 &', 'wait "${pids[$i]}"',
                      'trainer_results.py" "$out" --steps "$steps" --data-name "$data_name"',
                      'data_args=(--data "$data_dir")', "--lr 1e-3"):
            self.assertIn(piece, code)
        for name, _, switches in rf.PARITY_CONFIGS:
            self.assertIn(f'[{name}]="{switches}"', code)
        self.assertEqual(rf.parity_log("fp8-current", 2), "parity_fp8-current-s2.log")
        self.assertEqual(rf.speed_folder(8), "speed_passes8")
        self.assertEqual(list(rf.SPEED_HEADER), ws.csv_header(BENCH, "speed", "speed.csv"),
                         "torch_peer.csv is written with speed.csv's columns (one table)")
        self.assertEqual(rf.SPEED_HEADER[:len(rf.SPEED_COLUMNS)], rf.SPEED_COLUMNS)
        header = ws.trainer_log_header()
        self.assertEqual([c for c in rf.TRAINER_LOG_COLUMNS if c not in header], [])
        self.assertIn('return "bf16";', ws.text("examples/trainer/precision.cpp"))
        options = ws.text("examples/trainer/options.cpp")
        for switch in ("--scaling", "--granularity", "--seed", "--data"):
            self.assertIn(f'"{switch}"', options)
        self.assertIn('o.passes = positive(option, value)', ws.text(BENCH))
        self.assertEqual(list(rf.KERNEL_COLUMNS), ws.csv_header(BENCH, "kernels", "kernels.csv"))
        trace_lines = ws.printf_format(BENCH, "bench_trainer: %s: kernel trace: not run")
        self.assertTrue(trace_lines.startswith(f"bench_trainer: %s: {rf.KERNEL_TRACE_NOTE} not run: "), trace_lines)
        self.assertIn('fp8_bench::kernel_csv_lines(name, *r.kernels, o.trace_steps)', ws.text(BENCH))
        self.assertIn('out += \'"\'', ws.text("bench/cuda/kernel_table.hpp"), "csv_quoted doubles quotes")

    def test_quick_and_defaults(self):
        """--quick shortens the timed steps; the parity steps default to about one epoch of the fortunes."""
        code = TABLES.read_text()
        self.assertIn("--quick) steps=${steps:-200}; timed=2; profiled=1 ;;", code)
        self.assertIn("steps=$((fortunes ? 1100 : 600))", code)
        self.assertIn('--steps "$timed" --profile-steps "$profiled"', code)

    def test_torch_peer_starts(self):
        """torch_peer.py (run only where PyTorch has a GPU) loads its names; without PyTorch it says so."""
        started = run(sys.executable, PEER, "--help")
        self.assertNotIn("Traceback", started.stderr)
        self.assertTrue(started.returncode == 0 or "PyTorch is not installed" in started.stderr, started.stderr)

    def test_torch_peer_passes_option(self):
        """--passes is checked before any GPU work: against a stand-in torch module without CUDA, a
        bad count is a usage error naming it, a good one gets as far as looking for the GPU."""
        with tempfile.TemporaryDirectory() as folder:
            stub = Path(folder) / "torch"
            (stub / "nn").mkdir(parents=True)
            (stub / "__init__.py").write_text("class cuda:\n    @staticmethod\n    def is_available():\n"
                                              "        return False\n")
            (stub / "nn/__init__.py").write_text("class Module:\n    pass\n")
            (stub / "nn/functional.py").write_text("")
            env = {"PYTHONPATH": folder, "PATH": "/usr/bin:/bin"}
            for bad in ("0", "-2", "two", "1.5"):
                refused = run(sys.executable, PEER, "--passes", bad, env=env)
                self.assertEqual(refused.returncode, 2, refused.stderr)
                self.assertIn(f"argument --passes: expects a positive whole number; got '{bad}'", refused.stderr)
            accepted = run(sys.executable, PEER, "--passes", "8", env=env)
            self.assertEqual(accepted.returncode, 1, accepted.stderr)
            self.assertIn("PyTorch sees no CUDA device", accepted.stderr)
            self.assertIn("--passes", run(sys.executable, PEER, "--help", env=env).stdout)

    def test_shell_syntax(self):
        check = run("bash", "-n", TABLES)
        self.assertEqual(check.returncode, 0, check.stderr)


# Stand-ins for the GPU programs, for trainer_tables.sh's plumbing: each records its arguments;
# bench_trainer fails as it does without a GPU; fp8_trainer writes a finished run's log.csv and final
# line (its loss from the seed), except the run named by STUB_KILL, which is killed as the OOM killer
# would.
STUB_BENCH = """#!/bin/bash
echo "$*" >>"$STUB_CALLS/bench_trainer"
echo "bench_trainer: error: no CUDA device" >&2
exit 1
"""
STUB_TRAINER = """#!/bin/bash
echo "$*" >>"$STUB_CALLS/fp8_trainer"
args=("$@")
for ((i = 0; i < $#; i++)); do
  case ${args[i]} in
    --out) out=${args[i + 1]} ;;
    --steps) steps=${args[i + 1]} ;;
    --seed) seed=${args[i + 1]} ;;
  esac
done
[[ $out == */$STUB_KILL ]] && kill -9 $$
mkdir -p "$out"
printf '%s\\n' "$STUB_HEADER" "$steps,0,0.0001,1.5,1.48${seed},0.5,,,1000,5" >"$out/log.csv"
echo "final:     validation loss 1.48${seed}0 nats/byte (unigram baseline 3.3346) after $steps steps, 0:05"
"""


class tables_script_plumbing(unittest.TestCase):
    """trainer_tables.sh itself, with stand-ins for the GPU programs: both speed configurations, the
    fifteen parity runs with their switches, seeds and the --data-dir text, a killed run said so in
    its log, failures counted, and the page from what the runs left."""

    @staticmethod
    def stand_ins(work: Path):
        """The stand-in programs in work/build, their calls recorded in work/calls; the environment."""
        for relative, text in (("build/bench/cuda/bench_trainer", STUB_BENCH),
                               ("build/examples/trainer/fp8_trainer", STUB_TRAINER)):
            program = work / relative
            program.parent.mkdir(parents=True, exist_ok=True)
            program.write_text(text)
            program.chmod(0o755)
        (work / "bin").mkdir()
        (work / "bin/python3").symlink_to(sys.executable)  # the interpreter with matplotlib
        (work / "calls").mkdir()
        (work / "fortunes").mkdir()
        return {"PATH": f"{work}/bin:/usr/bin:/bin", "STUB_CALLS": str(work / "calls"), "STUB_KILL": "fp8-current-s2",
                "STUB_HEADER": ",".join(ws.trainer_log_header())}

    def test_tuned_and_budget(self):
        """--tuned adds the tuned 8-pass run; a --budget too small for any program runs none, says so,
        and still writes the page; a budget that is not a whole number is refused."""
        with tempfile.TemporaryDirectory() as folder:
            work = Path(folder)
            env = self.stand_ins(work)
            done = run("bash", TABLES, work / "build", work / "out", "--only", "speed", "--tuned", env=env)
            out = work / "out"
            self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
            self.assertIn("(3 failures)", done.stdout)  # the three bench_trainer runs
            self.assertEqual((work / "calls/bench_trainer").read_text().splitlines()[-1],
                             f"--passes 8 --steps 10 --profile-steps 3 --gemm-tuning on --trace-steps 0 "
                             f"--out {out}/{rf.SPEED_TUNED_FOLDER}")
            self.assertIn("every GEMM tuned on its first call", (out / "trainer_cuda_results.md").read_text())

            (work / "calls/bench_trainer").unlink()
            done = run("bash", TABLES, work / "build", work / "short", "--data-dir", work / "fortunes", "--tuned",
                       "--budget", "40", env=env)
            self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
            self.assertFalse((work / "calls/bench_trainer").exists())
            self.assertFalse((work / "calls/fp8_trainer").exists())
            self.assertIn("not run (under 30 s of --budget 40 left)", done.stdout)  # through tee, as the logs
            self.assertIn("not run (under 30 s of --budget 40 left)", (work / "short" / rf.parity_log("bf16", 1)).read_text())
            self.assertIn("stopped at its time limit", (work / "short" / rf.parity_log("bf16", 1)).read_text())
            self.assertTrue((work / "short/trainer_cuda_results.md").is_file())

            for bad in ("0", "-5", "ten", "1.5"):
                refused = run("bash", TABLES, work / "build", work / "bad", "--budget", bad, env=env)
                self.assertEqual(refused.returncode, 2, refused.stderr)
                self.assertIn("--budget takes a whole number of seconds", refused.stderr)

    def test_stand_in_programs(self):
        with tempfile.TemporaryDirectory() as folder:
            work = Path(folder)
            env = self.stand_ins(work)
            done = run("bash", TABLES, work / "build", work / "out", "--data-dir", work / "fortunes", env=env)
            self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
            self.assertIn("(3 failures)", done.stdout)  # two bench_trainer runs, one killed parity run
            out = work / "out"
            bench_calls = (work / "calls/bench_trainer").read_text().splitlines()
            self.assertEqual(bench_calls, [f"--passes {p} --steps 10 --profile-steps 3 --out {out}/{rf.speed_folder(p)}"
                                           for p in rf.SPEED_PASSES])
            trainer_calls = sorted((work / "calls/fp8_trainer").read_text().splitlines())
            expected = sorted(f"--device cuda {switches} --seed {seed} --threads 2 --d-model 1024 --layers 8 --heads 16 --hidden 2816 "
                              f"--lr 1e-3 --steps 1100 --data {work}/fortunes --out {out}/runs/{rf.parity_run(name, seed)} "
                              "--overwrite --no-progress --no-final-save"
                              for name, _, switches in rf.PARITY_CONFIGS for seed in rf.PARITY_SEEDS)
            self.assertEqual(trainer_calls, expected)
            killed = out / rf.parity_log("fp8-current", 2)
            self.assertEqual(killed.read_text(), "trainer_tables: fp8_trainer was killed by signal 9\n")
            self.assertIn("parity run fp8-current-s2 failed (exit status 137)", done.stdout)
            for passes in rf.SPEED_PASSES:
                peer_log = out / rf.speed_folder(passes) / rf.TORCH_PEER_LOG
                self.assertIn("no PyTorch with CUDA here", peer_log.read_text())
            page = (out / "trainer_cuda_results.md").read_text()
            self.assertIn(f"1100 steps, Debian's fortunes (the cookie files in {work}/fortunes))", page)
            self.assertIn("| `--precision bf16` | 1.4820 ± 0.0010 | 1.4810 – 1.4830 | +0.00% | 3 of 3 |", page)
            self.assertIn("| `--precision fp8 --scaling current` | 1.4820 ± 0.0014 | 1.4810 – 1.4830 | +0.00% ✓ | "
                          "2 of 3 |", page)
            self.assertIn("seed 2 did not finish (last line of `parity_fp8-current-s2.log`: `trainer_tables: fp8_trainer "
                          "was killed by signal 9`)", page)
            self.assertIn("the unigram baseline (byte frequencies only) is 3.3346", page)
            self.assertEqual((out / rf.LOSS_PLOT).read_bytes()[:4], b"\x89PNG")
            self.assertEqual(ragged_rows(page), [])


class full_folder(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory()
        out = cls.out = Path(cls.folder.name)
        for passes in rf.SPEED_PASSES:
            plant_speed(out, passes)
            plant_peer(out, passes)
        for name, _, _ in rf.PARITY_CONFIGS:
            for seed in rf.PARITY_SEEDS:
                plant_parity(out, name, seed)
        cls.process, cls.page = results(out)

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()

    def test_runs_cleanly(self):
        self.assertEqual(self.process.returncode, 0, self.process.stderr)
        self.assertNotIn("Traceback", self.process.stderr)
        self.assertIn(f"Generated by `bench/cuda/trainer_tables.sh` on {DEVICE}, 20", self.page)
        self.assertEqual(ragged_rows(self.page), [])
        for absent in ("not run", "not measured", "did not", "no loss plot"):
            self.assertNotIn(absent, self.page.lower())

    def test_speed_tables(self):
        """One table per configuration, in order, each with its own tokens per step and speedups."""
        headings = [line for line in self.page.splitlines() if line.startswith("### ")]
        self.assertEqual(headings, [
            "### 1 pass per optimizer step: 4096 tokens per optimizer step (batch 2 x context 2048)",
            "### 8 passes per optimizer step: 32768 tokens per optimizer step (gradient accumulation: 8 passes of "
            "batch 2 x context 2048)"])
        sections = self.page.split("### ")[1:]
        for passes, section in zip(rf.SPEED_PASSES, sections):
            base = SPEED[passes]["bf16"][0]
            self.assertIn("| precision | tokens/s | model TFLOP/s | ms/step | speedup vs bf16 |", section)
            for p, (tokens, tflops, ms, _) in SPEED[passes].items():
                self.assertIn(f"| {p} | {tokens:.0f} | {tflops:.1f} | {ms:.1f} | {tokens / base:.2f}x |", section)
            _, tokens, tflops, ms, _ = PEER_ROW[passes]
            self.assertIn(f"| PyTorch BF16 (torch.compile) | {tokens:.0f} | {tflops:.1f} | {ms:.1f} | "
                          f"{tokens / base:.2f}x |", section)
        self.assertIn("| fp8 | 81486 | 509.1 | 50.3 | 1.21x |", sections[0])
        self.assertIn("| fp8 | 106432 | 665.0 | 307.9 | 1.33x |", sections[1])

    def test_notes_and_profiles(self):
        sections = self.page.split("### ")[1:]
        for passes, section in zip(rf.SPEED_PASSES, sections):
            for line in bench_trainer_log(passes).splitlines():
                if line.startswith("bench_trainer:"):
                    self.assertIn(f"- {line}", section)
            self.assertIn(f"batch 2, passes {passes} ({passes * 4096} tokens per optimizer step)", section)
            self.assertIn(f"- torch_peer: {DEVICE}", section)
            self.assertIn("| phase | bf16 | fp8 |", section)
            for i, name in enumerate(ws.phase_names()):
                ms = PROFILE_MS[passes]
                self.assertIn(f"| {rf.markdown_cell(name)} | {ms['bf16'][i]:.1f} | {ms['fp8'][i]:.1f} |", section)
            sums = [sum(PROFILE_MS[passes][p]) for p in ("bf16", "fp8")]
            self.assertIn(f"| all phases | {sums[0]:.1f} | {sums[1]:.1f} |", section)
            timed = [SPEED[passes][p][2] for p in ("bf16", "fp8")]
            self.assertIn(f"| the step, timed | {timed[0]:.1f} | {timed[1]:.1f} |", section)

    def test_kernels(self):
        """Each configuration: the 12 longest kernels of each precision, the longest first, with calls,
        milliseconds and share of the summed time worked out here; long names cut, commas kept."""
        sections = self.page.split("### ")[1:]
        for passes, section in zip(rf.SPEED_PASSES, sections):
            for p, kernels in KERNELS.items():
                ranked = sorted(kernels, key=lambda k: -k[2])
                total = sum(ms for _, _, ms in kernels) * passes
                self.assertIn(f"{p}: the 12 longest of {len(kernels)} kernels, copies and memsets per optimizer step "
                              f"(CUPTI trace; {total:.1f} ms summed; `speed_passes{passes}/kernels.csv` has them all):",
                              section)
                table = section.split(f"{p}: the 12 longest")[1].split("\n\n")[1].splitlines()
                self.assertEqual(table[:2], ["| kernel | calls | ms | share |", "|---|---|---|---|"])
                self.assertEqual(len(table), 2 + 12)
                for line, (name, calls, ms) in zip(table[2:], ranked):
                    shown = name if len(name) <= 90 else name[:89] + "…"
                    self.assertEqual(line, f"| `{shown}` | {calls * passes:.0f} | {ms * passes:.2f} | "
                                           f"{100 * ms * passes / total:.1f}% |")
            # The same written out: a comma in the template arguments kept, a long name cut at 90.
            self.assertIn("| `fp8::cuda::detail::amax_kernel<__nv_bfloat16, 256>` |", section)
            self.assertIn("| `cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128_4x1x1_"
                          "kernel…` |", section)
            executions = sum(calls for _, calls, _ in KERNELS["fp8"]) * passes
            self.assertIn(f"- bench_trainer: fp8: kernel trace: {executions} executions per optimizer step (1 traced)",
                          section)

    def test_parity_table(self):
        self.assertIn("## Loss parity (d_model 1024, 8 blocks, lr 1e-3, 600 steps, Debian's fortunes)", self.page)
        self.assertIn(f"the unigram baseline (byte frequencies only) is {BASELINE:.4f}", self.page)
        self.assertIn("| configuration | trainer switches | validation loss, mean ± std | min – max | vs BF16 mean | "
                      "seeds finished |", self.page)
        for name in LOSSES:
            self.assertIn(expected_row(name, LOSSES[name], LOSSES["bf16"]), self.page)
        # The same verdicts written out: delayed and current within 0.5%, blocks not.
        self.assertIn("| 1.4910 ± 0.0010 | 1.4900 – 1.4920 | +0.40% ✓ | 3 of 3 |", self.page)
        self.assertIn("| 1.4863 ± 0.0015 | 1.4850 – 1.4880 | +0.09% ✓ | 3 of 3 |", self.page)
        self.assertIn("| 1.5013 ± 0.0032 | 1.4990 – 1.5050 | +1.10% ✗ | 3 of 3 |", self.page)
        self.assertIn("| `--precision bf16` | 1.4850 ± 0.0020 | 1.4830 – 1.4870 | +0.00% | 3 of 3 |", self.page)
        self.assertIn("✓: within 0.5% of the BF16 mean (the aim), ✗: not.", self.page)

    def test_per_seed_losses_and_plot(self):
        for name, losses in LOSSES.items():
            self.assertIn(f"- {LABELS[name]}: " + ", ".join(f"{x:.4f}" for x in losses), self.page)
        self.assertIn(f"![loss parity: validation loss, mean over seeds]({rf.LOSS_PLOT})", self.page)
        self.assertEqual((self.out / rf.LOSS_PLOT).read_bytes()[:4], b"\x89PNG")


class cut_short(unittest.TestCase):
    def test_nothing_finished(self):
        """bench_trainer's log empty, the 8-pass folder never made, no PyTorch, one parity run killed,
        the others never started."""
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder)
            (speed_folder(out, 1) / rf.BENCH_TRAINER_LOG).write_text("")
            no_torch = re.search(r'echo "(no PyTorch[^"]*)" \| tee "\$speed/torch_peer.log"', TABLES.read_text())
            self.assertIsNotNone(no_torch, "trainer_tables.sh's line for a machine without PyTorch")
            (speed_folder(out, 1) / rf.TORCH_PEER_LOG).write_text(no_torch.group(1) + "\n")
            plant_parity(out, "bf16", 1, last=200)
            process, page = results(out)
            self.assertEqual(process.returncode, 0, process.stderr)
            self.assertNotIn("Traceback", process.stderr)
            self.assertIn("Not measured: bench_trainer did not run (`speed_passes1/bench_trainer.log` is missing or "
                          "empty).", page)
            self.assertIn("Not measured: bench_trainer did not run (`speed_passes8/bench_trainer.log` is missing or "
                          "empty).", page)
            self.assertIn("GPU time per optimizer step by phase: not measured: bench_trainer did not run", page)
            self.assertIn("Kernels: not traced: bench_trainer did not run (`speed_passes1/bench_trainer.log` is "
                          "missing or empty).", page)
            self.assertIn("PyTorch peer: not in the table: torch_peer.py stopped before writing its results; last "
                          f"line of `speed_passes1/torch_peer.log`: `{no_torch.group(1)}`.", page)
            self.assertIn("PyTorch peer: not in the table: torch_peer.py did not run "
                          "(`speed_passes8/torch_peer.log` is missing or empty).", page)
            self.assertNotIn("| precision | tokens/s", page)
            for name in LOSSES:
                self.assertIn(f"| {LABELS[name]} | `{SWITCHES[name]}` | - | - | - | 0 of 3 |", page)
            last = progress_lines(STEPS, 200).splitlines()[-1]
            self.assertIn(f"- BF16: seed 1 did not finish (last line of `parity_bf16-s1.log`: `{last}`), seed 2 did "
                          "not run (`parity_bf16-s2.log` is missing or empty)", page)
            self.assertIn("No loss plot: no parity run finished", page)
            self.assertFalse((out / rf.LOSS_PLOT).exists())
            self.assertEqual(ragged_rows(page), [])

    def test_some_seeds_finished(self):
        """A configuration with a seed killed is summarised over the others, and says so; one with no
        finished seed has no numbers, and the plot shows the rest."""
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder)
            for seed in rf.PARITY_SEEDS:
                plant_parity(out, "bf16", seed)
            plant_parity(out, "fp8-delayed", 1)
            plant_parity(out, "fp8-delayed", 2, last=350)
            plant_parity(out, "fp8-delayed", 3)
            process, page = results(out)
            self.assertEqual(process.returncode, 0, process.stderr)
            kept = [LOSSES["fp8-delayed"][0], LOSSES["fp8-delayed"][2]]
            self.assertIn(expected_row("fp8-delayed", kept, LOSSES["bf16"]), page)
            self.assertIn("| 2 of 3 |", page)
            self.assertIn(f"| {LABELS['fp8-current']} | `{SWITCHES['fp8-current']}` | - | - | - | 0 of 3 |", page)
            self.assertIn(f"- {LABELS['fp8-delayed']}: {kept[0]:.4f}, seed 2 did not finish (last line of "
                          f"`parity_fp8-delayed-s2.log`: `{progress_lines(STEPS, 350).splitlines()[-1]}`), "
                          f"{kept[1]:.4f}", page)
            self.assertEqual((out / rf.LOSS_PLOT).read_bytes()[:4], b"\x89PNG")
            self.assertEqual(ragged_rows(page), [])

    def test_bench_trainer_stopped(self):
        """bench_trainer at 8 passes stopped by an error after its first lines: the 1-pass table still
        whole, the 8-pass one the peer's numbers alone; a speed.csv of the old columns still read."""
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder)
            plant_speed(out, 1, with_pass_columns=False)
            error = "out of memory allocating 2.0 GiB (the fp8 run)"
            (speed_folder(out, 8) / rf.BENCH_TRAINER_LOG).write_text(bench_trainer_log(8, ("bf16",), error=error))
            plant_peer(out, 8)
            process, page = results(out)
            self.assertEqual(process.returncode, 0, process.stderr)
            one, eight = page.split("### ")[1:3]
            self.assertIn("| fp8 | 81486 | 509.1 | 50.3 | 1.21x |", one)
            self.assertIn("4096 tokens per optimizer step", one)
            self.assertIn("Not measured: bench_trainer stopped before writing its results; last line of "
                          f"`speed_passes8/bench_trainer.log`: `bench_trainer: error: {error}`.", eight)
            self.assertIn(f"- bench_trainer: error: {error}", eight)
            _, tokens, tflops, ms, _ = PEER_ROW[8]
            self.assertIn(f"| PyTorch BF16 (torch.compile) | {tokens:.0f} | {tflops:.1f} | {ms:.1f} | - |", eight)
            self.assertIn("32768 tokens per optimizer step", eight)
            self.assertIn("Kernels: not traced: bench_trainer stopped before writing its results", eight)
            self.assertEqual(ragged_rows(page), [])

    def test_trace_not_run(self):
        """A bench_trainer whose trace could not start (a driver refusing CUPTI): its speed and phases
        whole, the kernels replaced by the trace's own line; an earlier run's kernels.csv is not read
        as this one's (bench_trainer removes it)."""
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder)
            plant_speed(out, 1)
            folder1 = speed_folder(out, 1)
            (folder1 / rf.KERNELS).unlink()
            log = folder1 / rf.BENCH_TRAINER_LOG
            log.write_text("\n".join(line for line in log.read_text().splitlines() if "kernel trace" not in line) +
                           f"\nbench_trainer: {TRACE_NOTE}\n")
            process, page = results(out)
            self.assertEqual(process.returncode, 0, process.stderr)
            one = page.split("### ")[1]
            self.assertIn("| fp8 | 81486 | 509.1 | 50.3 | 1.21x |", one)
            self.assertIn(f"Kernels: not traced: `{TRACE_NOTE}`.", one)
            self.assertNotIn("| kernel | calls |", one)
            bench = ws.text(BENCH)
            self.assertIn('{"/speed.csv", "/profile.csv", "/kernels.csv", "/timeline.csv"}', bench)
            self.assertIn("std::remove((o.out + name).c_str());", bench)
            self.assertEqual(ragged_rows(page), [])

    def test_tuned(self):
        """trainer_tables.sh --tuned: the last configuration again with every GEMM tuned, its own
        table with each precision's gain over its untuned row, and its bench_trainer lines."""
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder)
            for passes in rf.SPEED_PASSES:
                plant_speed(out, passes)
            tuned = out / rf.SPEED_TUNED_FOLDER
            shutil.copytree(speed_folder(out, rf.SPEED_PASSES[-1]), tuned)
            header = ws.csv_header(BENCH, "speed", "speed.csv")
            gains = {"bf16": 1.02, "fp8": 1.10}
            rows = []
            for p, values in SPEED[8].items():
                tokens, tflops, ms, loss = values
                cells = {"precision": p, "tokens_per_s": cpp(tokens * gains[p]), "model_tflops": cpp(tflops * gains[p]),
                         "ms_per_step": cpp(ms / gains[p]), "loss": cpp(loss), "passes": "8", "tokens_per_step": "32768"}
                rows.append(",".join(cells[c] for c in header))
            (tuned / rf.SPEED).write_text(",".join(header) + "\n" + "\n".join(rows) + "\n")
            (tuned / rf.BENCH_TRAINER_LOG).write_text(
                "bench_trainer: fp8: attention fused; GEMMs tuned on their first call (--gemm-tuning on)\n")
            process, page = results(out)
            self.assertEqual(process.returncode, 0, process.stderr)
            section = page.split("### 8 passes per optimizer step, every GEMM tuned on its first call")[1]
            self.assertIn("| precision | tokens/s | model TFLOP/s | ms/step | speedup vs bf16 tuned | vs itself untuned |",
                          section)
            bf16, fp8 = SPEED[8]["bf16"][0] * 1.02, SPEED[8]["fp8"][0] * 1.10
            self.assertIn(f"| bf16 | {bf16:.0f} | {SPEED[8]['bf16'][1] * 1.02:.1f} | {SPEED[8]['bf16'][2] / 1.02:.1f} | "
                          "1.00x | 1.02x |", section)
            self.assertIn(f"| fp8 | {fp8:.0f} | {SPEED[8]['fp8'][1] * 1.10:.1f} | {SPEED[8]['fp8'][2] / 1.10:.1f} | "
                          f"{fp8 / bf16:.2f}x | 1.10x |", section)
            self.assertIn("- bench_trainer: fp8: attention fused; GEMMs tuned on their first call", section)
            self.assertEqual(ragged_rows(page), [])
            # Asked for, but bench_trainer wrote nothing: said so; not asked for: no section.
            (tuned / rf.SPEED).unlink()
            _, page = results(out)
            self.assertIn(f"Not measured: bench_trainer stopped before writing its results; last line of "
                          f"`{rf.SPEED_TUNED_FOLDER}/bench_trainer.log`", page)
            shutil.rmtree(tuned)
            _, page = results(out)
            self.assertNotIn("every GEMM tuned", page)


if __name__ == "__main__":
    unittest.main(verbosity=2)
