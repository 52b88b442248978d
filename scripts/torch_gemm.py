"""PyTorch's rows for lesson 06 (SGEMM D = act(A B + bias), float32): what a PyTorch user runs,
torch.mm(A, B) with TF32 off (step "pytorch") and gelu(addmm(bias, A, B), approximate="tanh"),
the unfused epilogue (step "pytorch_epilogue"), at the shapes of `lesson06 --sweep`, appended to
RESULTS_DIR/lesson06.csv. torch_baselines.py calls gemm() with its timing and CSV helpers. TFLOP/s
count 2 M N K; % of limit is against the FP32 peak the lesson's rows were measured against. Each
result is checked first against float64, with the lesson's metric: |D - ref| over |A||B| + |bias|."""
import csv
import math
import os

import torch

SWEEP = [(s, s, s) for s in (256, 512, 1024, 2048, 4096, 8192)] + [(4097, 4097, 4097), (1000, 3000, 777),
                                                                     (8192, 64, 8192)]


def _peak(path):
    """The FP32 peak of the lesson's own rows: tflops / (pct_of_limit / 100)."""
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["step"] not in ("copy", "tune") and r["tflops"] and r["pct_of_limit"]:
                return float(r["tflops"]) / (float(r["pct_of_limit"]) / 100)
    return math.nan


def _error(got, a, b, bias, act):
    ref = torch.addmm(bias.double(), a.double(), b.double())
    scale = torch.addmm(bias.double().abs(), a.double().abs(), b.double().abs())
    if act:
        ref = torch.nn.functional.gelu(ref, approximate="tanh")
    return ((got.double() - ref).abs() / scale).max().item()


def gemm(out_dir, gpu, time_ms, append, copy_gbps):
    path = os.path.join(out_dir, "lesson06.csv")
    if not os.path.exists(path):
        return
    peak = _peak(path)
    torch.backends.cuda.matmul.allow_tf32 = False  # FP32 arithmetic, as cublasSgemm in the lesson
    dev = torch.device("cuda")
    rows = []
    for m, n, k in SWEEP:
        a = torch.randn(m, k, device=dev)
        b = torch.randn(k, n, device=dev)
        bias = torch.randn(n, device=dev)
        zero = torch.zeros(n, device=dev)
        shape = f"MxNxK={m}x{n}x{k}"
        cases = (("pytorch", "torch.mm", lambda: torch.mm(a, b), zero, False),
                 ("pytorch_epilogue", "torch.addmm+gelu[bias n gelu_tanh]",
                  lambda: torch.nn.functional.gelu(torch.addmm(bias, a, b), approximate="tanh"), bias, True))
        for step, label, fn, bias_used, act in cases:
            err = _error(fn(), a, b, bias_used, act)
            med, lo, hi = time_ms(fn)
            tflops = 2 * m * n * k / (med * 1e-3) / 1e12
            rows.append(["06", step, label, "f32", shape, f"{med:.6g}", f"{lo:.6g}", f"{hi:.6g}", "", f"{tflops:.6g}",
                         f"{100 * tflops / peak:.6g}", f"{err:.6g}", gpu])
            print(f"{label} {shape}: {med:.4f} ms, {tflops:.1f} TFLOP/s, max error {err:.2e}")
        del a, b
    append(path, rows)


# Lesson 08 (bf16 D = act(A B + bias), f32 accumulation): torch.mm and gelu(addmm), at the shapes of
# `lesson08 --sweep`, appended to RESULTS_DIR/lesson08.csv. Like the lesson's steps, each runs back to
# back for 0.5 s before it is timed (the clock a GPU at its power limit sustains). Checked first with
# the lesson's metric, max |d - ref| / (|ref| + 1) against float64.
HOPPER_SWEEP = ([(s, s, s, False) for s in (512, 1024, 2048, 4096, 6144, 8192, 12288, 16384)] +
                [(8192, 8192, 8192, True)] + [(8192, n, k, False) for n, k in
                                              ((4096, 4096), (14336, 4096), (4096, 14336), (128256, 4096))])


def _hopper_error(got, a, b, bias, act):
    ref = a.double() @ b.double()
    if bias is not None:
        ref += bias.double()
    if act:
        ref = torch.nn.functional.gelu(ref, approximate="tanh")
    return ((got.double() - ref).abs() / (ref.abs() + 1)).max().item()


def hopper_gemm(out_dir, gpu, time_ms, append, copy_gbps):
    path = os.path.join(out_dir, "lesson08.csv")
    if not os.path.exists(path):
        return
    peak = _peak(path)
    dev = torch.device("cuda")
    for m, n, k, epilogue in HOPPER_SWEEP:
        a = (torch.rand(m, k, device=dev) * 2 - 1).to(torch.bfloat16)
        b = (torch.rand(k, n, device=dev) * 2 - 1).to(torch.bfloat16)
        bias = (torch.rand(n, device=dev) * 2 - 1).to(torch.bfloat16) if epilogue else None
        shape = f"MxNxK={m}x{n}x{k}" + (";bias;gelu_tanh" if epilogue else "")
        if epilogue:
            step, label = "pytorch_epilogue", "torch.addmm+gelu_tanh"
            fn = lambda: torch.nn.functional.gelu(torch.addmm(bias, a, b), approximate="tanh")  # noqa: E731
        else:
            step, label, fn = "pytorch", "torch.mm", lambda: torch.mm(a, b)
        err = _hopper_error(fn(), a, b, bias, epilogue)
        med, lo, hi = time_ms(fn, warm_s=0.5)
        tflops = 2 * m * n * k / (med * 1e-3) / 1e12
        append(path, [["08", step, label, "bf16", shape, f"{med:.6g}", f"{lo:.6g}", f"{hi:.6g}", "", f"{tflops:.6g}",
                       f"{100 * tflops / peak:.6g}", f"{err:.6g}", gpu]])
        print(f"{label} {shape}: {med:.4f} ms, {tflops:.1f} TFLOP/s, max error {err:.2e}")
        del a, b
        torch.cuda.empty_cache()
