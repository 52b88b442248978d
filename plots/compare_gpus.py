"""compare_gpus.py YOUR_DIR REF_DIR: your GPU's numbers beside another GPU's, step by step.

    python3 plots/compare_gpus.py results/$(scripts/gpu_slug.sh) results/h100

For each lessonNN.csv in YOUR_DIR that REF_DIR holds too: the two GPUs and their measured copy
bandwidth, then one line per row of yours whose (lesson, step, name, dtype, shape) REF_DIR measured
as well: your median ms, theirs, yours / theirs (above 1: your GPU takes longer), that ratio over the
ratio the two copies predict for a step bound by DRAM bandwidth (÷ copies; 1: it follows the bandwidth,
above 1: it lags it), and what it follows (follows_what: bandwidth, same, partly, neither). Rows are
matched as scripts/csv_compare.py matches them (where a file holds a row several times, its best
median). Exit 0: another GPU's numbers are not a failure; 2 on bad usage."""
import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scripts"))
import csv_compare  # noqa: E402
import klplot  # noqa: E402


def ms(t):
    return "FAILED" if t is None else f"{t:.4g}"


def follows_what(ratio, copies, within=0.05):
    """What a step's time ratio between two GPUs follows: "bandwidth" where it is the ratio of their
    copies (within 5 %), "same" where it did not change (bound by what both GPUs share: the SM clock,
    latency, or the launch), else "partly" (between the two) or "neither"."""
    if abs(ratio / copies - 1) <= within:
        return "bandwidth"
    if abs(ratio - 1) <= within:
        return "same"
    return "partly" if min(copies, 1) < ratio < max(copies, 1) else "neither"


def compare(yours, theirs, label):
    """The lines for one lesson: `yours` and `theirs` are klplot.read_rows' rows, `label` names theirs."""
    a, b = csv_compare.index(yours), csv_compare.index(theirs)
    matched = [k for k in a if k in b]
    gpu = lambda rows: rows[-1]["gpu"] if rows else "?"  # noqa: E731
    copy = lambda rows: f"copy {klplot.copy_gbps(rows):.0f} GB/s"  # noqa: E731
    out = [f"{yours[0]['lesson'] if yours else '?'}: yours {gpu(yours)} ({copy(yours)}), "
           f"{label} {gpu(theirs)} ({copy(theirs)})"]
    if not matched:
        return out + [f"  no row of yours was measured in {label}'s run"]
    name_w = max(len("name"), *(len(k[2]) for k in matched))
    shape_w = max(len("shape"), *(len(k[4]) for k in matched))
    # what the copies predict for a step bound by DRAM bandwidth: its time scales as 1 / copy bandwidth
    copies = klplot.copy_gbps(theirs) / klplot.copy_gbps(yours)
    out.append(f"  {'step':7} {'name':{name_w}} {'dtype':5} {'shape':{shape_w}} {'your ms':>10} "
               f"{label + ' ms':>10} {'yours/' + label:>12} {'÷ copies':>9}  follows")
    for key in matched:
        y, t = csv_compare.best(a[key]), csv_compare.best(b[key])
        ratio = f"{y / t:.3g}" if y is not None and t is not None else "–"
        vs, follows = "–", ""
        if y is not None and t is not None and copies == copies:
            vs, follows = f"{y / t / copies:.3g}", follows_what(y / t, copies)
        out.append(f"  {key[1]:7} {key[2]:{name_w}} {key[3]:5} {key[4]:{shape_w}} {ms(y):>10} {ms(t):>10} {ratio:>12}"
                   f" {vs:>9}  {follows}".rstrip())
    if len(matched) < len(a):
        out.append(f"  ({len(a) - len(matched)} rows of yours have no {label} row to compare with)")
    return out


def main(your_dir, ref_dir):
    label = os.path.basename(os.path.normpath(ref_dir))
    for path in sorted(glob.glob(os.path.join(your_dir, "lesson[0-9][0-9].csv"))):
        ref = os.path.join(ref_dir, os.path.basename(path))
        print()
        if not os.path.exists(ref):
            print(f"{os.path.basename(path)[:-4]}: {ref_dir} has no {os.path.basename(path)}")
            continue
        print("\n".join(compare(klplot.read_rows(path), klplot.read_rows(ref), label)))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: compare_gpus.py YOUR_DIR REF_DIR", file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1], sys.argv[2])
