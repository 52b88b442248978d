#!/usr/bin/env python3
"""A lesson's dispatcher picks one of its own steps, so it must never be much slower than the best
of them. Reads lesson CSVs (default: every committed results/*/lessonNN.csv) and prints each cell
(GPU, dtype, shape) where the `dispatch` row is more than TOLERANCE slower than the fastest numbered
step of the same cell, and by more than FLOOR_MS (below it the timer cannot tell a wrong pick from the
same kernel measured twice: the cells of a few microseconds); exits 1 if there is one.

A cell listed in KNOWN (its CSV, dtype and shape, with where its NOTES measure it) is reported but not
counted: a step got faster after the dispatcher's rule was set, and moving the rule waits for a run that
re-measures the dispatcher. A KNOWN cell that is no longer slow counts as an error, so that its entry goes.

Rows are compared by their fastest repetition (ms_min), not their median: the dispatch row runs the
kernel of one of the steps, and the question is whether it picked the fastest. A GPU at its power
limit lowers its clock (lesson 08's NOTES), which can move the median of the same kernel between two
rows of one run while their fastest repetitions agree (lesson 09's NOTES show such a cell; they also show a run where
a whole row ran at the lower clock, fastest repetitions too).

usage: python3 plots/check_dispatchers.py [CSV ...]
"""
import csv
import glob
import os
import sys

TOLERANCE = 0.03  # 3 %: above run-to-run noise of the committed sweeps
FLOOR_MS = 0.0005  # and 0.5 us: the resolution cudaEventElapsedTime documents, 3 % of a 17 us kernel


# (CSV relative to the repository, dtype, shape): where the cell is measured and why its rule stays
KNOWN = {
    ("results/h100/lesson05.csv", "f16", "RxVxK=1024x128256x50"):
    "lessons/05_topk_fusion/NOTES.md, the dispatcher's rule for few long rows: past the rule's 528 rows step 5 keeps "
    "16-bit rows only up to somewhere below 1536 (results/h100/lesson05_rows_crossing.csv), by a few per cent",
}


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


def main(argv, known=None):
    known = KNOWN if known is None else known
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = argv[1:] or committed_csvs(root)
    bad = listed = 0
    for path in paths:
        rel = os.path.relpath(os.path.abspath(path), root)
        with open(path, newline="") as f:
            slow = slow_cells(list(csv.DictReader(f)))
        for gpu, dtype, shape, ms, step, best in slow:
            line = (f"{path}: {gpu} {dtype} {shape}: dispatch {ms:.4g} ms (fastest) is {ms / best:.2f}x step {step} "
                    f"({best:.4g} ms)")
            if (rel, dtype, shape) in known:
                print(f"{line} [known: {known[(rel, dtype, shape)]}]")
                listed += 1
            else:
                print(line)
                bad += 1
        still = {(rel, dtype, shape) for _, dtype, shape, *_ in slow}
        for key in sorted(k for k in known if k[0] == rel and k not in still):
            print(f"{path}: {key[1]} {key[2]}: listed in KNOWN but no longer slower than a step: remove the entry")
            bad += 1
    print(f"{len(paths)} CSV files, {bad} cells where the dispatcher is more than {TOLERANCE:.0%} "
          f"(and {FLOOR_MS * 1000:g} us) slower than a step, {listed} known")
    return 1 if bad else 0

if __name__ == "__main__":
    sys.exit(main(sys.argv))
