"""torch_baselines.py RESULTS_DIR: what a PyTorch user would run for each lesson's problem, timed
the way the lessons time their steps (CUDA events, L2 flushed before every repetition, median of
30, graph replay for work shorter than 0.1 ms), appended to RESULTS_DIR/lessonNN.csv as step
"pytorch" in the shared schema. Each result is checked against float64 first."""
import importlib
import os
import statistics
import sys

import torch

from lesson_csv import append, copy_gbps

DEV = torch.device("cuda")
FLUSH = torch.zeros(2 * torch.cuda.get_device_properties(0).L2_cache_size // 4, device=DEV)


def warm(fn, seconds):
    """Runs fn() back to back for `seconds` of GPU time: a GPU at its power limit lowers its clock,
    and a tensor-core kernel timed after this runs at the clock it sustains (the lessons' warmup_ms)."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    spent = 0.0
    while spent < seconds * 1e3:
        start.record()
        for _ in range(8):
            fn()
        stop.record()
        stop.synchronize()
        spent += start.elapsed_time(stop)


def time_ms(fn, reps=30, warm_s=0.0):
    """Median, min, max in ms of fn() on the current stream, L2 flushed (read) before each rep; after
    warm(fn, warm_s) when warm_s > 0."""
    fn()
    torch.cuda.synchronize()
    if warm_s > 0:
        warm(fn, warm_s)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def once(call):
        FLUSH.sum()
        start.record()
        call()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop)

    first = once(fn)
    call = fn
    if first < 0.1:  # short work: replay a captured graph, as the lessons do
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()  # warm-up on the side stream before capture
            with torch.cuda.graph(graph, stream=stream):
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        call = graph.replay
        call()
    samples = [once(call) for _ in range(reps)]
    return statistics.median(samples), min(samples), max(samples)






def reductions(out_dir, gpu):
    """torch.sum over n floats at the sweep sizes (2^26 is the lessons' default): the PyTorch row of
    every reduction lesson (01-03), appended to each of their CSV files that exists."""
    rows = []
    for n in [1 << e for e in range(10, 29, 2)]:
        x = torch.rand(n, device=DEV) * 2 - 1
        ref = x.double().sum().item()
        err = abs(torch.sum(x).item() - ref) / x.double().abs().sum().item()
        med, lo, hi = time_ms(lambda: torch.sum(x))
        gbps = 4 * n / (med * 1e-3) / 1e9
        rows.append((n, med, lo, hi, gbps, err))
        print(f"torch.sum n={n}: {med:.4f} ms, {gbps:.0f} GB/s, error {err:.2e}")
    for lesson in ("01", "02", "03"):
        path = os.path.join(out_dir, f"lesson{lesson}.csv")
        if not os.path.exists(path):
            continue
        limit = copy_gbps(path)
        append(path, [[lesson, "pytorch", "torch.sum", "f32", f"n={n}", f"{med:.6g}", f"{lo:.6g}", f"{hi:.6g}",
                       f"{gbps:.6g}", "", f"{100 * gbps / limit:.6g}", f"{err:.6g}", gpu]
                      for n, med, lo, hi, gbps, err in rows])


def softmax(out_dir, gpu):
    """torch.softmax over rows of [M, K] (lesson 04's sweep: M = round(2^26 / K)), f32 and f16:
    bytes = read + write M*K elements."""
    path = os.path.join(out_dir, "lesson04.csv")
    if not os.path.exists(path):
        return
    limit = copy_gbps(path)
    ks = sorted([1000, 4097, 50257] + [1 << e for e in range(5, 18)])
    rows = []
    for dtype, name, size in ((torch.float32, "f32", 4), (torch.float16, "f16", 2)):
        for k in ks:
            m = max(1, ((1 << 26) + k // 2) // k)
            x = (torch.randn(m, k, device=DEV) * 4).to(dtype)
            ref = torch.softmax(x.double(), dim=-1)
            y = torch.softmax(x, dim=-1)
            # The lesson's metric: |y - ref| / (|ref| + floor), the floor where the type's spacing
            # ends (f16 flushes probabilities below 2^-24 to 0, which is not a relative error of 1).
            floor = 2.0 ** -14 if dtype == torch.float16 else 1e-26
            err = ((y.double() - ref).abs() / (ref.abs() + floor)).max().item()
            del y, ref
            med, lo, hi = time_ms(lambda: torch.softmax(x, dim=-1))
            gbps = 2 * m * k * size / (med * 1e-3) / 1e9
            rows.append(["04", "pytorch", "torch.softmax", name, f"MxK={m}x{k}", f"{med:.6g}", f"{lo:.6g}",
                         f"{hi:.6g}", f"{gbps:.6g}", "", f"{100 * gbps / limit:.6g}", f"{err:.6g}", gpu])
            print(f"torch.softmax {name} M={m} K={k}: {med:.4f} ms, {gbps:.0f} GB/s, max rel error {err:.2e}")
    append(path, rows)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: torch_baselines.py RESULTS_DIR")
    gpu = torch.cuda.get_device_name(0).replace(",", ";")
    print(f"PyTorch {torch.__version__} on {gpu}")
    reductions(sys.argv[1], gpu)
    softmax(sys.argv[1], gpu)
    # Lessons 05-09 keep their PyTorch equivalents in a module beside this file, run where the
    # lesson's CSV exists.
    for lesson, module, function in (("05", "torch_topk", "topk"), ("06", "torch_gemm", "gemm"),
                                     ("07", "torch_attention", "attention"), ("08", "torch_gemm", "hopper_gemm"),
                                     ("09", "torch_attention", "hopper")):
        if os.path.exists(os.path.join(sys.argv[1], f"lesson{lesson}.csv")):
            getattr(importlib.import_module(module), function)(sys.argv[1], gpu, time_ms, append, copy_gbps)
