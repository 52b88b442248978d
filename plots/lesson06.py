"""Lesson 06 figures: TFLOP/s per step at the default shape with the cuBLAS and FP32-peak lines, and
TFLOP/s vs size over the sweep (squares as lines, the awkward shapes as bars of the best step against
cuBLAS). Shapes are written "MxNxK=4096x4096x4096"; `--tune` rows (step "tune") are left out."""
import math
import os

import klplot

DEFAULT_SHAPE = "MxNxK=4096x4096x4096"  # lesson06's default
REFERENCES = ("lib", "pytorch", "pytorch_epilogue")
SWEEP_STEPS = ("3", "4", "5", "6", "7", "lib", "pytorch", "pytorch_epilogue")


def dims(shape):
    """'MxNxK=1000x3000x777' -> (1000, 3000, 777)."""
    m, n, k = shape.split("=")[1].split("x")
    return int(m), int(n), int(k)


def is_square(shape):
    m, n, k = dims(shape)
    return m == n == k and m & (m - 1) == 0


def peak_tflops(rows):
    """The FP32 peak the lesson measured against: tflops / (pct_of_limit / 100) of any timed row."""
    for r in rows:
        if r["step"] not in ("copy", "tune") and not klplot.failed(r) and r["pct_of_limit"] > 0:
            return r["tflops"] / (r["pct_of_limit"] / 100)
    return math.nan


def _rows(rows):
    return [r for r in klplot.latest(rows) if r["step"] not in ("copy", "tune")]


def _order(row):
    step = row["step"]
    return (1, REFERENCES.index(step), row["name"]) if step in REFERENCES else (0, int(step), row["name"])


def steps_figure(rows, path, shape=DEFAULT_SHAPE, title="Lesson 06: SGEMM", peak_label="FP32 peak"):
    """One bar per step at `shape` (library and PyTorch in grey, FAILED labelled), cuBLAS dashed,
    the peak dotted (lesson 08 draws its own with another title and peak)."""
    at = sorted([r for r in _rows(rows) if r["shape"] == shape], key=_order)
    if not at:
        return None
    peak = peak_tflops(rows)
    fig, ax = klplot.plt.subplots(figsize=(9, 4.8))
    values = [0 if klplot.failed(r) else r["tflops"] for r in at]
    ax.bar(range(len(at)), values, color=["tab:gray" if r["step"] in REFERENCES else "tab:blue" for r in at])
    for i, (r, v) in enumerate(zip(at, values)):
        ax.text(i, v + 0.5, "FAILED" if klplot.failed(r) else f"{v:.1f}", ha="center", fontsize=8)
    cublas = next((r for r in at if r["step"] == "lib" and r["name"] == "cublas" and not klplot.failed(r)), None)
    if cublas:
        ax.axhline(cublas["tflops"], color="tab:green", linestyle="--", label=f"cuBLAS {cublas['tflops']:.1f} TFLOP/s")
    if not math.isnan(peak):
        ax.axhline(peak, color="tab:red", linestyle=":", label=f"{peak_label} {peak:.1f} TFLOP/s")
    ax.legend(loc="upper left", fontsize=8)
    ax.set_ylim(0, max(values + [0 if math.isnan(peak) else peak]) * 1.12)
    ax.set_xticks(range(len(at)), [f'{r["step"]}: {r["name"]}' for r in at], rotation=25, ha="right", fontsize=7)
    ax.set_ylabel("TFLOP/s (2MNK / time)")
    m, n, k = dims(shape)
    ax.set_title(f"{title} {m}x{n}x{k}, {at[0]['gpu']}")
    return klplot.save(fig, path)


def sweep_lines(rows, steps=SWEEP_STEPS):
    """{(step, name): [(size, TFLOP/s)]} over the square shapes, FAILED rows left out."""
    lines = {}
    for r in _rows(rows):
        if r["step"] in steps and is_square(r["shape"]) and not klplot.failed(r):
            lines.setdefault((r["step"], r["name"]), []).append((dims(r["shape"])[0], r["tflops"]))
    return {key: sorted(pts) for key, pts in lines.items() if len(pts) >= 2}


def awkward(rows, ours="6"):
    """[(shape, our TFLOP/s, cuBLAS TFLOP/s)] at the shapes that are not power-of-two squares."""
    out = []
    for shape in sorted({r["shape"] for r in _rows(rows) if not is_square(r["shape"])}):
        pick = {r["step"] + r["name"]: r for r in _rows(rows) if r["shape"] == shape and not klplot.failed(r)}
        mine = next((r for key, r in pick.items() if r["step"] == ours), None)
        lib = pick.get("libcublas")
        if mine and lib:
            out.append((shape, mine["tflops"], lib["tflops"]))
    return out


def sweep_axes(lines, peak, peak_label, bars, size):
    """A sweep figure of `size` (width, height), its left panel drawn: TFLOP/s vs M = N = K, one line per
    (step, name) of `lines`, the references dashed, the peak dotted. With `bars`, a narrower right panel
    is left for the other shapes. Returns (figure, right panel or None); lesson 08 draws its sweep so too."""
    fig, axes = klplot.plt.subplots(1, 2 if bars else 1, figsize=size, squeeze=False,
                                    gridspec_kw={"width_ratios": [3, 2]} if bars else None)
    ax = axes[0][0]
    for (step, name), pts in sorted(lines.items()):
        ax.plot(*zip(*pts), "--" if step in REFERENCES else "-", marker="o", markersize=3, label=f"{step}: {name}")
    if not math.isnan(peak):
        ax.axhline(peak, color="tab:red", linestyle=":", label=peak_label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("M = N = K")
    ax.set_ylabel("TFLOP/s")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    ax.set_title("square sizes")
    return fig, axes[0][1] if bars else None


def sweep_figure(rows, path):
    """Left: TFLOP/s vs M = N = K for the later steps, cuBLAS and PyTorch (dashed), peak dotted.
    Right: step 6 against cuBLAS at the awkward shapes."""
    lines = sweep_lines(rows)
    if not lines:
        return None
    odd = awkward(rows)
    fig, bx = sweep_axes(lines, peak_tflops(rows), "FP32 peak", odd, (13 if odd else 8, 4.8))
    if odd:
        xs = range(len(odd))
        bx.bar([x - 0.2 for x in xs], [o[1] for o in odd], width=0.4, label="step 6: warp_tiled", color="tab:blue")
        bx.bar([x + 0.2 for x in xs], [o[2] for o in odd], width=0.4, label="cuBLAS", color="tab:gray")
        for x, (_, ours, lib) in zip(xs, odd):
            bx.text(x, max(ours, lib) + 0.5, f"{ours / lib:.2f}x", ha="center", fontsize=8)
        bx.set_xticks(list(xs), [o[0].split("=")[1] for o in odd], fontsize=8)
        bx.set_ylabel("TFLOP/s")
        bx.legend(fontsize=7, loc="lower right")
        bx.set_title("awkward shapes: step 6 vs cuBLAS")
    fig.suptitle(f"Lesson 06: SGEMM sweep, {rows[0]['gpu']}")
    return klplot.save(fig, path)


def draw(rows, out_dir):
    paths = [steps_figure(rows, os.path.join(out_dir, "lesson06.png")),
             sweep_figure(rows, os.path.join(out_dir, "lesson06_sweep.png"))]
    return [p for p in paths if p]
