"""Lesson 01 figures: GB/s per step at the default n against the copy bandwidth, and GB/s vs n."""
import os

import klplot

DEFAULT_SHAPE = "n=67108864"  # lesson01's default, 2^26 floats


def draw(rows, out_dir):
    paths = [klplot.bar_chart(rows, DEFAULT_SHAPE, "Lesson 01: sum of 2^26 floats",
                              os.path.join(out_dir, "lesson01.png")),
             klplot.sweep_chart(rows, "n (floats)", "Lesson 01: GB/s vs n (L2 flushed before every repetition)",
                                os.path.join(out_dir, "lesson01_sweep.png"))]
    return [p for p in paths if p]
