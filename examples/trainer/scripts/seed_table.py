"""Configurations of fp8_trainer compared by their final validation loss over several seeds: the
runs' final losses, the Markdown table (mean ± std, min – max, the difference from the reference
configuration's mean with the aim marked), the per-seed list and the plot of the mean curves.

One copy of that logic for both pages that show it: results_table.py (the CPU trainer's
docs/trainer_results.md) and bench/cuda/trainer_results.py (the loss parity of the GPU tables). A
configuration may have seeds that did not finish (a GPU run cut short): its statistics are over the
seeds that did, and the table says how many those were where the caller asks. Standard library only;
the plot runs plot_loss.py (matplotlib).
"""
import csv
import re
import statistics
import subprocess
import sys
from pathlib import Path

PLOT_LOSS = Path(__file__).with_name("plot_loss.py")


def read_log(path):
    """The rows of a trainer log.csv as dictionaries."""
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def final_row(log_path, steps):
    """The last row of a finished run (step == steps, with a validation loss), or None: no log, or a
    run that stopped early (its last line may be cut anywhere when it was killed)."""
    log_path = Path(log_path)
    if not log_path.is_file():
        return None
    rows = read_log(log_path)
    try:
        if not rows or int(rows[-1]["step"]) != int(steps) or not rows[-1]["val_loss"]:
            return None
        float(rows[-1]["val_loss"])
    except (KeyError, TypeError, ValueError):
        return None
    return rows[-1]


def unigram_baseline(text):
    """The unigram baseline (nats/byte) in a trainer's output (its data: and final: lines), or None."""
    found = re.search(r"unigram baseline (\d+(?:\.\d+)?)", text)
    return float(found.group(1)) if found else None


class seed_results:
    """One configuration's runs: its label, its trainer switches and each seed's final validation
    loss (None: the seed's run did not finish)."""

    def __init__(self, label, args, losses):
        self.label, self.args, self.losses = label, args, dict(losses)

    @property
    def finished(self):
        """The final losses of the seeds that finished, in seed order."""
        return [loss for loss in self.losses.values() if loss is not None]

    @property
    def mean(self):
        return statistics.mean(self.finished) if self.finished else None

    @property
    def stdev(self):
        """The sample standard deviation over the finished seeds (0 for one)."""
        return statistics.stdev(self.finished) if len(self.finished) > 1 else 0.0


def relative(value, reference):
    """value against reference as a fraction (+0.01: 1% higher), or None where either is missing."""
    if value is None or reference is None or reference == 0:
        return None
    return (value - reference) / reference


def table(results, reference, tolerance, judged, extra=()):
    """The Markdown table of `results` ({name: seed_results}, in row order) against the mean of
    results[reference]: one row per configuration. A ✓ or ✗ marks whether a configuration named in
    `judged` is within `tolerance` (relative) of the reference mean. `extra`: further columns, as
    (header, function(name, seed_results) -> cell text)."""
    ref = results[reference]
    headers = ["configuration", "trainer switches", "validation loss, mean ± std", "min – max",
               f"vs {ref.label} mean", *(header for header, _ in extra)]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for name, r in results.items():
        if r.finished:
            spread = f"{r.mean:.4f} ± {r.stdev:.4f}"
            extremes = f"{min(r.finished):.4f} – {max(r.finished):.4f}"
        else:
            spread = extremes = "-"
        difference = relative(r.mean, ref.mean)
        if difference is None:
            versus = "-"
        else:
            verdict = (" ✓" if abs(difference) <= tolerance else " ✗") if name in judged else ""
            versus = f"{difference * 100:+.2f}%{verdict}"
        cells = [r.label, f"`{r.args}`", spread, extremes, versus, *(cell(name, r) for _, cell in extra)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def verdict_legend(tolerance, reference_label, criterion):
    """The line under the table that says what ✓ and ✗ mean."""
    return f"✓: within {tolerance * 100:g}% of the {reference_label} mean ({criterion}), ✗: not."


def per_seed_lines(results, missing=None):
    """A list item per configuration with each seed's final loss; a seed that did not finish is
    shown as missing(name, seed) (default: "seed N did not finish")."""
    lines = []
    for name, r in results.items():
        values = []
        for seed, loss in r.losses.items():
            if loss is not None:
                values.append(f"{loss:.4f}")
            else:
                values.append(missing(name, seed) if missing else f"seed {seed} did not finish")
        lines.append(f"- {r.label}: " + ", ".join(values))
    return lines


def plot_mean_curves(output, curves, title, baseline=None, zoom_from=None, extra=()):
    """Draws the validation curves of each configuration, averaged step by step over its runs, with
    plot_loss.py. curves: [(label, [run folders])] (configurations without runs are left out).
    Returns the finished subprocess (its returncode and stderr say whether the plot was drawn)."""
    specs = [f"{label}=" + ",".join(str(folder) for folder in folders) for label, folders in curves if folders]
    command = [sys.executable, str(PLOT_LOSS), "-o", str(output), "--title", title, "--no-train"]
    if baseline is not None:
        command += ["--baseline", str(baseline)]
    if zoom_from is not None:
        command += ["--zoom-from", str(zoom_from)]
    return subprocess.run([*command, *extra, *specs], capture_output=True, text=True, check=False)
