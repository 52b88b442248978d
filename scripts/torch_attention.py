"""PyTorch's rows for lessons 07 and 09 (attention O = softmax(Q K^T scale) V, f16): torch's
scaled_dot_product_attention forced onto each backend, timed and checked like the lessons' steps.
attention(), lesson 07: at the shapes of `lesson07 --sweep` (the tile problem as [B, 1, 16, 16], the
flash shapes as [65536 / S, 16, S, D], causal and not), with FLASH_ATTENTION, EFFICIENT_ATTENTION,
CUDNN_ATTENTION and MATH, appended to RESULTS_DIR/lesson07.csv as steps "pytorch_flash",
"pytorch_efficient", "pytorch_cudnn" and "pytorch_math" (% of limit: of the copy bandwidth for the tile
problem, of the tensor-core peak lesson07 measured for the flash shapes).
hopper(), lesson 09: the same flash shapes (those of `lesson09 --sweep`) with FLASH_ATTENTION,
EFFICIENT_ATTENTION and CUDNN_ATTENTION, appended to RESULTS_DIR/lesson09.csv (% of the tensor-core peak
lesson09 measured).
torch_baselines.py calls them with its timing and CSV helpers. A backend that refuses a shape, or MATH where its
S x S scores would need more than 16 GiB, is left out. Each output is checked first, with the
lesson's metric max |o - ref| / (|ref| + 0.1), against float32 math on (up to) two heads."""
import csv
import os

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = (("pytorch_flash", "sdpa FLASH_ATTENTION", SDPBackend.FLASH_ATTENTION),
            ("pytorch_efficient", "sdpa EFFICIENT_ATTENTION", SDPBackend.EFFICIENT_ATTENTION),
            ("pytorch_cudnn", "sdpa CUDNN_ATTENTION", SDPBackend.CUDNN_ATTENTION),
            ("pytorch_math", "sdpa MATH", SDPBackend.MATH))
TILES = (4096, 65536)
FLASH = [(65536 // s, 16, s, d, causal) for d in (64, 128) for causal in (False, True)
         for s in (128, 256, 512, 1024, 2048, 4096, 8192, 16384)]
HOPPER_BACKENDS = tuple(b for b in BACKENDS if b[2] != SDPBackend.MATH)
MATH_BUDGET = 16 * 2 ** 30  # bytes of f16 scores (it keeps several S-sized temporaries)


def _error(out, q, k, v, causal):
    """Against float32 math on the first two heads of batch entry 0."""
    h = min(2, q.shape[1])
    qf, kf, vf = (t[:1, :h].float() for t in (q, k, v))
    with sdpa_kernel(SDPBackend.MATH):
        ref = F.scaled_dot_product_attention(qf, kf, vf, is_causal=causal).double()
    return ((out[:1, :h].double() - ref).abs() / (ref.abs() + 0.1)).max().item()


def peak_tflops(path):
    """The tensor-core peak the lesson measured (cuBLAS f16 GEMM): TFLOP/s / (% of limit) of a flash row."""
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["shape"].startswith("BxHxSxD") and r["tflops"] and r["pct_of_limit"]:
                return 100 * float(r["tflops"]) / float(r["pct_of_limit"])
    return float("nan")


def sdpa_rows(lesson, shapes, backends, peak, copy, time_ms, gpu, warm_s=0.0):
    """The CSV rows of `lesson` ("07") for each (B, H, S, D, causal) of `shapes` and each backend that takes it,
    each timed after running back to back for warm_s seconds (lesson 09's steps are)."""
    dev = torch.device("cuda")
    rows = []
    for b, h, s, d, causal in shapes:
        q, k, v = ((torch.rand(b, h, s, d, device=dev) * 2 - 1) * 3 ** 0.5 for _ in range(3))
        q, k, v = q.half(), k.half(), v.half()
        if s == 16 and d == 16 and h == 1:
            shape = f"B={b}"
        else:
            shape = f"BxHxSxD={b}x{h}x{s}x{d}" + (";causal" if causal else "")
        flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
        moved = 4 * b * h * s * d * 2
        for step, label, backend in backends:
            if backend == SDPBackend.MATH and 2 * b * h * s * s * 2 > MATH_BUDGET:
                continue

            def fn():
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

            try:
                err = _error(fn(), q, k, v, causal)
                med, lo, hi = time_ms(fn, warm_s=warm_s)
            except RuntimeError as e:  # the backend refuses this shape (or runs out of memory)
                print(f"{label} {shape}: skipped ({str(e).splitlines()[0][:100]})")
                torch.cuda.empty_cache()
                continue
            tflops = flops / (med * 1e-3) / 1e12
            gbps = moved / (med * 1e-3) / 1e9
            tile = shape.startswith("B=")
            pct = f"{100 * gbps / copy:.6g}" if tile else f"{100 * tflops / peak:.6g}"
            rows.append([lesson, step, label, "f16", shape, f"{med:.6g}", f"{lo:.6g}", f"{hi:.6g}",
                         f"{gbps:.6g}" if tile else "", f"{tflops:.6g}", pct, f"{err:.6g}", gpu])
            print(f"{label} {shape}: {med:.4f} ms, {tflops:.1f} TFLOP/s, error {err:.2e}")
        del q, k, v
        torch.cuda.empty_cache()
    return rows


def attention(out_dir, gpu, time_ms, append, copy_gbps):
    """Lesson 07: the tile problem and the flash shapes, every backend."""
    path = os.path.join(out_dir, "lesson07.csv")
    if not os.path.exists(path):
        return
    shapes = [(b, 1, 16, 16, False) for b in TILES] + FLASH
    append(path, sdpa_rows("07", shapes, BACKENDS, peak_tflops(path), copy_gbps(path), time_ms, gpu))


def hopper(out_dir, gpu, time_ms, append, copy_gbps):
    """Lesson 09: the flash shapes, with the backends a Hopper kernel is measured against (not MATH)."""
    path = os.path.join(out_dir, "lesson09.csv")
    if not os.path.exists(path):
        return
    append(path, sdpa_rows("09", FLASH, HOPPER_BACKENDS, peak_tflops(path), copy_gbps(path), time_ms, gpu, warm_s=0.5))
