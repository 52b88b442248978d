#!/usr/bin/env python3
"""A lesson's dispatcher picks one of its own steps, so it must never be much slower than the best
of them. Reads lesson CSVs (default: every committed results/*/lessonNN.csv) and prints each cell
(GPU, dtype, shape) where the `dispatch` row is more than TOLERANCE slower than the fastest numbered
step of the same cell, and by more than FLOOR_MS (below it the timer cannot tell a wrong pick from the
same kernel measured twice: the cells of a few microseconds); exits 1 if there is one.

Rows are compared by their fastest repetition (ms_min), not their median: the dispatch row runs the
kernel of one of the steps, and the question is whether it picked the fastest. A GPU at its power
limit lowers its clock (lesson 08's NOTES), which can move the median of the same kernel between two
rows of one run while their fastest repetitions agree (lesson 09's NOTES show such a cell).

usage: python3 plots/check_dispatchers.py [CSV ...]
"""
import csv
import glob
import os
import sys

TOLERANCE = 0.03  # 3 %: above run-to-run noise of the committed sweeps
FLOOR_MS = 0.0005  # and 0.5 us: the resolution cudaEventElapsedTime documents, 3 % of a 17 us kernel


def slow_cells(rows, tolerance=TOLERANCE):
    """(gpu, dtype, shape, dispatch ms, best step, best ms) for every cell whose dispatcher is more
    than `tolerance` slower than its fastest step. The last row of a (cell, step) wins (the latest run)."""
    cells = {}
    for r in rows:
        if not r.get("ms_min"):
            continue  # a FAILED or n/a row carries no time
        cell = (r.get("gpu", ""), r["dtype"], r["shape"])
        cells.setdefault(cell, {})[(r["step"], r["name"])] = float(r["ms_min"])
    slow = []
    for cell, steps in sorted(cells.items()):
        dispatch = [ms for (step, name), ms in steps.items() if name == "dispatch"]
        others = [(ms, step) for (step, name), ms in steps.items() if step.isdigit() and name != "dispatch"]
        if not dispatch or not others:
            continue
        best_ms, best_step = min(others)
        if dispatch[0] > best_ms * (1 + tolerance) and dispatch[0] - best_ms > FLOOR_MS:
            slow.append(cell + (dispatch[0], best_step, best_ms))
    return slow


def committed_csvs(root):
    return sorted(glob.glob(os.path.join(root, "results", "*", "lesson[0-9][0-9].csv")))


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = argv[1:] or committed_csvs(root)
    bad = 0
    for path in paths:
        with open(path, newline="") as f:
            for gpu, dtype, shape, ms, step, best in slow_cells(list(csv.DictReader(f))):
                print(f"{path}: {gpu} {dtype} {shape}: dispatch {ms:.4g} ms (fastest) is {ms / best:.2f}x step {step} ({best:.4g} ms)")
                bad += 1
    print(f"{len(paths)} CSV files, {bad} cells where the dispatcher is more than {TOLERANCE:.0%} "
          f"(and {FLOOR_MS * 1000:g} us) slower than a step")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
