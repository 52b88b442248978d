"""PyTorch's rows for lesson 05 (softmax + top-K of logits [R, V]): what a PyTorch user runs,
torch.topk(torch.softmax(x, -1), K) (step "pytorch") and torch.topk(x, K) alone (step
"pytorch_topk", which skips the softmax and is the faster of the two), at the shapes of
`lesson05 --sweep` in each dtype the lesson's rows there were run in (f32, f16, bf16), appended to
RESULTS_DIR/lesson05.csv. torch_baselines.py calls topk() with its timing and CSV helpers. Bytes are
the lesson's floor: R * V logits read once and R * K (probability, index) pairs written. Each result
is checked against float64 first.
Where RESULTS_DIR/lesson05_sample.csv exists (`lesson05 --sample ... --csv` wrote it), also the sampler's
PyTorch pipeline (step "pytorch_sample": softmax(x / T), topk, renormalise, cumsum and the nucleus cut,
multinomial) at the decode shapes of SAMPLE, checked to draw inside the float64 nucleus.
Where flashinfer-python is installed, FlashInfer's rows join the same CSVs, on the same logits: its
radix top-K after its softmax (step "flashinfer") and alone (step "flashinfer_topk", unsorted), and its
fused top-k/top-p sampler (step "flashinfer_sample"); without it one line says so and no row is written."""
import csv
import importlib.util
import os

import torch

SWEEP = ([(4096, v, k) for v in (32000, 50257, 128256) for k in (1, 10, 50)]
         + [(4096, 50257, k) for k in (2, 4, 8, 16, 32, 64)]
         + [(r, 128256, 50) for r in (1, 8, 32, 64, 256, 1024)]
         + [(r, v, k) for r in (16384, 65536) for v, k in ((8, 1), (8, 2), (64, 6), (128, 8), (256, 8))]
         )  # lesson05's --sweep (host.cuh's sweep_shapes), which includes its default R = 4096, V = 50257, K = 10
DTYPES = ((torch.float32, "f32", 4), (torch.float16, "f16", 2), (torch.bfloat16, "bf16", 2))
SAMPLE = [(r, 128256, 50, 0.8, 0.9) for r in (1, 8, 64)]  # R, V, top_k, temperature, top_p


def _dtypes_run(path):
    """The DTYPES the lesson's own rows in the CSV at `path` were run in (a step number, or the sampler)."""
    with open(path, newline="") as f:
        names = {r["dtype"] for r in csv.DictReader(f) if r["step"].isdigit() or r["step"] == "sample"}
    return [d for d in DTYPES if d[1] in names]


def _rel_err(got, want):
    """Largest |got - want| / |want| over the K values of every row, got sorted first (values only:
    torch.topk does not promise which of several equal entries it returns, flashinfer.top_k no order)."""
    got = torch.sort(got.double(), dim=-1, descending=True).values
    return ((got - want).abs() / want.abs().clamp_min(1e-30)).max().item()


def _flashinfer():
    """FlashInfer's module where flashinfer-python is installed, else None (and one line saying so)."""
    if importlib.util.find_spec("flashinfer") is None:
        print("FlashInfer rows: n/a (flashinfer-python is not installed)")
        return None
    import flashinfer
    return flashinfer


def _row(step, label, name, shape, times, moved, limit, err, gpu):
    """A lesson05 CSV row: times = (median, min, max) in ms, moved = the bytes of the lesson's floor."""
    med, lo, hi = times
    gbps = moved / (med * 1e-3) / 1e9
    return ["05", step, label, name, shape, f"{med:.6g}", f"{lo:.6g}", f"{hi:.6g}", f"{gbps:.6g}", "",
            f"{100 * gbps / limit:.6g}", f"{err:.6g}", gpu]


def topk(out_dir, gpu, time_ms, append, copy_gbps):
    path = os.path.join(out_dir, "lesson05.csv")
    if not os.path.exists(path):
        return
    limit = copy_gbps(path)
    fi = _flashinfer()
    dev = torch.device("cuda")
    rows = []
    for dtype, name, size in _dtypes_run(path):
        for r, v, k in SWEEP:
            x = (torch.randn(r, v, device=dev) * 2).to(dtype)
            want_p = torch.topk(torch.softmax(x.double(), dim=-1), k, dim=-1).values
            want_x = torch.topk(x.double(), k, dim=-1).values
            shape = f"RxVxK={r}x{v}x{k}"
            cases = [("pytorch", "torch.topk(softmax)", lambda: torch.topk(torch.softmax(x, dim=-1), k, dim=-1), want_p),
                     ("pytorch_topk", "torch.topk", lambda: torch.topk(x, k, dim=-1), want_x)]
            if fi:
                cases += [("flashinfer", "flashinfer softmax+top_k",
                           lambda: fi.top_k(fi.sampling.softmax(x), k, sorted=True), want_p),
                          ("flashinfer_topk", "flashinfer.top_k (unsorted)", lambda: fi.top_k(x, k), want_x)]
            for step, label, fn, want in cases:
                try:
                    err = _rel_err(fn()[0], want)
                    times = time_ms(fn)
                except RuntimeError as e:  # a shape FlashInfer does not take; PyTorch's failures stop the run
                    if fi is None or not step.startswith("flashinfer"):
                        raise
                    print(f"{label} {name} {shape}: skipped ({str(e).splitlines()[0][:100]})")
                    continue
                rows.append(_row(step, label, name, shape, times, r * v * size + r * k * 8, limit, err, gpu))
                print(f"{label} {name} R={r} V={v} K={k}: {times[0]:.4f} ms, max rel error {err:.2e}")
            del x
    append(path, rows)
    sample(out_dir, gpu, time_ms, append, limit, fi)


def _nucleus_error(x, tokens, k, t, p):
    """The share of rows whose token (tokens: [R, 1]) is outside the float64 nucleus (widened by 1e-4 of
    the mass, as the lesson's check is): softmax(x / T) over the top k, kept while the mass before a rank
    is below p."""
    vals, idx = torch.topk(x.double(), k, dim=-1)
    w = torch.exp((vals - vals[:, :1]) / t)
    before = torch.cumsum(w, -1) - w
    kept = before < min(1.0, p + 1e-4) * w.sum(-1, keepdim=True)
    kept[:, 0] = True
    inside = ((idx == tokens) & kept).any(-1)
    return 1.0 - inside.double().mean().item()


def sample(out_dir, gpu, time_ms, append, limit, fi):
    path = os.path.join(out_dir, "lesson05_sample.csv")
    if not os.path.exists(path):
        return
    dev = torch.device("cuda")
    rows = []
    for dtype, name, size in _dtypes_run(path):
        for r, v, k, t, p in SAMPLE:
            x = (torch.randn(r, v, device=dev) * 2).to(dtype)

            def pipeline():
                vals, idx = torch.topk(torch.softmax(x.float() / t, dim=-1), k, dim=-1)
                vals = vals / vals.sum(-1, keepdim=True)
                vals = vals.masked_fill(torch.cumsum(vals, -1) - vals >= p, 0.0)
                return idx.gather(-1, torch.multinomial(vals, 1))

            samplers = [("pytorch_sample", f"softmax/topk/cumsum/multinomial[T={t} k={k} p={p}]", pipeline)]
            if fi:
                samplers.append(("flashinfer_sample", f"x/T, top_k_top_p_sampling_from_logits[T={t} k={k} p={p}]",
                                 lambda: fi.sampling.top_k_top_p_sampling_from_logits(x.float() / t, k, p)))
            shape = f"RxVxK={r}x{v}x{k}"
            for step, label, fn in samplers:
                err = _nucleus_error(x.float(), fn().reshape(r, 1), k, t, p)
                times = time_ms(fn)
                rows.append(_row(step, label, name, shape, times, r * v * size + r * 4, limit, err, gpu))
                print(f"{label} {name} R={r} V={v} K={k}: {times[0]:.4f} ms, outside the nucleus {err:.2e}")
            del x
    append(path, rows)
