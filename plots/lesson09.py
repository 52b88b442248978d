"""Lesson 09 figure: TFLOP/s vs S for every step of the lesson (one line per numbered step, whatever
steps the CSV holds), the library row and PyTorch's SDPA backends, one panel per (D, causal), against
the tensor-core peak measured in the same run. Shapes are lesson 07's flash shapes,
"BxHxSxD=16x16x4096x64[;causal]"; the parsing and the series are lesson 07's (plots/lesson07.py)."""
import math
import os

import klplot
import lesson07

DEFAULT_SHAPE = "BxHxSxD=16x16x4096x64"  # lesson09's default run
PYTORCH = (("pytorch_flash", "PyTorch FLASH_ATTENTION"), ("pytorch_cudnn", "PyTorch CUDNN_ATTENTION"),
           ("pytorch_efficient", "PyTorch EFFICIENT_ATTENTION"))
PANELS = [(d, c) for d in (64, 128) for c in (False, True)]


def lines(rows):
    """[(step label, legend label)]: the numbered steps in order ("step 2: flash_wgmma"), the library row,
    then PyTorch's backends; only those with a row at a flash shape."""
    named = {}
    for r in klplot.latest(rows):
        if lesson07.flash_dims(r["shape"]):
            named.setdefault(r["step"], r["name"])
    steps = sorted((s for s in named if s.isdigit()), key=int)
    out = [(s, f"step {s}: {named[s]}") for s in steps]
    if "lib" in named:
        out.append(("lib", f"library: {named['lib']}"))
    return out + [(s, label) for s, label in PYTORCH if s in named]


def figure(rows, path):
    """TFLOP/s vs S, one panel per (D, causal) that has rows: the lesson's steps solid, the library and
    PyTorch dashed, the measured cuBLAS f16 GEMM peak dotted."""
    drawn = lines(rows)
    panels = [(d, c) for d, c in PANELS if any(lesson07.series(rows, s, d, c) for s, _ in drawn)]
    if not panels:
        return None
    peak = lesson07.peak_tflops(rows)
    cols = min(2, len(panels))
    grid_rows = (len(panels) + cols - 1) // cols
    fig, axes = klplot.plt.subplots(grid_rows, cols, figsize=(7 * cols, 4.8 * grid_rows), squeeze=False, sharey=True)
    flat = [ax for row in axes for ax in row]
    for ax in flat[len(panels):]:
        ax.set_visible(False)
    for ax, (dim, causal) in zip(flat, panels):
        for step, label in drawn:
            pts = lesson07.series(rows, step, dim, causal)
            if pts:
                ax.plot(*zip(*pts), "-" if step.isdigit() else "--", marker="o", markersize=3, label=label)
        if not math.isnan(peak):
            ax.axhline(peak, color="tab:red", linestyle=":", label=f"cuBLAS f16 GEMM {peak:.0f}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("S (sequence length), B = 65536 / S, H = 16")
        ax.set_title(f"D = {dim}" + (", causal" if causal else ""))
        ax.set_ylabel("TFLOP/s (4 B H S^2 D, halved if causal)")
    flat[0].legend(fontsize=7, loc="lower right")
    fig.suptitle(f"Lesson 09: attention forward on Hopper, {rows[0]['gpu']}")
    return klplot.save(fig, path)


def draw(rows, out_dir):
    path = figure(rows, os.path.join(out_dir, "lesson09.png"))
    return [path] if path else []
