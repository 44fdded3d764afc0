#!/usr/bin/env python3
"""trainer_results.py and the trainer's plot_loss.py on planted output folders of trainer_tables.sh.

The trainer's GPU tables are made once, on a rarely lent GPU machine, from what bench_trainer,
torch_peer.py and fp8_trainer leave in one folder. This test plants that folder the way those
programs write it (CSV headers, phase names and printf formats read from their sources by
writer_sources.py; the trainer's log.csv in its own header and number format), draws the loss plot
with plot_loss.py as trainer_tables.sh does, and checks the page: the speed table with the peer as one
more row and speedups from the planted numbers, the phase table, the final losses and their
difference. A folder cut short (bench_trainer never ran or stopped with an error, a parity run killed
mid-way, another never started) must give lines that say so, not empty tables or a traceback.
"""
import math
import re
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
PLOT_LOSS = ws.ROOT / "examples/trainer/scripts/plot_loss.py"
BENCH = "bench/cuda/bench_trainer.cu"

try:  # plot_loss.py draws with it; without it the plot half of this test cannot pass
    import matplotlib  # noqa: F401
except ImportError:
    sys.exit("test_trainer_tables: matplotlib is missing (python3-matplotlib, scripts/setup.sh): "
             "plot_loss.py cannot be checked")

DEVICE = "NVIDIA H100 80GB HBM3"
# Planted speed: precision -> (tokens/s, model TFLOP/s, ms/step, loss).
SPEED = {"bf16": (5000.0, 30.6, 819.2, 5.61), "fp8": (7500.0, 45.9, 546.1, 5.62)}
PEER = ("torch_bf16_compile", 6100.0, 37.3, 671.4, 5.60)
PROFILE_MS = {"bf16": (500.0, 60.0, 150.0, 80.0, 29.2), "fp8": (300.0, 40.0, 120.0, 60.0, 26.1)}
FINAL = {"bf16": (1.2345, 3.4567, 600, "5m 03s"), "fp8": (1.2445, 3.4567, 600, "4m 41s")}


def cpp(value):
    """A number as C++'s ostream writes a double by default (6 significant digits)."""
    return f"{value:g}"


def bench_trainer_log(precisions=("bf16", "fp8"), error=None):
    """bench_trainer's stdout (and stderr: trainer_tables.sh sends both to its log)."""
    config = ws.printf_format(BENCH, "bench_trainer: %s; d_model")
    lines = [config % (DEVICE, 4096, 14336, 32, 2048, 4, 256, 975175680, 2, 4096, 3, 10, 3)]
    for p in precisions:
        lines.append(ws.printf_format(BENCH, "bench_trainer: %s: attention") %
                     (p, "fused (cuDNN)", "; no amax recording (plain BF16)" if p == "bf16" else ""))
        lines.append(ws.printf_format(BENCH, "bench_trainer: %s: memory") % (p, "31.2 GiB held, 46.9 GiB free"))
    if error:
        return "".join(lines) + f"bench_trainer: error: {error}\n"
    lines.append(ws.printf_format(BENCH, "\n| precision |"))
    row = ws.printf_format(BENCH, "| %s | %.0f |")
    for p in precisions:
        tokens, tflops, ms, _ = SPEED[p]
        lines.append(row % (p, tokens, tflops, ms, tokens / SPEED[precisions[0]][0]))
    return "".join(lines) + "\nGPU time per step by phase (...)\n"


def plant_speed(out: Path):
    """speed.csv and profile.csv as bench_trainer --out writes them, with the header from its source."""
    header = ws.csv_header(BENCH, "speed", "speed.csv")
    rows = [",".join([p, *(cpp(v) for v in values)]) for p, values in SPEED.items()]
    (out / rf.SPEED).write_text(",".join(header) + "\n" + "\n".join(rows) + "\n")
    code = ws.text(BENCH)
    assert 'profile << "phase";' in code and '<< "_ms";' in code and '"/profile.csv"' in code, \
        f"{BENCH}: profile.csv's header is no longer phase,<precision>_ms...: update this test and the reader"
    lines = ["phase," + ",".join(p + "_ms" for p in PROFILE_MS)]
    for i, name in enumerate(ws.phase_names()):
        lines.append(f'"{name}",' + ",".join(cpp(ms[i]) for ms in PROFILE_MS.values()))
    (out / rf.PROFILE).write_text("\n".join(lines) + "\n")


def plant_peer(out: Path):
    (out / rf.TORCH_PEER).write_text(",".join(rf.SPEED_COLUMNS) + "\n" + ",".join(map(str, PEER)) + "\n")
    (out / rf.TORCH_PEER_LOG).write_text(
        f"torch_peer: {DEVICE}, torch 2.5.1, torch.compile, BF16 autocast; 975175680 parameters, batch 2 x "
        f"context 2048\n| PyTorch BF16 (torch.compile) | 6100 tokens/s | 37.3 model TFLOP/s | 671.4 ms/step | "
        f"loss 5.600 |\n")


def progress_lines(steps, last):
    """fp8_trainer's --no-progress lines (stderr, in the parity log), from progress.cpp's format."""
    fmt = ws.printf_format("examples/trainer/progress.cpp", "step %")
    return "".join(fmt % (s, steps, 2.0 - s / 1000, "", 5000.0, "1m 10s") for s in range(50, last + 1, 50))


def plant_parity(out: Path, precision, finished=True, last=600):
    text = progress_lines(600, last)
    if finished:
        text += ws.printf_format("examples/trainer/trainer.cpp", rf.FINAL_PREFIX) % FINAL[precision]
    (out / rf.parity_log(precision)).write_text(text)


def number(value):
    """A log.csv cell as logging.cpp writes it: %.9g, empty for NaN (not measured)."""
    return "" if math.isnan(value) else f"{value:.9g}"


def plant_run(folder: Path, offset):
    """A run folder's log.csv: the trainer's header, a validation loss every 5 steps."""
    folder.mkdir(parents=True)
    header = ws.trainer_log_header()
    lines = [",".join(header)]
    for step in range(1, 31):
        val = 2.5 - step * 0.03 + offset if step % 5 == 0 else math.nan
        values = {"step": step, "tokens": step * 4096, "lr": 1e-3, "train_loss": 2.6 - step * 0.03 + offset,
                  "val_loss": val, "grad_norm": 0.8, "shadow_loss": math.nan, "shadow_diff": math.nan,
                  "tokens_per_s": 51234.5, "elapsed_s": step * 0.1}
        lines.append(",".join(str(values[c]) if c in ("step", "tokens") else number(values[c]) for c in header))
    (folder / rf.TRAINER_LOG).write_text("\n".join(lines) + "\n")


def run(*command):
    return subprocess.run([str(c) for c in command], capture_output=True, text=True, check=False)


def results(out: Path):
    """trainer_results.py as trainer_tables.sh calls it; returns (process, page)."""
    process = run(sys.executable, RESULTS, out, "--steps", 600, "--data-name", "documentation.txt",
                  "--device", DEVICE)
    page = out / "trainer_cuda_results.md"
    return process, page.read_text() if page.exists() else ""


class tables_script_wiring(unittest.TestCase):
    """trainer_tables.sh writes the files under the names trainer_results.py reads."""

    def test_names(self):
        code = TABLES.read_text()
        for piece in (f'--out "$out" 2>&1 | tee "$out/{rf.BENCH_TRAINER_LOG}"', f'tee "$out/{rf.TORCH_PEER_LOG}"',
                      "for precision in " + " ".join(rf.PARITY_PRECISIONS), '>"$out/parity_$precision.log"',
                      '--out "$out/runs/$precision"', f'-o "$out/{rf.LOSS_PLOT}" "BF16=$out/runs/bf16" '
                      '"FP8=$out/runs/fp8"', 'trainer_results.py" "$out" --steps "$steps" --data-name "$data_name"'):
            self.assertIn(piece, code)
        self.assertEqual(rf.parity_log("fp8"), "parity_fp8.log")
        self.assertEqual(list(rf.SPEED_COLUMNS), ws.csv_header(BENCH, "speed", "speed.csv"),
                         "torch_peer.csv is written with speed.csv's columns (one table)")
        header = ws.trainer_log_header()
        self.assertEqual([c for c in rf.TRAINER_LOG_COLUMNS if c not in header], [])
        precisions = ws.text("examples/trainer/precision.cpp")
        for p in rf.PARITY_PRECISIONS:
            self.assertIn(f'return "{p}";', precisions)

    def test_torch_peer_starts(self):
        """torch_peer.py (run only where PyTorch has a GPU) loads its names; without PyTorch it says so."""
        started = run(sys.executable, HERE.parent / "torch_peer.py", "--help")
        self.assertNotIn("Traceback", started.stderr)
        self.assertTrue(started.returncode == 0 or "PyTorch is not installed" in started.stderr, started.stderr)

    def test_shell_syntax(self):
        check = run("bash", "-n", TABLES)
        self.assertEqual(check.returncode, 0, check.stderr)


class full_folder(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory()
        out = cls.out = Path(cls.folder.name)
        (out / rf.BENCH_TRAINER_LOG).write_text(bench_trainer_log())
        plant_speed(out)
        plant_peer(out)
        for precision in rf.PARITY_PRECISIONS:
            plant_parity(out, precision)
        plant_run(out / "runs/bf16", 0.0)
        plant_run(out / "runs/fp8", 0.01)
        cls.plot = run(sys.executable, PLOT_LOSS, "-o", out / rf.LOSS_PLOT, f"BF16={out}/runs/bf16",
                       f"FP8={out}/runs/fp8")
        cls.process, cls.page = results(out)

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()

    def test_runs_cleanly(self):
        self.assertEqual(self.plot.returncode, 0, self.plot.stderr)
        self.assertEqual((self.out / rf.LOSS_PLOT).read_bytes()[:4], b"\x89PNG")
        self.assertEqual(self.process.returncode, 0, self.process.stderr)
        self.assertNotIn("Traceback", self.process.stderr)
        self.assertIn(f"Generated by `bench/cuda/trainer_tables.sh` on {DEVICE}, 20", self.page)
        self.assertEqual(ragged_rows(self.page), [])
        self.assertNotIn("not run", self.page.lower())
        self.assertNotIn("not measured", self.page.lower())

    def test_speed_table(self):
        base = SPEED["bf16"][0]
        self.assertIn("| precision | tokens/s | model TFLOP/s | ms/step | speedup vs bf16 |", self.page)
        for p, (tokens, tflops, ms, _) in SPEED.items():
            self.assertIn(f"| {p} | {tokens:.0f} | {tflops:.1f} | {ms:.1f} | {tokens / base:.2f}x |", self.page)
        _, tokens, tflops, ms, _ = PEER
        self.assertIn(f"| PyTorch BF16 (torch.compile) | {tokens:.0f} | {tflops:.1f} | {ms:.1f} | "
                      f"{tokens / base:.2f}x |", self.page)

    def test_notes_and_profile(self):
        for line in bench_trainer_log().splitlines():
            if line.startswith("bench_trainer:"):
                self.assertIn(f"- {line}", self.page)
        self.assertIn("- torch_peer: " + DEVICE, self.page)
        self.assertIn("| phase | bf16 | fp8 |", self.page)
        for i, name in enumerate(ws.phase_names()):
            self.assertIn(f"| {rf.markdown_cell(name)} | {PROFILE_MS['bf16'][i]:.1f} | {PROFILE_MS['fp8'][i]:.1f} |", self.page)

    def test_parity(self):
        self.assertIn("## Loss parity (d_model 1024, 8 blocks, lr 1e-3, 600 steps, documentation.txt)", self.page)
        for p, (loss, baseline, steps, time) in FINAL.items():
            self.assertIn(f"| {p} | {loss:.4f} | {baseline:.4f} | {steps} | {time} |", self.page)
        self.assertIn(f"FP8 less BF16: {FINAL['fp8'][0] - FINAL['bf16'][0]:+.4f} nats/byte.", self.page)
        self.assertIn(f"![loss parity]({rf.LOSS_PLOT})", self.page)


class cut_short(unittest.TestCase):
    def test_nothing_finished(self):
        """bench_trainer's log empty, no PyTorch, one parity run killed, the other never started."""
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder)
            (out / rf.BENCH_TRAINER_LOG).write_text("")
            no_torch = re.search(r'echo "(no PyTorch[^"]*)" \| tee "\$out/torch_peer.log"', TABLES.read_text())
            self.assertIsNotNone(no_torch, "trainer_tables.sh's line for a machine without PyTorch")
            (out / rf.TORCH_PEER_LOG).write_text(no_torch.group(1) + "\n")
            plant_parity(out, "bf16", finished=False, last=200)
            process, page = results(out)
            self.assertEqual(process.returncode, 0, process.stderr)
            self.assertNotIn("Traceback", process.stderr)
            self.assertIn("Not measured: bench_trainer did not run (`bench_trainer.log` is missing or empty).", page)
            self.assertIn("GPU time per step by phase: not measured: bench_trainer did not run", page)
            self.assertIn(f"PyTorch peer: not in the table: torch_peer.py stopped before writing its results; last "
                          f"line of `torch_peer.log`: `{no_torch.group(1)}`.", page)
            self.assertNotIn("| precision | tokens/s", page)
            last = progress_lines(600, 200).splitlines()[-1].replace("|", "\\|")
            self.assertIn(f"| bf16 | did not finish; last line of `parity_bf16.log`: `{last}` | | | |", page)
            self.assertIn("| fp8 | did not run (`parity_fp8.log` is missing or empty) | | | |", page)
            self.assertIn("No loss plot", page)
            self.assertNotIn("FP8 less BF16", page)
            self.assertEqual(ragged_rows(page), [])
            plot = run(sys.executable, PLOT_LOSS, "-o", out / rf.LOSS_PLOT, f"BF16={out}/runs/bf16",
                       f"FP8={out}/runs/fp8")
            self.assertNotEqual(plot.returncode, 0)
            self.assertIn("does not exist", plot.stderr)
            self.assertNotIn("Traceback", plot.stderr)

    def test_bench_trainer_stopped(self):
        """bench_trainer stopped by an error after its first lines; the peer's numbers still shown."""
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder)
            error = "out of memory allocating 2.0 GiB (the fp8 run)"
            (out / rf.BENCH_TRAINER_LOG).write_text(bench_trainer_log(("bf16",), error=error))
            plant_peer(out)
            process, page = results(out)
            self.assertEqual(process.returncode, 0, process.stderr)
            self.assertIn("Not measured: bench_trainer stopped before writing its results; last line of "
                          f"`bench_trainer.log`: `bench_trainer: error: {error}`.", page)
            self.assertIn(f"- bench_trainer: error: {error}", page)
            self.assertIn(f"| PyTorch BF16 (torch.compile) | {PEER[1]:.0f} | {PEER[2]:.1f} | {PEER[3]:.1f} | - |", page)
            self.assertEqual(ragged_rows(page), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
