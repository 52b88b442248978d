"""Lesson 09 figure: TFLOP/s vs S for every step of the lesson (one line per numbered step, whatever
steps the CSV holds), the library row and PyTorch's SDPA backends, one panel per (D, causal), against
the tensor-core peak measured in the same run. Shapes are lesson 07's flash shapes,
"BxHxSxD=16x16x4096x64[;causal]"; the parsing and the series are lesson 07's (plots/lesson07.py)."""
import os

import klplot
import lesson07

DEFAULT_SHAPE = "BxHxSxD=16x16x4096x64"  # lesson09's default run
PYTORCH = (("pytorch_flash", "PyTorch FLASH_ATTENTION"), ("pytorch_cudnn", "PyTorch CUDNN_ATTENTION"),
           ("pytorch_efficient", "PyTorch EFFICIENT_ATTENTION"))


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
    """TFLOP/s vs S, one panel per (D, causal) that has rows (lesson07.flash_panels)."""
    return lesson07.flash_panels(rows, lines(rows), "Lesson 09: attention forward on Hopper", path)


def draw(rows, out_dir):
    path = figure(rows, os.path.join(out_dir, "lesson09.png"))
    return [path] if path else []
