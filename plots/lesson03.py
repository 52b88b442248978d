"""Lesson 03 figures: GB/s per step at the default n against the copy bandwidth (with max, L2 norm
and mean from the same template), and GB/s vs n for the later steps, CUB and the copy line."""
import os

import klplot

DEFAULT_SHAPE = "n=67108864"  # lesson03's default, 2^26 floats
SWEEP_STEPS = ("3", "6", "7", "8", "9", "lib")  # the early tree steps overlap; these tell the story


def draw(rows, out_dir):
    paths = [klplot.bar_chart(rows, DEFAULT_SHAPE, "Lesson 03: sum of 2^26 floats",
                              os.path.join(out_dir, "lesson03.png")),
             klplot.sweep_chart(rows, "n (floats)", "Lesson 03: GB/s vs n (L2 flushed before every repetition)",
                                os.path.join(out_dir, "lesson03_sweep.png"), steps=SWEEP_STEPS)]
    return [p for p in paths if p]
