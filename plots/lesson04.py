"""Lesson 04 figures: GB/s per step at the default shape; GB/s vs row length K for every step,
cuDNN and PyTorch (f32 and f16 panels); and the crossover of the single-kernel steps 2-6, which the
dispatcher's thresholds come from. Shapes are written "MxK=16384x4096"."""
import math
import os

import klplot

DEFAULT_SHAPE = "MxK=16384x4096"  # lesson04's default: K = 4096, M = 2^26 / K
DTYPES = ("f32", "f16")
CROSSOVER_STEPS = ("2", "3", "4", "5", "6")


def cols(shape):
    """'MxK=16384x4096' -> 4096 (klplot.shape_value gives the first number, M)."""
    return int(shape.split("=")[1].split("x")[1])


def _of_dtype(rows, dtype):
    """The rows of one dtype, with the copy row (the limit line) kept."""
    return [r for r in rows if r["dtype"] == dtype or r["step"] == "copy"]


def _lines(rows, dtype, steps=None):
    """{(step, name): [(K, GB/s), ...]} over the shapes of the sweep, FAILED rows left out."""
    lines = {}
    for r in klplot.latest(rows):
        if r["dtype"] != dtype or r["step"] == "copy" or klplot.failed(r):
            continue
        if steps is not None and r["step"] not in steps:
            continue
        lines.setdefault((r["step"], r["name"]), []).append((cols(r["shape"]), r["gbps"]))
    return {k: sorted(v) for k, v in lines.items()}


def _axis(ax, dtype, copy, legend="best"):
    if not math.isnan(copy):
        ax.axhline(copy, color="tab:red", linestyle=":", label=f"device copy {copy:.0f} GB/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("K (row length)")
    ax.set_ylabel("GB/s (read + write)")
    ax.set_title(dtype)
    ax.legend(fontsize=7, loc=legend)


def sweep_figure(rows, path):
    """GB/s vs K, one panel per dtype: every step, cuDNN and PyTorch dashed, copy dotted."""
    present = [d for d in DTYPES if len(_lines(rows, d)) > 0]
    if not present or len({r["shape"] for r in rows if r["step"] != "copy"}) < 3:
        return None
    copy = klplot.copy_gbps(rows)
    fig, axes = klplot.plt.subplots(1, len(present), figsize=(7 * len(present), 4.8), squeeze=False)
    for ax, dtype in zip(axes[0], present):
        for (step, name), pts in sorted(_lines(rows, dtype).items()):
            reference = step in ("lib", "pytorch")
            ax.plot(*zip(*pts), "--" if reference else "-", marker="o", markersize=3, label=f"{step}: {name}")
        _axis(ax, dtype, copy)
        ax.set_yscale("log")
    fig.suptitle(f"Lesson 04: softmax of [2^26 / K, K], GB/s vs K, {rows[0]['gpu']}")
    return klplot.save(fig, path)


def winners(rows, dtype, steps=CROSSOVER_STEPS):
    """[(K, step)]: the fastest of `steps` at each K of the sweep."""
    best = {}
    for (step, _), pts in _lines(rows, dtype, steps).items():
        for k, gbps in pts:
            if k not in best or gbps > best[k][1]:
                best[k] = (step, gbps)
    return [(k, best[k][0]) for k in sorted(best)]


def crossover_figure(rows, path):
    """Steps 2-6 only, linear GB/s, and under each panel which step wins at each K."""
    present = [d for d in DTYPES if len(_lines(rows, d, CROSSOVER_STEPS)) > 0]
    if not present:
        return None
    copy = klplot.copy_gbps(rows)
    fig, axes = klplot.plt.subplots(1, len(present), figsize=(7 * len(present), 4.8), squeeze=False)
    for ax, dtype in zip(axes[0], present):
        for (step, name), pts in sorted(_lines(rows, dtype, CROSSOVER_STEPS).items()):
            ax.plot(*zip(*pts), "-", marker="o", markersize=3, label=f"{step}: {name}")
        for k, step in winners(rows, dtype):
            ax.annotate(step, (k, 0), xycoords=("data", "axes fraction"), xytext=(0, 3), textcoords="offset points",
                        ha="center", fontsize=7)
        _axis(ax, dtype, copy, legend="center left")
        ax.set_ylim(bottom=0)
    fig.suptitle("Lesson 04: where each step wins (the digit at the bottom is the fastest step at that K)")
    return klplot.save(fig, path)


def draw(rows, out_dir):
    dtype = next((d for d in DTYPES if any(r["dtype"] == d and r["shape"] == DEFAULT_SHAPE for r in rows)), "f32")
    paths = [klplot.bar_chart(_of_dtype(rows, dtype), DEFAULT_SHAPE, f"Lesson 04: softmax of 16384 x 4096 {dtype}",
                              os.path.join(out_dir, "lesson04.png")),
             sweep_figure(rows, os.path.join(out_dir, "lesson04_sweep.png")),
             crossover_figure(rows, os.path.join(out_dir, "lesson04_crossover.png"))]
    return [p for p in paths if p]
