"""compare_gpus.py YOUR_DIR REF_DIR: your GPU's numbers beside another GPU's, step by step.

    python3 plots/compare_gpus.py results/$(scripts/gpu_slug.sh) results/h100

For each lessonNN.csv in YOUR_DIR that REF_DIR holds too: the two GPUs and their measured copy
bandwidth, then one line per row of yours whose (lesson, step, name, dtype, shape) REF_DIR measured
as well: your median ms, theirs, and yours / theirs (above 1: your GPU takes longer). Rows are
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
    out.append(f"  {'step':7} {'name':{name_w}} {'dtype':5} {'shape':{shape_w}} {'your ms':>10} "
               f"{label + ' ms':>10} {'yours/' + label:>12}")
    for key in matched:
        y, t = csv_compare.best(a[key]), csv_compare.best(b[key])
        ratio = f"{y / t:.3g}" if y is not None and t is not None else "–"
        out.append(f"  {key[1]:7} {key[2]:{name_w}} {key[3]:5} {key[4]:{shape_w}} {ms(y):>10} {ms(t):>10} {ratio:>12}")
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
