#!/usr/bin/env python3
"""The last lines of scripts/ab.sh: one line per row timed by both builds.

    scripts/ab_summary.py BASE.csv NEW.csv
    scripts/ab_summary.py --self-test

BASE.csv and NEW.csv hold every round's rows (the lessons' CSV schema). Rows are matched on (lesson, step,
name, dtype, shape) as scripts/csv_compare.py matches them, the copy rows left out; a row's time in a build is the mean of its medians over the rounds.
Each line: dtype, shape, step and name, the base and new means (ms), the rounds' medians, and base / new
(above 1: the new build is faster). A row FAILED in any round (no median) shows FAILED. Exit 0; 2 on bad
usage or a file that cannot be read.
"""
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import csv_compare  # noqa: E402


def medians(path):
    """(lesson, step, name, dtype, shape) -> the medians (ms) of its rows in file order, None where it
    FAILED (csv_compare's matching, PyTorch's rows kept)."""
    with open(path, newline="") as f:
        return csv_compare.index(csv.DictReader(f), skip=("copy",))


def lines(base, new):
    """The summary lines of two medians() results, in the base file's order, then rows only one build has."""
    keys = list(base) + [k for k in new if k not in base]
    for key in keys:
        _, step, name, dtype, shape = key
        head = f"{dtype:5} {shape:24} {step:>4} {name:24}"
        b, n = base.get(key), new.get(key)
        if b is None or n is None:
            yield f"{head} only in the {'new' if b is None else 'base'} build"
            continue
        if None in b or None in n:
            yield f"{head} FAILED in the {'base' if None in b else 'new'} build"
            continue
        mb, mn = sum(b) / len(b), sum(n) / len(n)
        rounds = " ".join(f"{x:.4g}" for x in b) + " | " + " ".join(f"{x:.4g}" for x in n)
        yield f"{head} base {mb:.4g} ms  new {mn:.4g} ms  base/new {mb / mn:.3f}  (rounds: {rounds})"


def self_test():
    import tempfile

    header = "lesson,step,name,dtype,shape,ms_median,ms_min,ms_max,gbps,tflops,pct_of_limit,max_rel_err,gpu\n"
    with tempfile.TemporaryDirectory() as d:
        base, new = os.path.join(d, "b.csv"), os.path.join(d, "n.csv")
        with open(base, "w") as f:
            f.write(header + "04,7,dispatch,f16,MxK=2x8,0.2,,,,,,,G\n04,copy,copy,u8,bytes=1,0.1,,,,,,,G\n"
                    "04,7,dispatch,f16,MxK=2x8,0.4,,,,,,,G\n04,3,cached,f32,MxK=2x8,,,,,,,,G\n")
        with open(new, "w") as f:
            f.write(header + "04,7,dispatch,f16,MxK=2x8,0.1,,,,,,,G\n04,7,dispatch,f16,MxK=2x8,0.2,,,,,,,G\n"
                    "04,3,cached,f32,MxK=2x8,0.5,,,,,,,G\n04,5,online,f32,MxK=2x8,0.5,,,,,,,G\n")
        out = list(lines(medians(base), medians(new)))
    assert len(out) == 3, out
    assert "base 0.3 ms  new 0.15 ms  base/new 2.000" in out[0], out[0]
    assert "FAILED in the base build" in out[1], out[1]
    assert "only in the new build" in out[2], out[2]
    print("ab_summary: self-test passed")


def main(argv):
    if argv == ["--self-test"]:
        self_test()
        return 0
    if len(argv) != 2:
        print("ab_summary.py: give BASE.csv NEW.csv (or --self-test)", file=sys.stderr)
        return 2
    try:
        base, new = medians(argv[0]), medians(argv[1])
    except (OSError, KeyError, ValueError) as e:
        print(f"ab_summary.py: cannot read the CSVs: {e}", file=sys.stderr)
        return 2
    for line in lines(base, new):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
