"""Reading the lessons' CSV (one schema for all lessons) and the bits every figure shares."""
import collections
import csv
import functools
import math
import os
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt  # noqa: E402

NUMBERS = ("ms_median", "ms_min", "ms_max", "gbps", "tflops", "pct_of_limit", "max_rel_err")


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Data-sheet figures by results/ folder: name, HBM GB/s, dense TFLOP/s for FP32 and for f16/bf16 tensor cores.
NOMINAL = {
    "h100": {"name": "H100 SXM5", "bandwidth": 3350, "fp32": 66.9, "tensor": 989.4},
    "h200": {"name": "H200 SXM", "bandwidth": 4800, "fp32": 66.9, "tensor": 989.4},
}


def not_available(row):
    """A row that says why something could not run at all (name "n/a: mlx not installed", written by
    scripts/frameworks.py): not a measurement, and not a FAILED step either."""
    return (row.get("name") or "").startswith("n/a")


def read_rows(path, gpu=None):
    """Rows as dicts; numeric fields become floats (NaN where empty: a FAILED step has no time).
    Rows that say n/a (not_available) are left out. Only one GPU's rows: see one_gpu()."""
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if not not_available(r)]
    for r in rows:
        for k in NUMBERS:
            r[k] = float(r[k]) if r.get(k) not in (None, "") else math.nan
    return one_gpu(rows, path, gpu)


@functools.lru_cache(maxsize=None)
def gpu_slug(name):
    """A GPU's folder under results/ ("NVIDIA H100 80GB HBM3" -> "h100"), as scripts/gpu_slug.sh says."""
    out = subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu_slug.sh"), name], capture_output=True, text=True)
    return out.stdout.strip()


def one_gpu(rows, path, gpu=None):
    """The rows of one GPU, so that a figure or table never mixes GPUs. Where the file holds rows of
    several GPUs: those of `gpu` (its name) when given, else those of the GPU the file's folder is for
    (results/h100/ -> the H100's), else those of the last row's GPU (the latest run); a note on stderr
    says which rows were left out."""
    names = [r.get("gpu") or "" for r in rows]
    if len(set(names)) <= 1 and gpu in (None, *names):
        return rows
    if gpu is None:
        folder = os.path.basename(os.path.dirname(os.path.abspath(path)))
        gpu = next((n for n in dict.fromkeys(names) if gpu_slug(n) == folder), names[-1])
    left_out = collections.Counter(n for n in names if n != gpu)
    print(f"{path}: rows of {len(left_out) + (gpu in names)} GPUs; using the {names.count(gpu)} rows of {gpu}, "
          "leaving out " + ", ".join(f"{k} rows of {n or '(no gpu)'}" for n, k in left_out.items()), file=sys.stderr)
    return [r for r in rows if (r.get("gpu") or "") == gpu]


def failed(row):
    return math.isnan(row["ms_median"])


def copy_gbps(rows):
    """The measured device-to-device copy bandwidth (the last one written)."""
    copies = [r["gbps"] for r in rows if r["step"] == "copy"]
    return copies[-1] if copies else math.nan


def compute_limits(rows):
    """(dtype, TFLOP/s) of each row whose % of limit is of a compute rate (TFLOP/s and no GB/s): the rate
    that row was measured against, rate · 100 / % (the FP32 peak for f32, the tensor cores' otherwise)."""
    return [(r["dtype"], r["tflops"] * 100 / r["pct_of_limit"]) for r in rows
            if r["step"] != "copy" and r["tflops"] > 0 and r["pct_of_limit"] > 0 and not r["gbps"] > 0]


def shape_value(shape):
    """'n=67108864' -> 67108864 (the first number in a shape)."""
    return int(shape.split("=")[1].split("x")[0].split(";")[0])


def significant(v, digits):
    """v to `digits` significant digits in plain notation: (2943.63, 3) -> '2940', (0.068256, 2) -> '0.068'."""
    if v == 0 or not math.isfinite(v):
        return f"{v:.{max(digits - 1, 0)}f}"
    decimals = digits - 1 - math.floor(math.log10(abs(v)))
    r = round(v, decimals)
    if r != 0 and math.floor(math.log10(abs(r))) > math.floor(math.log10(abs(v))):  # 9.96 -> 10, one digit fewer
        decimals -= 1
        r = round(v, decimals)
    return f"{r:.{max(decimals, 0)}f}"


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


def _is_reference(step):
    return step in ("lib", "pytorch")


def bar_chart(rows, shape, title, path, rate="gbps", copy_label="device copy"):
    """One bar per step at `shape` (log y), reference steps in grey, FAILED steps labelled, and the
    measured copy bandwidth as a dashed line, named `copy_label` (lesson 10's copy row is the peer
    copy). Returns the path, or None when no row has that shape."""
    rows = latest(rows)
    copy = copy_gbps(rows)
    at = [r for r in rows if r["shape"] == shape and r["step"] != "copy"]
    if not at:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    values = [0 if failed(r) else r[rate] for r in at]
    ax.bar(range(len(at)), [max(v, 1e-3) for v in values],
           color=["tab:gray" if _is_reference(r["step"]) else "tab:blue" for r in at])
    for i, (r, v) in enumerate(zip(at, values)):
        ax.text(i, max(v, 1e-3) * 1.15, "FAILED" if failed(r) else (f"{v:.0f}" if v >= 100 else f"{v:.3g}"), ha="center", fontsize=8)
    if rate == "gbps" and not math.isnan(copy):
        ax.axhline(copy, color="tab:red", linestyle="--", label=f"{copy_label} {copy:.0f} GB/s")
        ax.legend(loc="lower right")
    ax.set_yscale("log")
    ax.set_ylim(top=max(values + [copy if not math.isnan(copy) else 0]) * 4)  # room for the labels
    ax.set_xticks(range(len(at)), [f'{r["step"]}: {r["name"]}' for r in at], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("GB/s (fewest bytes / time)" if rate == "gbps" else "TFLOP/s")
    ax.set_title(f"{title}, {at[0]['gpu']}")
    return save(fig, path)


def sweep_chart(rows, xlabel, title, path, rate="gbps", steps=None, copy_label="device copy"):
    """Rate vs the shape's first number (log-log), one line per step (dashed for library and
    PyTorch), the copy bandwidth dotted and named `copy_label`. `steps` limits the lines to those step
    labels. A row timed on fewer values and scaled (its name marked "[scaled") is left out: only sizes
    a step ran at."""
    copy = copy_gbps(rows)
    rows = [r for r in latest(rows) if r["step"] != "copy" and "[scaled" not in r["name"]]
    keys = sorted({(r["step"], r["name"]) for r in rows if steps is None or r["step"] in steps})
    if len({r["shape"] for r in rows}) < 3:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for key in keys:
        pts = sorted((shape_value(r["shape"]), r[rate]) for r in rows
                     if (r["step"], r["name"]) == key and not failed(r))
        if pts:
            ax.plot(*zip(*pts), "--" if _is_reference(key[0]) else "-", marker="o", markersize=3,
                    label=f"{key[0]}: {key[1]}")
    if rate == "gbps" and not math.isnan(copy):
        ax.axhline(copy, color="tab:red", linestyle=":", label=copy_label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("GB/s" if rate == "gbps" else "TFLOP/s")
    ax.set_title(title)
    ax.legend(fontsize=7)
    return save(fig, path)
