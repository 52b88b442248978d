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


def read(path):
    rows = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["step"] in ("copy", "pytorch"):
                continue
            key = (r["lesson"], r["step"], r["name"], r["dtype"], r["shape"])
            ms = float(r["ms_median"]) if r["ms_median"] else None
            rows.setdefault(key, []).append(ms)
    return rows


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
        o = min(t for t in old[key] if t is not None) if any(t is not None for t in old[key]) else None
        n = min(t for t in times if t is not None) if any(t is not None for t in times) else None
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
