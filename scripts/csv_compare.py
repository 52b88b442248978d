#!/usr/bin/env python3
"""Compares the timings of a new run with committed ones, row by row.

    scripts/csv_compare.py OLD.csv NEW.csv [--tolerance 0.05]

Rows are matched on (lesson, step, name, dtype, shape); where OLD holds a row several times (the
default run and a sweep both at the same shape), its best median is used. Prints one line per
matched row: old and new median ms and new/old, flagged where the new one is slower by more than
the tolerance, and a summary. Exit 0 when no matched row is slower than the tolerance, 1 otherwise,
2 on bad usage. A row whose step FAILED (empty time) in NEW counts as slower.
"""
import argparse
import csv
import sys


def index(rows, skip=("copy", "pytorch")):
    """(lesson, step, name, dtype, shape) -> the medians of its rows, in file order (None: FAILED).
    `rows` are csv.DictReader's (strings) or klplot.read_rows' (floats, NaN: FAILED)."""
    out = {}
    for r in rows:
        if r["step"] in skip or (r.get("name") or "").startswith("n/a"):  # n/a: could not run (frameworks.py)
            continue
        key = (r["lesson"], r["step"], r["name"], r["dtype"], r["shape"])
        ms = float(r["ms_median"]) if r["ms_median"] not in ("", None) else None
        out.setdefault(key, []).append(None if ms is None or ms != ms else ms)
    return out


def best(times):
    """The best (smallest) median of a row's runs; None when every run FAILED."""
    ok = [t for t in times if t is not None]
    return min(ok) if ok else None


def read(path):
    with open(path, newline="") as f:
        return index(csv.DictReader(f))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--tolerance", type=float, default=0.05, help="allowed slow-down (0.05 = 5 %%)")
    a = ap.parse_args()
    old, new = read(a.old), read(a.new)
    slower, matched = 0, 0
    print(f"{'lesson':6} {'step':4} {'name':24} {'dtype':5} {'shape':34} {'old ms':>10} {'new ms':>10} {'new/old':>8}")
    for key, times in new.items():
        if key not in old:
            continue
        matched += 1
        o, n = best(old[key]), best(times)
        ratio = n / o if (n and o) else float("nan")
        bad = n is None or (o is not None and ratio > 1 + a.tolerance)
        slower += bad
        print(f"{key[0]:6} {key[1]:4} {key[2]:24} {key[3]:5} {key[4]:34} {o or float('nan'):10.4f} "
              f"{n or float('nan'):10.4f} {ratio:8.3f}{'  SLOWER' if bad else ''}")
    print(f"\n{matched} rows matched, {slower} slower than {a.tolerance:.0%}, "
          f"{len(new) - matched} new rows without a committed match")
    return 1 if slower else 0


if __name__ == "__main__":
    sys.exit(main())
