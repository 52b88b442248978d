"""summary.py DIR: one line per lesson from DIR/lessonNN.csv: the best step at the lesson's default
shape and dtype (the first of main.cu's lesson.dtypes, as the executable's default run), its % of the
limit, and how it compares with step 1, the library and PyTorch in that same dtype. Ratios have two
significant digits."""
import glob
import importlib
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import klplot  # noqa: E402

LESSONS = os.path.join(klplot.ROOT, "lessons")


def default_dtype(lesson):
    """The dtype of lessonNN's default run: the first of `lesson.dtypes = {...}` in its main.cu, else
    "f32" (common/ladder.hpp's default)."""
    mains = glob.glob(os.path.join(LESSONS, lesson[len("lesson"):] + "_*", "main.cu"))
    if len(mains) != 1:
        sys.exit(f"summary: no single lessons/{lesson[len('lesson'):]}_*/main.cu for {lesson}")
    with open(mains[0]) as f:
        m = re.search(r'\.dtypes\s*=\s*\{\s*"(\w+)"', f.read())
    return m.group(1) if m else "f32"


def ratio(x):
    """A ratio to two significant digits: 1.25 -> "1.2", 0.984 -> "0.98", 52.3 -> "52", 12632 -> "13000"."""
    if not math.isfinite(x) or x <= 0:
        return f"{x:g}"
    decimals = 1 - math.floor(math.log10(x))
    x = round(x, decimals)
    decimals = 1 - math.floor(math.log10(x))  # 9.96 rounds to 10.0: one decimal fewer
    return f"{x:.{max(decimals, 0)}f}"


def summarize(lesson, rows, shape, dtype=None):
    """One line for `lesson` from its rows at `shape` and `dtype` only (default: the lesson's default
    dtype): its best step, step 1, the library and PyTorch are compared in the same dtype."""
    dtype = dtype or default_dtype(lesson)
    rows = [r for r in klplot.latest(rows) if r["shape"] == shape and r["dtype"] == dtype]
    if not rows:
        return f"{lesson}: no {dtype} rows at {shape}"
    ok = [r for r in rows if not klplot.failed(r)]
    ours = [r for r in ok if r["step"].isdigit()]  # the ladder's steps (not lib, pytorch, copy or extras)
    failed = [r["name"] for r in rows if klplot.failed(r)]
    if not ours:
        return f"{lesson}: no step passed its check at {shape} {dtype}"
    best = min(ours, key=lambda r: r["ms_median"])
    rate = f'{best["gbps"]:.0f} GB/s' if not math.isnan(best["gbps"]) else f'{best["tflops"]:.1f} TFLOP/s'
    parts = [f"{lesson} [{shape}]: best step {best['step']} {best['name']} {best['ms_median']:.4f} ms ({dtype}), "
             f"{rate}, {best['pct_of_limit']:.1f}% of limit"]
    first = [r for r in ours if r["step"] == "1"]
    if first:
        parts.append(f"{ratio(first[0]['ms_median'] / best['ms_median'])}x step 1")
    for step, label in (("lib", "library"), ("pytorch", "PyTorch")):
        ref = [r for r in ok if r["step"] == step]
        if ref:
            parts.append(f"{ratio(ref[0]['ms_median'] / best['ms_median'])}x {label} ({ref[0]['name']})")
    if failed:
        parts.append("FAILED: " + " ".join(failed))
    return ", ".join(parts)


def main(out_dir):
    for csv_path in sorted(glob.glob(os.path.join(out_dir, "lesson[0-9][0-9].csv"))):
        lesson = os.path.basename(csv_path)[:-4]
        module = importlib.import_module(lesson)
        print(summarize(lesson, klplot.read_rows(csv_path), module.DEFAULT_SHAPE, default_dtype(lesson)))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: summary.py RESULTS_DIR")
    main(sys.argv[1])
