#!/usr/bin/env python3
"""Plots training and validation loss of one or more fp8_trainer runs into one PNG, via gnuplot.

Usage:
  plot_loss.py -o loss.png runs/fp8 runs/bf16 runs/fp32
  plot_loss.py -o loss.png "FP8=runs/fp8-s1,runs/fp8-s2" "BF16=runs/bf16-s1,runs/bf16-s2"

Each argument is a run directory (holding log.csv) or a log.csv file, optionally as LABEL=PATH; several
comma-separated paths under one label are averaged step by step (e.g. seeds). Validation loss is drawn
as a thick line with points, the training loss (smoothed over --smooth steps) as a thin line of the
same colour. Needs only Python's standard library and gnuplot (Debian package gnuplot-nox).
"""
import argparse
import csv
import math
import shutil
import subprocess
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
    if shutil.which("gnuplot") is None:
        sys.exit("plot_loss.py: gnuplot is not installed (apt-get install gnuplot-nox)")

    blocks, plots = [], []
    for index, spec in enumerate(args.runs):
        label, paths = parse_spec(spec)
        logs = [read_log(p) for p in paths]
        train = smooth(average(logs, 0), args.smooth)
        val = average(logs, 1)
        color = index + 1
        name = label.replace('"', "'")
        if train and not args.no_train:
            blocks.append(f"$train{index} << EOD\n" + "\n".join(f"{s} {v:.6f}" for s, v in train) + "\nEOD\n")
            plots.append(f'$train{index} with lines lc {color} lw 1 dt 1 title "{name} (train)"')
        if val:
            blocks.append(f"$val{index} << EOD\n" + "\n".join(f"{s} {v:.6f}" for s, v in val) + "\nEOD\n")
            plots.append(f'$val{index} with linespoints lc {color} lw 2.5 pt 7 ps 0.6 title "{name} (validation)"')
    zoom_command = "plot " + ", \\\n     ".join(plots)  # the baseline would stretch the zoomed axis
    if args.baseline is not None and math.isfinite(args.baseline):
        plots.append(f'{args.baseline} with lines lc rgb "gray40" dt 2 lw 1.5 title "unigram baseline"')
    plot_command = "plot " + ", \\\n     ".join(plots)
    settings = [
        "set xlabel 'optimizer step'",
        "set ylabel 'cross-entropy (nats per byte)'",
        "set grid",
    ]
    xrange = f"set xrange [{'*' if args.xmin is None else args.xmin}:*]"
    yrange = f"set yrange [{'*' if args.ymin is None else args.ymin}:{'*' if args.ymax is None else args.ymax}]"
    if args.zoom_from is None:
        body = settings + [f"set title \"{args.title}\"", "set key top right", xrange, yrange, plot_command]
        size = "1100,650"
    else:
        # Two panels: the whole run, and its end with the loss axis fitted to what is left.
        body = [f"set multiplot layout 1,2 title \"{args.title}\""] + settings + [
            "set title 'whole run'", "unset key", xrange, yrange, plot_command,
            f"set title 'from step {args.zoom_from:g}'", "set key top right font ',9'",
            f"set xrange [{args.zoom_from}:*]", "set yrange [*:*]", zoom_command, "unset multiplot"]
        size = "1500,650"
    script = "".join(blocks) + "\n".join([
        f"set terminal pngcairo size {size} noenhanced font 'DejaVu Sans,11'",
        f"set output '{args.output}'",
        *body,
        "",
    ])
    result = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    if result.returncode != 0:
        sys.exit(f"plot_loss.py: gnuplot failed:\n{result.stderr}")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
