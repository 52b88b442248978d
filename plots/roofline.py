"""roofline.py DIR: where each step sits against the bandwidth and compute roofs, from the profiles that
scripts/profile.sh wrote (DIR/profile/lessonNN.csv) and the lessons' timed runs (DIR/lessonNN.csv).
Writes DIR/profile/roofline_lessonNN.png per lesson and DIR/profile/roofline.png for the whole course.

A step is a point: x = arithmetic intensity (FLOPs per DRAM byte), y = FLOP/s, both over all the kernels
the step launched at the lesson's default shape (profile rows with no extra args; the timed row is the one
of the shape and dtype the profile names, else of plots/lessonNN.py's DEFAULT_SHAPE). DRAM bytes and the
kernels' durations are ncu's (read + write, gpu__time_duration). FLOPs: the problem's, from the timed
run's TFLOP/s x ms where the lesson reports TFLOP/s (GEMM, attention); else the FP32 arithmetic ncu
counted (2 FFMA + FADD + FMUL: a reduction's adds, softmax's arithmetic; comparisons and MUFU
instructions are not FLOPs). Arrows join the numbered steps in order; library rows are grey crosses.

Roofs, solid where measured in the lesson's run: the device-to-device copy (the copy row of its CSV),
and the compute limit the lesson measures against (its TFLOP/s rows' rate / % of limit: the FP32 peak at
the sustained clock for lesson 06, the tensor-core peak cuBLAS reaches for lessons 08-09). Dashed: the
data-sheet figures for the GPU (NOMINAL), where it is known."""
import collections
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import klplot  # noqa: E402
import profile_table  # noqa: E402
import summary  # noqa: E402

plt = klplot.plt

NOMINAL = klplot.NOMINAL

Point = collections.namedtuple("Point", "step name library flops bytes seconds")


def number(s):
    return float(s) if s not in (None, "") else math.nan


def problem_flops(timed, step, name, shape, dtype):
    """FLOPs of the problem from the timed run's row at the default shape (NaN where it reports none)."""
    for r in klplot.latest(timed):
        if (r["step"], r["name"], r["shape"], r["dtype"]) == (step, name, shape, dtype) and r["tflops"] > 0:
            return r["tflops"] * 1e12 * r["ms_median"] * 1e-3
    return math.nan


def points(profile, timed, lesson):
    """One Point per step of the profile (its kernels summed), in profile order."""
    shape, dtype = summary.default_shape(lesson), summary.default_dtype(lesson)
    steps = collections.OrderedDict()
    for r in profile:
        if r.get("kernel"):
            steps.setdefault((r["step"], r["name"]), []).append(r)
    out = []
    for (step, name), ks in steps.items():
        seconds = sum(number(k["duration_us"]) for k in ks) * 1e-6
        dram = sum(number(k["dram_read_mb"]) + number(k["dram_write_mb"]) for k in ks) * 1e6
        flops = problem_flops(timed, step, name, ks[0].get("shape") or shape, ks[0].get("dtype") or dtype)
        if not math.isfinite(flops):
            flops = sum(number(k["fp32_flops"]) for k in ks)
        out.append(Point(step, name, step in ("lib", "pytorch"), flops, dram, seconds))
    return out


def limits(timed):
    """(copy GB/s, compute TFLOP/s the lesson measures against; NaN where it has no TFLOP/s rows)."""
    compute = [peak for _, peak in klplot.compute_limits(timed)]
    return klplot.copy_gbps(timed), (compute[-1] if compute else math.nan)


def draw_roofs(ax, bw_gbps, peak_tflops, nominal, x):
    xs = [x[0] * (x[1] / x[0]) ** (i / 200) for i in range(201)]  # log-spaced, so the ridge is drawn
    if math.isfinite(bw_gbps):
        ceiling = peak_tflops if math.isfinite(peak_tflops) else math.inf
        ax.plot(xs, [min(bw_gbps * 1e9 * v, ceiling * 1e12) for v in xs], "k-", lw=1.2,
                label=f"copy measured {bw_gbps:.0f} GB/s" + (f", peak {peak_tflops:.1f} TFLOP/s" if ceiling < math.inf else ""))
    for key, style in (("fp32", "C1--"), ("tensor", "C2--")):
        if nominal and key in nominal:
            ax.plot(xs, [min(nominal["bandwidth"] * 1e9 * v, nominal[key] * 1e12) for v in xs], style, lw=0.9,
                    label=f"data sheet: {nominal['bandwidth']} GB/s, {key.replace('fp32', 'FP32')} {nominal[key]} TFLOP/s")


def lesson_figure(pts, bw, peak, nominal, title, path):
    ok = [p for p in pts if p.bytes > 0 and p.seconds > 0 and p.flops > 0]
    if not ok:
        return None
    fig, ax = plt.subplots(figsize=(8, 5))
    ai = [p.flops / p.bytes for p in ok]
    lo, hi = min(ai + [0.1]) / 3, max(ai + [1000.0]) * 3
    draw_roofs(ax, bw, peak, nominal, (lo, hi))
    ours = [p for p in ok if not p.library]
    for a, b in zip(ours, ours[1:]):
        ax.annotate("", xy=(b.flops / b.bytes, b.flops / b.seconds), xytext=(a.flops / a.bytes, a.flops / a.seconds),
                    arrowprops=dict(arrowstyle="->", color="tab:blue", lw=0.8, alpha=0.6))
    for p in ok:
        x, y = p.flops / p.bytes, p.flops / p.seconds
        ax.plot(x, y, "x" if p.library else "o", color="tab:gray" if p.library else "tab:blue", ms=7)
        ax.annotate(f"{p.step} {p.name}" if p.library else p.step, (x, y), textcoords="offset points", xytext=(5, 4),
                    fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte, ncu)")
    ax.set_ylabel("FLOP/s")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="both", alpha=0.2)
    return klplot.save(fig, path)


def course_figure(per_lesson, bw, peak, nominal, path):
    fig, ax = plt.subplots(figsize=(9, 5.5))
    allpts = [p for pts in per_lesson.values() for p in pts if p.bytes > 0 and p.seconds > 0 and p.flops > 0]
    if not allpts:
        return None
    ai = [p.flops / p.bytes for p in allpts]
    lo, hi = min(ai) / 3, max(ai) * 3
    draw_roofs(ax, bw, peak, nominal, (lo, hi))
    for i, (lesson, pts) in enumerate(per_lesson.items()):
        ours = [p for p in pts if not p.library and p.bytes > 0 and p.seconds > 0 and p.flops > 0]
        if not ours:
            continue
        xs, ys = [p.flops / p.bytes for p in ours], [p.flops / p.seconds for p in ours]
        ax.plot(xs, ys, "-", color=f"C{i % 10}", alpha=0.35, lw=0.8)
        ax.plot(xs[:-1], ys[:-1], "o", color=f"C{i % 10}", ms=3, alpha=0.5)
        ax.plot(xs[-1:], ys[-1:], "o", color=f"C{i % 10}", ms=8, label=f"{lesson} (last step large)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte, ncu)")
    ax.set_ylabel("FLOP/s")
    ax.set_title("Every lesson's steps against the roofs (default shapes)")
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    ax.grid(True, which="both", alpha=0.2)
    return klplot.save(fig, path)


def main(out_dir):
    prof_dir = os.path.join(out_dir, "profile")
    slug = os.path.basename(os.path.abspath(out_dir))
    nominal = NOMINAL.get(slug)
    per_lesson, written, bws, peaks = collections.OrderedDict(), [], [], []
    for lesson, csv_path in summary.lessons(out_dir):
        prof = os.path.join(prof_dir, lesson + ".csv")
        if not os.path.exists(prof):
            continue
        timed = klplot.read_rows(csv_path)
        pts = points(profile_table.read(prof), timed, lesson)
        bw, peak = limits(timed)
        bws.append(bw)
        peaks.append(peak)
        per_lesson[lesson] = pts
        path = lesson_figure(pts, bw, peak, nominal, f"Lesson {lesson[-2:]}: roofline at the default shape",
                             os.path.join(prof_dir, f"roofline_{lesson}.png"))
        if path:
            written.append(path)
    if not per_lesson:
        sys.exit(f"roofline: no {prof_dir}/lessonNN.csv beside a {out_dir}/lessonNN.csv")
    bw = max((b for b in bws if math.isfinite(b)), default=math.nan)
    peak = max((p for p in peaks if math.isfinite(p)), default=math.nan)
    path = course_figure(per_lesson, bw, peak, nominal, os.path.join(prof_dir, "roofline.png"))
    if path:
        written.append(path)
    for p in written:
        print("wrote", os.path.relpath(p, klplot.ROOT))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: roofline.py DIR   (e.g. results/h100)")
    main(sys.argv[1])
