"""PyTorch's rows for lesson 05 (softmax + top-K of logits [R, V]): what a PyTorch user runs,
torch.topk(torch.softmax(x, -1), K) (step "pytorch") and torch.topk(x, K) alone (step
"pytorch_topk", which skips the softmax and is the faster of the two), at the shapes of
`lesson05 --sweep` in f32 and f16, appended to RESULTS_DIR/lesson05.csv. torch_baselines.py calls
topk() with its timing and CSV helpers. Bytes are the lesson's floor: R * V logits read once and
R * K (probability, index) pairs written. Each result is checked against float64 first.
Where RESULTS_DIR/lesson05_sample.csv exists (`lesson05 --sample ... --csv` wrote it), also the sampler's
PyTorch pipeline (step "pytorch_sample": softmax(x / T), topk, renormalise, cumsum and the nucleus cut,
multinomial) at the decode shapes of SAMPLE, checked to draw inside the float64 nucleus.
Where flashinfer-python is installed, FlashInfer's rows join the same CSVs at the shapes the lesson's
run wrote (flashinfer()): its radix top-K after its softmax (step "flashinfer") and alone (step
"flashinfer_topk", unsorted), and its fused top-k/top-p sampler (step "flashinfer_sample"); without
it one line says so and no row is written."""
import csv
import importlib.util
import os

import torch

SWEEP = ([(4096, v, k) for v in (32000, 50257, 128256) for k in (1, 10, 50)]
         + [(4096, 50257, k) for k in (2, 4, 8, 16, 32, 64)]
         + [(r, 128256, 50) for r in (1, 8, 32, 64, 256, 1024)]
         + [(r, v, k) for r in (16384, 65536) for v, k in ((8, 1), (8, 2), (64, 6), (128, 8), (256, 8))]
         )  # lesson05's --sweep (host.cuh's sweep_shapes), which includes its default R = 4096, V = 50257, K = 10
DTYPES = ((torch.float32, "f32", 4), (torch.float16, "f16", 2))
SAMPLE = [(r, 128256, 50, 0.8, 0.9) for r in (1, 8, 64)]  # R, V, top_k, temperature, top_p


def _rel_err(got, want):
    """Largest |got - want| / |want| over the K values of every row (values only: torch.topk does
    not promise which of several equal entries it returns)."""
    return ((got.double() - want).abs() / want.abs().clamp_min(1e-30)).max().item()


def topk(out_dir, gpu, time_ms, append, copy_gbps):
    path = os.path.join(out_dir, "lesson05.csv")
    if not os.path.exists(path):
        return
    limit = copy_gbps(path)
    dev = torch.device("cuda")
    rows = []
    for dtype, name, size in DTYPES:
        for r, v, k in SWEEP:
            x = (torch.randn(r, v, device=dev) * 2).to(dtype)
            ref = torch.topk(torch.softmax(x.double(), dim=-1), k, dim=-1).values
            err_softmax = _rel_err(torch.topk(torch.softmax(x, dim=-1), k, dim=-1).values, ref)
            err_topk = _rel_err(torch.topk(x, k, dim=-1).values, torch.topk(x.double(), k, dim=-1).values)
            del ref
            bytes_moved = r * v * size + r * k * 8
            shape = f"RxVxK={r}x{v}x{k}"
            for step, label, fn, err in (
                    ("pytorch", "torch.topk(softmax)", lambda: torch.topk(torch.softmax(x, dim=-1), k, dim=-1), err_softmax),
                    ("pytorch_topk", "torch.topk", lambda: torch.topk(x, k, dim=-1), err_topk)):
                med, lo, hi = time_ms(fn)
                gbps = bytes_moved / (med * 1e-3) / 1e9
                rows.append(["05", step, label, name, shape, f"{med:.6g}", f"{lo:.6g}", f"{hi:.6g}", f"{gbps:.6g}", "",
                             f"{100 * gbps / limit:.6g}", f"{err:.6g}", gpu])
                print(f"{label} {name} R={r} V={v} K={k}: {med:.4f} ms, {gbps:.0f} GB/s, max rel error {err:.2e}")
            del x
    append(path, rows)
    sample(out_dir, gpu, time_ms, append, limit)
    flashinfer(out_dir, gpu, time_ms, append, copy_gbps)


def _nucleus_error(x, tokens, k, t, p):
    """The share of rows whose token is outside the float64 nucleus (widened by 1e-4 of the mass, as the
    lesson's check is): softmax(x / T) over the top k, kept while the mass before a rank is below p."""
    vals, idx = torch.topk(x.double(), k, dim=-1)
    w = torch.exp((vals - vals[:, :1]) / t)
    before = torch.cumsum(w, -1) - w
    kept = before < min(1.0, p + 1e-4) * w.sum(-1, keepdim=True)
    kept[:, 0] = True
    inside = ((idx == tokens) & kept).any(-1)
    return 1.0 - inside.double().mean().item()


def sample(out_dir, gpu, time_ms, append, limit):
    path = os.path.join(out_dir, "lesson05_sample.csv")
    if not os.path.exists(path):
        return
    dev = torch.device("cuda")
    rows = []
    for dtype, name, size in DTYPES:
        for r, v, k, t, p in SAMPLE:
            x = (torch.randn(r, v, device=dev) * 2).to(dtype)

            def pipeline():
                vals, idx = torch.topk(torch.softmax(x.float() / t, dim=-1), k, dim=-1)
                vals = vals / vals.sum(-1, keepdim=True)
                vals = vals.masked_fill(torch.cumsum(vals, -1) - vals >= p, 0.0)
                return idx.gather(-1, torch.multinomial(vals, 1))

            err = _nucleus_error(x.float(), pipeline(), k, t, p)
            med, lo, hi = time_ms(pipeline)
            gbps = (r * v * size + r * 4) / (med * 1e-3) / 1e9
            shape = f"RxVxK={r}x{v}x{k}"
            label = f"softmax/topk/cumsum/multinomial[T={t} k={k} p={p}]"
            rows.append(["05", "pytorch_sample", label, name, shape, f"{med:.6g}", f"{lo:.6g}", f"{hi:.6g}",
                         f"{gbps:.6g}", "", f"{100 * gbps / limit:.6g}", f"{err:.6g}", gpu])
            print(f"PyTorch sampler {name} R={r} V={v} K={k}: {med:.4f} ms, outside the nucleus {err:.2e}")
            del x
    append(path, rows)


def _shapes_in(path):
    """The (dtype name, shape) cells of a lesson CSV."""
    with open(path, newline="") as f:
        return {(r["dtype"], r["shape"]) for r in csv.DictReader(f)}


def _row(step, label, name, shape, med, lo, hi, gbps, limit, err, gpu):
    return ["05", step, label, name, shape, f"{med:.6g}", f"{lo:.6g}", f"{hi:.6g}", f"{gbps:.6g}", "",
            f"{100 * gbps / limit:.6g}", f"{err:.6g}", gpu]


def flashinfer(out_dir, gpu, time_ms, append, copy_gbps):
    """FlashInfer's top-K and sampler rows at the shapes of lesson05.csv and lesson05_sample.csv that
    SWEEP and SAMPLE name; a shape FlashInfer refuses is skipped with its message."""
    if importlib.util.find_spec("flashinfer") is None:
        print("FlashInfer rows: n/a (flashinfer-python is not installed)")
        return
    import flashinfer as fi

    dev = torch.device("cuda")
    path = os.path.join(out_dir, "lesson05.csv")
    if os.path.exists(path):
        limit, cells, rows = copy_gbps(path), _shapes_in(path), []
        for dtype, name, size in DTYPES:
            for r, v, k in SWEEP:
                shape = f"RxVxK={r}x{v}x{k}"
                if (name, shape) not in cells:
                    continue
                x = (torch.randn(r, v, device=dev) * 2).to(dtype)
                want_p = torch.topk(torch.softmax(x.double(), dim=-1), k, dim=-1).values
                want_x = torch.topk(x.double(), k, dim=-1).values
                for step, label, fn, want in (
                        ("flashinfer", "flashinfer softmax+top_k", lambda: fi.top_k(fi.sampling.softmax(x), k, sorted=True),
                         want_p),
                        ("flashinfer_topk", "flashinfer.top_k (unsorted)", lambda: fi.top_k(x, k), want_x)):
                    try:
                        got = torch.sort(fn()[0].double(), dim=-1, descending=True).values
                        err = _rel_err(got, want)
                        med, lo, hi = time_ms(fn)
                    except RuntimeError as e:  # a shape FlashInfer does not take
                        print(f"{label} {name} {shape}: skipped ({str(e).splitlines()[0][:100]})")
                        continue
                    gbps = (r * v * size + r * k * 8) / (med * 1e-3) / 1e9
                    rows.append(_row(step, label, name, shape, med, lo, hi, gbps, limit, err, gpu))
                    print(f"{label} {name} {shape}: {med:.4f} ms, {gbps:.0f} GB/s, max rel error {err:.2e}")
                del x
        append(path, rows)
    path = os.path.join(out_dir, "lesson05_sample.csv")
    if os.path.exists(path):
        limit, cells, rows = copy_gbps(os.path.join(out_dir, "lesson05.csv")), _shapes_in(path), []
        for dtype, name, size in DTYPES:
            for r, v, k, t, p in SAMPLE:
                shape = f"RxVxK={r}x{v}x{k}"
                if (name, shape) not in cells:
                    continue
                x = (torch.randn(r, v, device=dev) * 2).to(dtype)

                def fused():
                    return fi.sampling.top_k_top_p_sampling_from_logits(x.float() / t, k, p)

                err = _nucleus_error(x.float(), fused().unsqueeze(-1), k, t, p)
                med, lo, hi = time_ms(fused)
                gbps = (r * v * size + r * 4) / (med * 1e-3) / 1e9
                label = f"x/T, top_k_top_p_sampling_from_logits[T={t} k={k} p={p}]"
                rows.append(_row("flashinfer_sample", label, name, shape, med, lo, hi, gbps, limit, err, gpu))
                print(f"FlashInfer sampler {name} R={r} V={v} K={k}: {med:.4f} ms, outside the nucleus {err:.2e}")
                del x
        append(path, rows)
