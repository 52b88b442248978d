"""Lesson 01 figures: GB/s per step at the default n against the copy bandwidth, and GB/s vs n."""
import math
import os

import klplot
from klplot import plt

DEFAULT_SHAPE = "n=67108864"  # lesson01's default, 2^26 floats


def draw(rows, out_dir):
    """Writes lesson01.png (and lesson01_sweep.png when the CSV holds a sweep); returns the paths."""
    rows = klplot.latest(rows)
    copy = klplot.copy_gbps(rows)
    paths = []
    at_default = [r for r in rows if r["shape"] == DEFAULT_SHAPE and r["step"] != "copy"]
    if at_default:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        labels = [f'{r["step"]}: {r["name"]}' for r in at_default]
        values = [0 if klplot.failed(r) else r["gbps"] for r in at_default]
        colors = ["tab:gray" if r["step"] in ("lib", "pytorch") else "tab:blue" for r in at_default]
        ax.bar(range(len(values)), [max(v, 1e-3) for v in values], color=colors)
        for i, (r, v) in enumerate(zip(at_default, values)):
            ax.text(i, max(v, 1e-3) * 1.15, "FAILED" if klplot.failed(r) else f"{v:.3g}", ha="center", fontsize=8)
        if not math.isnan(copy):
            ax.axhline(copy, color="tab:red", linestyle="--", label=f"device copy {copy:.0f} GB/s")
            ax.legend(loc="lower right")
        ax.set_yscale("log")
        ax.set_xticks(range(len(labels)), labels, rotation=20, ha="right", fontsize=8)
        ax.set_ylabel("GB/s (bytes read once / time)")
        ax.set_title(f"Lesson 01: sum of 2^26 floats, {at_default[0]['gpu']}")
        paths.append(klplot.save(fig, os.path.join(out_dir, "lesson01.png")))

    shapes = {r["shape"] for r in rows if r["step"] != "copy"}
    if len(shapes) > 2:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for key in sorted({(r["step"], r["name"]) for r in rows if r["step"] != "copy"}):
            pts = sorted((klplot.shape_value(r["shape"]), r["gbps"]) for r in rows
                         if (r["step"], r["name"]) == key and not klplot.failed(r))
            if pts:
                style = "--" if key[0] in ("lib", "pytorch") else "-"
                ax.plot(*zip(*pts), style, marker="o", markersize=3, label=f"{key[0]}: {key[1]}")
        if not math.isnan(copy):
            ax.axhline(copy, color="tab:red", linestyle=":", label="device copy")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("n (floats)")
        ax.set_ylabel("GB/s")
        ax.set_title("Lesson 01: GB/s vs n (L2 flushed before every repetition)")
        ax.legend(fontsize=7)
        paths.append(klplot.save(fig, os.path.join(out_dir, "lesson01_sweep.png")))
    return paths
