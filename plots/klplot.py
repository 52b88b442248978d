"""Reading the lessons' CSV (one schema for all lessons) and the bits every figure shares."""
import csv
import math

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt  # noqa: E402

NUMBERS = ("ms_median", "ms_min", "ms_max", "gbps", "tflops", "pct_of_limit", "max_rel_err")


def read_rows(path):
    """Rows as dicts; numeric fields become floats (NaN where empty: a FAILED step has no time)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in NUMBERS:
            r[k] = float(r[k]) if r.get(k) not in (None, "") else math.nan
    return rows


def failed(row):
    return math.isnan(row["ms_median"])


def copy_gbps(rows):
    """The measured device-to-device copy bandwidth (the last one written)."""
    copies = [r["gbps"] for r in rows if r["step"] == "copy"]
    return copies[-1] if copies else math.nan


def shape_value(shape):
    """'n=67108864' -> 67108864 (the first number in a shape)."""
    return int(shape.split("=")[1].split("x")[0].split(";")[0])


def latest(rows):
    """Keeps the last row written for each (step, name, dtype, shape): a rerun replaces a run."""
    seen = {}
    for r in rows:
        seen[(r["step"], r["name"], r["dtype"], r["shape"])] = r
    return list(seen.values())


def save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
