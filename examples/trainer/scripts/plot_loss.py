#!/usr/bin/env python3
"""Plots training and validation loss of one or more fp8_trainer runs into one PNG, with matplotlib.

Usage:
  plot_loss.py -o loss.png runs/fp8 runs/bf16 runs/fp32
  plot_loss.py -o loss.png "FP8=runs/fp8-s1,runs/fp8-s2" "BF16=runs/bf16-s1,runs/bf16-s2"

Each argument is a run directory (holding log.csv) or a log.csv file, optionally as LABEL=PATH; several
comma-separated paths under one label are averaged step by step (e.g. seeds). Validation loss is drawn
as a thick line with points, the training loss (smoothed over --smooth steps) as a thin line of the
same colour. Needs matplotlib (Debian package python3-matplotlib).
"""
import argparse
import csv
import math
import sys
from pathlib import Path


def read_log(path):
    """Returns {step: (train_loss or None, val_loss or None)} from a trainer log.csv."""
    log = Path(path)
    if log.is_dir():
        log = log / "log.csv"
    if not log.is_file():
        sys.exit(f"plot_loss.py: {log} does not exist (give a run directory or its log.csv)")
    rows = {}
    with open(log, newline="") as handle:
        for row in csv.DictReader(handle):
            train = float(row["train_loss"]) if row["train_loss"] else None
            val = float(row["val_loss"]) if row["val_loss"] else None
            rows[int(row["step"])] = (train, val)
    return rows


def average(logs, column):
    """Mean of one column over several logs, at the steps where every log has a value."""
    steps = sorted(set.intersection(*(set(s for s, v in log.items() if v[column] is not None) for log in logs)))
    return [(s, sum(log[s][column] for log in logs) / len(logs)) for s in steps]


def smooth(points, window):
    """Trailing mean over `window` points (the training loss of single batches is noisy)."""
    out, total, queue = [], 0.0, []
    for step, value in points:
        queue.append(value)
        total += value
        if len(queue) > window:
            total -= queue.pop(0)
        out.append((step, total / len(queue)))
    return out


def parse_spec(spec):
    label, _, paths = spec.rpartition("=") if "=" in spec else ("", "", spec)
    paths = [p for p in paths.split(",") if p]
    if not label:
        first = Path(paths[0])
        label = (first.parent.name if first.name == "log.csv" else first.name)
    return label, paths


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="RUN, or LABEL=RUN[,RUN...] to average runs")
    parser.add_argument("-o", "--output", default="loss.png", help="PNG to write (default loss.png)")
    parser.add_argument("--title", default="fp8_trainer: loss per byte", help="plot title")
    parser.add_argument("--smooth", type=int, default=20, help="steps of training loss to average (default 20)")
    parser.add_argument("--baseline", type=float, help="draw a horizontal line, e.g. the unigram baseline")
    parser.add_argument("--xmin", type=float, help="first step shown (default: all)")
    parser.add_argument("--zoom-from", type=float,
                        help="add a second panel showing only the steps from this one on (the end of training, "
                             "where runs differ)")
    parser.add_argument("--no-train", action="store_true", help="validation curves only")
    parser.add_argument("--ymin", type=float, help="lower limit of the loss axis (default: automatic)")
    parser.add_argument("--ymax", type=float, help="upper limit of the loss axis (default: automatic)")
    args = parser.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_loss.py: matplotlib is not installed (apt-get install python3-matplotlib)")

    curves = []  # (label, colour index, smoothed training points, validation points)
    for index, spec in enumerate(args.runs):
        label, paths = parse_spec(spec)
        logs = [read_log(p) for p in paths]
        train = [] if args.no_train else smooth(average(logs, 0), args.smooth)
        curves.append((label, index, train, average(logs, 1)))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    def draw(axis, with_baseline):
        for label, index, train, val in curves:
            colour = colours[index % len(colours)]
            if train:
                axis.plot(*zip(*train), color=colour, linewidth=1, label=f"{label} (train)")
            if val:
                axis.plot(*zip(*val), color=colour, linewidth=2.5, marker="o", markersize=3.5,
                          label=f"{label} (validation)")
        if with_baseline and args.baseline is not None and math.isfinite(args.baseline):
            axis.axhline(args.baseline, color="0.4", linestyle="--", linewidth=1.5, label="unigram baseline")
        axis.set_xlabel("optimizer step")
        axis.set_ylabel("cross-entropy (nats per byte)")
        axis.grid(True, alpha=0.4)

    if args.zoom_from is None:
        figure, axis = plt.subplots(figsize=(11, 6.5))
        draw(axis, True)
        axis.set_title(args.title)
        axis.set_xlim(left=args.xmin)
        axis.set_ylim(args.ymin, args.ymax)
        axis.legend(loc="upper right")
    else:
        # Two panels: the whole run, and its end with the loss axis fitted to what is left (without
        # the baseline, which would stretch it).
        figure, (whole, end) = plt.subplots(1, 2, figsize=(15, 6.5))
        figure.suptitle(args.title)
        draw(whole, True)
        whole.set_title("whole run")
        whole.set_xlim(left=args.xmin)
        whole.set_ylim(args.ymin, args.ymax)
        draw(end, False)
        end.set_title(f"from step {args.zoom_from:g}")
        shown = [v for _, _, train, val in curves for s, v in train + val if s >= args.zoom_from]
        end.set_xlim(left=args.zoom_from)
        if shown:
            margin = 0.05 * (max(shown) - min(shown) or 1.0)
            end.set_ylim(min(shown) - margin, max(shown) + margin)
        end.legend(loc="upper right", fontsize=9)
    figure.tight_layout()
    try:
        figure.savefig(args.output, dpi=100)
    except OSError as error:
        sys.exit(f"plot_loss.py: cannot write {args.output}: {error}")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
