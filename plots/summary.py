"""summary.py DIR: one line per lesson from DIR/lessonNN.csv: the best step at the lesson's default
shape, its % of the limit, and how it compares with step 1, the library and PyTorch."""
import glob
import importlib
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import klplot  # noqa: E402


def summarize(lesson, rows, shape, dtype=None):
    rows = [r for r in klplot.latest(rows) if r["shape"] == shape and dtype in (None, r["dtype"])]
    if not rows:
        return f"{lesson}: no rows at {shape}"
    ok = [r for r in rows if not klplot.failed(r)]
    ours = [r for r in ok if r["step"].isdigit()]  # the ladder's steps (not lib, pytorch, copy or extras)
    failed = [r["name"] for r in rows if klplot.failed(r)]
    if not ours:
        return f"{lesson}: no step passed its check at {shape}"
    best = min(ours, key=lambda r: r["ms_median"])
    rate = f'{best["gbps"]:.0f} GB/s' if not math.isnan(best["gbps"]) else f'{best["tflops"]:.1f} TFLOP/s'
    parts = [f"{lesson} [{shape}]: best step {best['step']} {best['name']} {best['ms_median']:.4f} ms, {rate}, "
             f"{best['pct_of_limit']:.1f}% of limit"]
    first = [r for r in ours if r["step"] == "1"]
    if first:
        parts.append(f"{first[0]['ms_median'] / best['ms_median']:.0f}x step 1")
    for step, label in (("lib", "library"), ("pytorch", "PyTorch")):
        ref = [r for r in ok if r["step"] == step]
        if ref:
            parts.append(f"{ref[0]['ms_median'] / best['ms_median']:.2f}x {label} ({ref[0]['name']})")
    if failed:
        parts.append("FAILED: " + " ".join(failed))
    return ", ".join(parts)


def main(out_dir):
    for csv_path in sorted(glob.glob(os.path.join(out_dir, "lesson[0-9][0-9].csv"))):
        lesson = os.path.basename(csv_path)[:-4]
        module = importlib.import_module(lesson)
        dtype = getattr(module, "DEFAULT_DTYPE", None)  # lessons that sweep several dtypes name theirs
        print(summarize(lesson, klplot.read_rows(csv_path), module.DEFAULT_SHAPE, dtype))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: summary.py RESULTS_DIR")
    main(sys.argv[1])
