"""Lesson 05 figures: milliseconds per step and PyTorch's two rows against the read-once floor at the
default shape (one panel per dtype), the fused dispatcher's speed-up over step 1 and over PyTorch as K
grows, and the dispatcher against PyTorch where top-K runs in practice: the rows sweep (V = 128256,
K = 50, R = 1 ... 4096, decode up to 256) and MoE routing (V <= 256), with the goals of those cells.
Shapes are written "RxVxK=4096x50257x10"."""
import math
import os

import klplot

DEFAULT_SHAPE = "RxVxK=4096x50257x10"  # lesson05's default: R = 4096, V = 50257 (GPT-2), K = 10
DTYPES = ("f32", "f16", "bf16")
DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2}
FUSED = "dispatch"  # the dispatcher's name (its step number grew with the ladder): what a user gets
REFERENCES = ("pytorch", "pytorch_topk")


def dims(shape):
    """'RxVxK=4096x50257x10' -> (4096, 50257, 10) (klplot.shape_value gives only R)."""
    r, v, k = shape.split("=")[1].split("x")
    return int(r), int(v), int(k)


def floor_ms(shape, dtype, copy):
    """The read-once floor: R * V logits read and R * K (probability, index) pairs written, at the
    measured copy bandwidth."""
    r, v, k = dims(shape)
    return (r * v * DTYPE_BYTES[dtype] + r * k * 8) / (copy * 1e9) * 1e3


def _at(rows, shape, dtype):
    return [r for r in klplot.latest(rows) if r["shape"] == shape and r["dtype"] == dtype and r["step"] != "copy"]


def _order(row):
    step = row["step"]
    return (1, REFERENCES.index(step)) if step in REFERENCES else (0, int(step) if step.isdigit() else 99)


def steps_figure(rows, path, shape=DEFAULT_SHAPE):
    """One bar per step (ms, log scale; PyTorch in grey, FAILED labelled) and the floor as a line."""
    present = [d for d in DTYPES if _at(rows, shape, d)]
    if not present:
        return None
    copy = klplot.copy_gbps(rows)
    fig, axes = klplot.plt.subplots(1, len(present), figsize=(7 * len(present), 4.8), squeeze=False)
    for ax, dtype in zip(axes[0], present):
        at = sorted(_at(rows, shape, dtype), key=_order)
        values = [math.nan if klplot.failed(r) else r["ms_median"] for r in at]
        shown = [v if not math.isnan(v) else min(x for x in values if not math.isnan(x)) for v in values]
        ax.bar(range(len(at)), shown, color=["tab:gray" if r["step"] in REFERENCES else "tab:blue" for r in at])
        for i, (r, v) in enumerate(zip(at, values)):
            ax.text(i, shown[i] * 1.1, "FAILED" if math.isnan(v) else f"{v:.3g}", ha="center", fontsize=8)
        if not math.isnan(copy):
            floor = floor_ms(shape, dtype, copy)
            ax.axhline(floor, color="tab:red", linestyle="--", label=f"read-once floor {floor:.3f} ms")
            ax.legend(loc="upper right", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylim(top=max(shown) * 2.5)  # room for the labels and the legend
        ax.set_xticks(range(len(at)), [f'{r["step"]}: {r["name"]}' for r in at], rotation=25, ha="right", fontsize=8)
        ax.set_ylabel("ms (median)")
        ax.set_title(dtype)
    r, v, k = dims(shape)
    fig.suptitle(f"Lesson 05: softmax + top-{k} of [{r}, {v}] logits, {rows[0]['gpu']}")
    return klplot.save(fig, path)


def speedups(rows, dtype, over, vocab=50257, n_rows=4096):
    """[(K, speed-up)] of the dispatcher over step `over` at R = n_rows, V = vocab, FAILED rows left out."""
    ms = {}
    for r in klplot.latest(rows):
        if r["dtype"] != dtype or r["step"] == "copy" or klplot.failed(r):
            continue
        rr, v, k = dims(r["shape"])
        if (rr, v) == (n_rows, vocab):
            ms[(FUSED if r["name"] == FUSED else r["step"], k)] = r["ms_median"]
    return sorted((k, ms[(over, k)] / t) for (step, k), t in ms.items() if step == FUSED and (over, k) in ms)


def speedup_figure(rows, path):
    """Speed-up of the fused dispatcher vs K at R = 4096, V = 50257: over step 1 and over PyTorch."""
    labels = {"1": "over step 1 (softmax + cub sort)", "pytorch": "over torch.topk(softmax)",
              "pytorch_topk": "over torch.topk alone"}
    lines = [(d, over, speedups(rows, d, over)) for d in DTYPES for over in labels]
    lines = [(d, over, pts) for d, over, pts in lines if len(pts) >= 2]
    if not lines:
        return None
    fig, ax = klplot.plt.subplots(figsize=(8, 4.8))
    for dtype, over, pts in lines:
        ax.plot(*zip(*pts), "-" if dtype == "f32" else "--", marker="o", markersize=3, label=f"{dtype}: {labels[over]}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ks = sorted({k for _, _, pts in lines for k, _ in pts})
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.set_yscale("log")
    ax.set_xlabel("K (probabilities kept per row)")
    ax.set_ylabel("speed-up of the dispatcher")
    ax.set_title(f"Lesson 05: fused softmax + top-K vs K, R = 4096, V = 50257, {rows[0]['gpu']}")
    ax.legend(fontsize=7)
    return klplot.save(fig, path)


DECODE = (128256, 50)  # V and K of the rows sweep (R = 1 ... 4096; R <= DECODE_ROWS is decode)
DECODE_ROWS = 256
MOE_VOCAB = 256  # rows this short are MoE routing
GOAL_US = 6.0  # the goal of a decode or MoE cell: at most max(GOAL_US, GOAL_COPIES x its copy time)
GOAL_COPIES = 2.0
DECODE_GOALS_US = {1: 10.0, 8: 15.0}  # and at these rows of the decode shape, at most this


def goal_us(shape, dtype, copy):
    """A decode or MoE cell's goal in µs: max(6 µs, 2 x the time its bytes take at the copy bandwidth)."""
    return max(GOAL_US, GOAL_COPIES * floor_ms(shape, dtype, copy) * 1e3)


def small_cells(rows):
    """{(dtype, shape): {"dispatch": us, "pytorch": us}} at the rows sweep's shapes (V, K = DECODE) and the
    MoE shapes (V <= MOE_VOCAB), FAILED rows left out."""
    cells = {}
    for r in klplot.latest(rows):
        if r["step"] == "copy" or klplot.failed(r) or not (r["name"] == FUSED or r["step"] == "pytorch"):
            continue
        rr, v, k = dims(r["shape"])
        if (v, k) == DECODE or v <= MOE_VOCAB:
            key = FUSED if r["name"] == FUSED else "pytorch"
            cells.setdefault((r["dtype"], r["shape"]), {})[key] = r["ms_median"] * 1e3
    return cells


def small_figure(rows, path):
    """Where top-K runs: µs of the dispatcher and of torch.topk(softmax) against R at V, K = DECODE (left),
    and at the MoE routing shapes (right), f32 and f16, with each cell's goal where the copy was measured."""
    cells = small_cells(rows)
    copy = klplot.copy_gbps(rows)
    decode = sorted((s for s in cells if dims(s[1])[1:] == DECODE), key=lambda s: dims(s[1])[0])
    moe = sorted({s[1] for s in cells if dims(s[1])[1] <= MOE_VOCAB}, key=lambda s: (dims(s)[1], dims(s)[2], dims(s)[0]))
    if not decode and not moe:
        return None
    fig, (left, right) = klplot.plt.subplots(1, 2, figsize=(14, 4.8))
    for dtype in DTYPES:
        for who, style in ((FUSED, "-"), ("pytorch", ":")):
            pts = [(dims(s)[0], cells[(d, s)][who]) for d, s in decode if d == dtype and who in cells[(d, s)]]
            if pts:
                left.plot(*zip(*pts), style, marker="o", markersize=3, label=f"{dtype} {'dispatch' if who == FUSED else 'torch.topk(softmax)'}")
        goals = [(dims(s)[0], goal_us(s, d, copy)) for d, s in decode if d == dtype and dims(s)[0] <= DECODE_ROWS]
        if goals and not math.isnan(copy):
            left.plot(*zip(*goals), "--", color="black", alpha=0.5 if dtype == "f32" else 0.25, linewidth=1,
                      label=f"{dtype} goal: max({GOAL_US:g} µs, {GOAL_COPIES:g} x copy)")
    if decode:
        left.plot(list(DECODE_GOALS_US), list(DECODE_GOALS_US.values()), "x", color="black", markersize=8,
                  label="goals at 1 and 8 rows")
    left.set_xscale("log", base=2)
    left.set_yscale("log")
    left.set_xlabel("R (rows)")
    left.set_ylabel("µs (median)")
    left.set_title(f"rows sweep: V = {DECODE[0]}, K = {DECODE[1]} (decode: R <= {DECODE_ROWS})")
    if left.lines:
        left.legend(fontsize=7)
    width = 0.2
    for j, (dtype, who) in enumerate((d, w) for d in ("f32", "f16") for w in (FUSED, "pytorch")):
        at = [(i + (j - 1.5) * width, s) for i, s in enumerate(moe) if who in cells.get((dtype, s), {})]  # bar x, shape
        if at:
            right.bar([x for x, _ in at], [cells[(dtype, s)][who] for _, s in at], width,
                      label=f"{dtype} {'dispatch' if who == FUSED else 'torch.topk(softmax)'}",
                      color=("tab:blue" if who == FUSED else "tab:gray"), alpha=1.0 if dtype == "f32" else 0.55)
        if who == FUSED and at and not math.isnan(copy):
            right.plot([x for x, _ in at], [goal_us(s, dtype, copy) for _, s in at], "_", color="black", markersize=12,
                       markeredgewidth=2, label="each cell's goal" if j == 0 else None)
    right.set_xticks(range(len(moe)), ["x".join(map(str, dims(s))) for s in moe], rotation=30, ha="right", fontsize=8)
    right.set_yscale("log")
    right.set_ylabel("µs (median)")
    right.set_title(f"MoE routing: R x V (experts) x K; goal max({GOAL_US:g} µs, {GOAL_COPIES:g} x copy)")
    if moe:
        right.legend(fontsize=7)
    fig.suptitle(f"Lesson 05 where top-K runs, {rows[0]['gpu']}")
    return klplot.save(fig, path)


def draw(rows, out_dir):
    paths = [steps_figure(rows, os.path.join(out_dir, "lesson05.png")),
             speedup_figure(rows, os.path.join(out_dir, "lesson05_speedup.png")),
             small_figure(rows, os.path.join(out_dir, "lesson05_small.png"))]
    return [p for p in paths if p]
