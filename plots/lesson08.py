"""Lesson 08 figures: TFLOP/s per step at the default shape (8192³ bf16) with the cuBLAS and limit lines
(lesson 06's bar chart), and the sweep: TFLOP/s vs M = N = K for every step, cuBLAS and PyTorch, and the
best step against cuBLAS at the language-model shapes and the fused epilogue."""
import os

import klplot
import lesson06

DEFAULT_SHAPE = "MxNxK=8192x8192x8192"  # lesson08's default
REFERENCES = lesson06.REFERENCES  # the library and PyTorch rows, drawn dashed


def dims(shape):
    """'MxNxK=8192x4096x14336;bias;gelu_tanh' -> (8192, 4096, 14336)."""
    return lesson06.dims(shape.split(";")[0])


def is_square(shape):
    m, n, k = dims(shape)
    return m == n == k and ";" not in shape


def _rows(rows):
    return [r for r in klplot.latest(rows) if r["step"] != "copy" and not klplot.failed(r)]


def square_lines(rows):
    """{(step, name): [(size, TFLOP/s)]} over the plain square shapes."""
    lines = {}
    for r in _rows(rows):
        if is_square(r["shape"]):
            lines.setdefault((r["step"], r["name"]), []).append((dims(r["shape"])[0], r["tflops"]))
    return {key: sorted(pts) for key, pts in lines.items() if len(pts) >= 2}


def others(rows):
    """[(shape, best step's row, library row)] at the shapes that are not plain squares: the library row
    is cuBLASLt's fused epilogue where the shape has one, else cuBLAS."""
    out = []
    for shape in sorted({r["shape"] for r in _rows(rows) if not is_square(r["shape"])}):
        at = [r for r in _rows(rows) if r["shape"] == shape]
        ours = [r for r in at if r["step"] not in REFERENCES]
        lib = next((r for r in at if r["step"] == "lib" and r["name"] == ("cublaslt_epilogue" if ";" in shape else
                                                                           "cublas")), None)
        if ours and lib:
            out.append((shape, max(ours, key=lambda r: r["tflops"]), lib))
    return out


def sweep_figure(rows, path):
    lines = square_lines(rows)
    if not lines:
        return None
    odd = others(rows)
    fig, bx = lesson06.sweep_axes(lines, lesson06.peak_tflops(rows), "limit: cuBLAS f16 8192³", odd,
                                  (14 if odd else 8, 5))
    if odd:
        xs = range(len(odd))
        bx.bar([x - 0.2 for x in xs], [o[1]["tflops"] for o in odd], width=0.4, label="best step", color="tab:blue")
        bx.bar([x + 0.2 for x in xs], [o[2]["tflops"] for o in odd], width=0.4, label="cuBLAS (Lt with an epilogue)",
               color="tab:gray")
        for x, (_, ours, lib) in zip(xs, odd):
            bx.text(x, max(ours["tflops"], lib["tflops"]) + 5, f"{ours['tflops'] / lib['tflops']:.2f}x\nstep {ours['step']}",
                    ha="center", fontsize=7)
        bx.set_xticks(list(xs), [o[0].split("=")[1].replace(";", "\n") for o in odd], fontsize=7, rotation=20)
        bx.set_ylim(0, max(max(o[1]["tflops"], o[2]["tflops"]) for o in odd) * 1.18)
        bx.set_ylabel("TFLOP/s")
        bx.legend(fontsize=7, loc="lower right")
        bx.set_title("M = 8192 shapes of a language model, and the fused epilogue")
    fig.suptitle(f"Lesson 08: bf16 GEMM sweep, {rows[0]['gpu']}")
    return klplot.save(fig, path)


def draw(rows, out_dir):
    paths = [lesson06.steps_figure(rows, os.path.join(out_dir, "lesson08.png"), DEFAULT_SHAPE,
                                   "Lesson 08: bf16 GEMM", "limit (cuBLAS f16 8192³)"),
             sweep_figure(rows, os.path.join(out_dir, "lesson08_sweep.png"))]
    return [p for p in paths if p]
