"""summary.py DIR: one line per lesson from DIR/lessonNN.csv: the best step at the lesson's default
shape and dtype (the first of the lesson's l.dtypes, as the executable's default run), its % of the
limit, and how it compares with step 1, the library and PyTorch in that same dtype. Ratios have two
significant digits."""
import collections
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
    """The dtype of lessonNN's default run: the first of `l.dtypes = {...}` where its kl::Lesson is made
    (lessonNN::lesson(), in a file of lessons/NN_*/), else "f32" (common/ladder.hpp's default)."""
    folders = glob.glob(os.path.join(LESSONS, lesson[len("lesson"):] + "_*"))
    if len(folders) != 1:
        sys.exit(f"summary: no single lessons/{lesson[len('lesson'):]}_*/ for {lesson}")
    for path in sorted(glob.glob(os.path.join(folders[0], "*.cu*"))):
        with open(path) as f:
            m = re.search(r'\.dtypes\s*=\s*\{\s*"(\w+)"', f.read())
        if m:
            return m.group(1)
    return "f32"


def ratio(x):
    """A ratio to two significant digits: 1.25 -> "1.2", 0.984 -> "0.98", 52.3 -> "52", 12632 -> "13000"."""
    return klplot.significant(x, 2) if math.isfinite(x) and x > 0 else f"{x:g}"


def default_shape(lesson):
    """The shape of lessonNN's default run: plots/lessonNN.py's DEFAULT_SHAPE."""
    return importlib.import_module(lesson).DEFAULT_SHAPE


def lessons(out_dir):
    """(lesson, CSV path) for each DIR/lessonNN.csv, in lesson order."""
    return [(os.path.basename(p)[:-4], p) for p in sorted(glob.glob(os.path.join(out_dir, "lesson[0-9][0-9].csv")))]


Standing = collections.namedtuple("Standing", "best first lib pytorch failed problem")
Standing.__doc__ = """Where a lesson stands at one shape and dtype: its best step (the fastest of the ladder's
numbered steps that passed its check), step 1, the library row and PyTorch's row (best_pytorch; each None
where absent or failed), the names of the steps that failed there, and `problem` (a sentence, with best None) where no
step can be named."""


def standing(rows, shape, dtype):
    """The Standing of `rows` at `shape` and `dtype` only: best step, step 1, library and PyTorch are
    compared in one dtype (summarize and readme_tables' ladder both use it)."""
    rows = [r for r in klplot.latest(rows) if r["shape"] == shape and r["dtype"] == dtype]
    if not rows:
        return Standing(None, None, None, None, [], f"no {dtype} rows at {shape}")
    ok = [r for r in rows if not klplot.failed(r)]
    ours = [r for r in ok if r["step"].isdigit()]  # the ladder's steps (not lib, pytorch, copy or extras)
    failed = [r["name"] for r in rows if klplot.failed(r)]
    if not ours:
        return Standing(None, None, None, None, failed, f"no step passed its check at {shape} {dtype}")
    first_of = lambda step: next((r for r in ok if r["step"] == step), None)  # noqa: E731
    return Standing(min(ours, key=lambda r: r["ms_median"]), first_of("1"), first_of("lib"), best_pytorch(ok),
                    failed, None)


def best_pytorch(rows):
    """PyTorch's row among `rows` (all passed, one shape and dtype): the `pytorch` row, PyTorch's equivalent
    of the lesson's problem, where there is one; else the fastest `pytorch_*` row, where PyTorch offers the
    problem through several backends (lessons 07 and 09: SDPA's FLASH, CUDNN, EFFICIENT, MATH); else None.
    (A `pytorch_*` row beside a `pytorch` row is another problem, e.g. lesson 05's torch.topk alone.)"""
    plain = next((r for r in rows if r["step"] == "pytorch"), None)
    if plain is not None:
        return plain
    backends = [r for r in rows if r["step"].startswith("pytorch_")]
    return min(backends, key=lambda r: r["ms_median"]) if backends else None


def rate(row):
    """'2213 GB/s' for a memory-bound row, '46.2 TFLOP/s' for a compute-bound one."""
    return f'{row["gbps"]:.0f} GB/s' if not math.isnan(row["gbps"]) else f'{row["tflops"]:.1f} TFLOP/s'


def summarize(lesson, rows, shape, dtype=None):
    """One line for `lesson` from its rows at `shape` and `dtype` only (default: the lesson's default
    dtype): its best step, step 1, the library and PyTorch are compared in the same dtype."""
    dtype = dtype or default_dtype(lesson)
    s = standing(rows, shape, dtype)
    if s.best is None:
        return f"{lesson}: {s.problem}"
    best = s.best
    parts = [f"{lesson} [{shape}]: best step {best['step']} {best['name']} {best['ms_median']:.4f} ms ({dtype}), "
             f"{rate(best)}, {best['pct_of_limit']:.1f}% of limit"]
    if s.first:
        parts.append(f"{ratio(s.first['ms_median'] / best['ms_median'])}x step 1")
    for ref, label in ((s.lib, "library"), (s.pytorch, "PyTorch")):
        if ref:
            parts.append(f"{ratio(ref['ms_median'] / best['ms_median'])}x {label} ({ref['name']})")
    if s.failed:
        parts.append("FAILED: " + " ".join(s.failed))
    return ", ".join(parts)


def main(out_dir):
    for lesson, csv_path in lessons(out_dir):
        print(summarize(lesson, klplot.read_rows(csv_path), default_shape(lesson), default_dtype(lesson)))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: summary.py RESULTS_DIR")
    main(sys.argv[1])
