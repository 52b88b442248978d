"""Lesson 10 figures: bus bandwidth per step at the default n against the measured peer copy, and bus
bandwidth vs n (floats per GPU) for every step and NCCL. The GB/s column of lesson10's CSV is the bus
bandwidth, algbw * 2 (G-1) / G; the copy row is the peer copy, every GPU to the next at once."""
import os

import klplot

DEFAULT_SHAPE = "n=67108864;gpus=2"  # lesson10's default, 2^26 floats (256 MiB) on each of 2 GPUs


def draw(rows, out_dir):
    paths = [klplot.bar_chart(rows, DEFAULT_SHAPE, "Lesson 10: all-reduce of 2^26 floats on 2 GPUs (bus bandwidth)",
                              os.path.join(out_dir, "lesson10.png"), copy_label="peer copy"),
             klplot.sweep_chart(rows, "n (floats per GPU)", "Lesson 10: bus bandwidth vs n, 2 GPUs",
                                os.path.join(out_dir, "lesson10_sweep.png"), copy_label="peer copy")]
    return [p for p in paths if p]
