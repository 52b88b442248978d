"""Lesson 07 figures: the tile problem (B independent 16x16x16 attentions) as ms per step, the library
row and PyTorch's SDPA backends, at B = 4096 and 65536 tiles against the read-once floor; and the
flash steps' TFLOP/s vs S with PyTorch's backends, one panel per (D, causal), against the tensor-core
peak. Shapes are written "B=4096" (tiles) and "BxHxSxD=16x16x4096x64[;causal]"."""
import math
import os

import klplot

DEFAULT_SHAPE = "B=65536"  # lesson07's default tile problem
TILE_SHAPES = ("B=4096", "B=65536")
PYTORCH = ("pytorch_flash", "pytorch_efficient", "pytorch_cudnn", "pytorch_math")
FLASH_LINES = (("5", "step 5: flash_wmma"), ("6", "step 6: flash_mma"), ("lib", "library: materialised S"),
               ("pytorch_flash", "PyTorch FLASH_ATTENTION"), ("pytorch_cudnn", "PyTorch CUDNN_ATTENTION"),
               ("pytorch_efficient", "PyTorch EFFICIENT_ATTENTION"), ("pytorch_math", "PyTorch MATH"))


def flash_dims(shape):
    """'BxHxSxD=16x16x4096x64;causal' -> (16, 16, 4096, 64, True); None for a tile shape."""
    if not shape.startswith("BxHxSxD="):
        return None
    dims, _, flag = shape.split("=")[1].partition(";")
    b, h, s, d = (int(x) for x in dims.split("x"))
    return b, h, s, d, flag == "causal"


def floor_ms(shape, copy):
    """The tile problem's floor: Q, K, V read and O written once (2 KiB per tile) at the copy bandwidth."""
    return klplot.shape_value(shape) * 4 * 512 / (copy * 1e9) * 1e3


def peak_tflops(rows):
    """The cuBLAS f16 GEMM peak lesson07 measured, from a flash row's TFLOP/s and % of limit."""
    for r in rows:
        if flash_dims(r["shape"]) and not math.isnan(r["tflops"]) and r["pct_of_limit"] > 0:
            return 100 * r["tflops"] / r["pct_of_limit"]
    return math.nan


def _order(row):
    step = row["step"]
    if step in PYTORCH:
        return (2, PYTORCH.index(step))
    return (0, int(step)) if step.isdigit() else (1, 0)


def tile_figure(rows, path):
    """One panel per tile count: ms per step (log), the library and PyTorch in grey, FAILED labelled."""
    latest = [r for r in klplot.latest(rows) if r["step"] != "copy"]
    present = [s for s in TILE_SHAPES if any(r["shape"] == s for r in latest)]
    if not present:
        return None
    copy = klplot.copy_gbps(rows)
    fig, axes = klplot.plt.subplots(1, len(present), figsize=(7 * len(present), 4.8), squeeze=False)
    for ax, shape in zip(axes[0], present):
        at = sorted((r for r in latest if r["shape"] == shape), key=_order)
        values = [math.nan if klplot.failed(r) else r["ms_median"] for r in at]
        shown = [v if not math.isnan(v) else min(x for x in values if not math.isnan(x)) for v in values]
        ax.bar(range(len(at)), shown, color=["tab:blue" if r["step"].isdigit() else "tab:gray" for r in at])
        for i, v in enumerate(values):
            ax.text(i, shown[i] * 1.1, "FAILED" if math.isnan(v) else f"{v:.3g}", ha="center", fontsize=8)
        if not math.isnan(copy):
            floor = floor_ms(shape, copy)
            ax.axhline(floor, color="tab:red", linestyle="--", label=f"read-once floor {floor:.4f} ms")
            ax.legend(loc="upper right", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylim(top=max(shown) * 3)
        ax.set_xticks(range(len(at)), [f'{r["step"]}: {r["name"]}' for r in at], rotation=25, ha="right", fontsize=8)
        ax.set_ylabel("ms (median)")
        ax.set_title(f"{klplot.shape_value(shape)} tiles of 16x16x16")
    fig.suptitle(f"Lesson 07, Part A: the attention tile, {rows[0]['gpu']}")
    return klplot.save(fig, path)


def series(rows, step, dim, causal):
    """[(S, TFLOP/s)] of one step at head dimension dim, causal or not, FAILED rows left out."""
    pts = []
    for r in klplot.latest(rows):
        d = flash_dims(r["shape"])
        if d and r["step"] == step and d[3] == dim and d[4] == causal and not klplot.failed(r):
            pts.append((d[2], r["tflops"]))
    return sorted(pts)


def flash_panels(rows, lines, title, path):
    """TFLOP/s vs S, one panel per (D, causal) that has rows: each (step, legend label) of `lines`, the
    numbered steps solid, the library and PyTorch dashed, the measured cuBLAS f16 GEMM peak dotted
    (lessons 07 and 09)."""
    panels = [(d, c) for d in (64, 128) for c in (False, True) if any(series(rows, s, d, c) for s, _ in lines)]
    if not panels:
        return None
    peak = peak_tflops(rows)
    cols = min(2, len(panels))
    grid_rows = (len(panels) + cols - 1) // cols
    fig, axes = klplot.plt.subplots(grid_rows, cols, figsize=(7 * cols, 4.8 * grid_rows), squeeze=False, sharey=True)
    flat = [ax for row in axes for ax in row]
    for ax in flat[len(panels):]:
        ax.set_visible(False)
    for ax, (dim, causal) in zip(flat, panels):
        for step, label in lines:
            pts = series(rows, step, dim, causal)
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
    fig.suptitle(f"{title}, {rows[0]['gpu']}")
    return klplot.save(fig, path)


def flash_figure(rows, path):
    """Part B: steps 5-6, the library, PyTorch's backends, the peak."""
    return flash_panels(rows, FLASH_LINES, "Lesson 07, Part B: flash attention forward", path)


def draw(rows, out_dir):
    paths = [tile_figure(rows, os.path.join(out_dir, "lesson07.png")),
             flash_figure(rows, os.path.join(out_dir, "lesson07_flash.png"))]
    return [p for p in paths if p]
