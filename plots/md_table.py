"""md_table.py CSV SHAPE: the rows of one shape as a Markdown table, for a lesson README
(numbers copied from a real run, never typed by hand)."""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import klplot  # noqa: E402


def table(rows, shape):
    rows = [r for r in klplot.latest(rows) if r["shape"] == shape]
    first = next((r for r in rows if r["step"] == "1" and not klplot.failed(r)), None)
    lib = next((r for r in rows if r["step"] == "lib" and not klplot.failed(r)), None)
    gb = any(not math.isnan(r["gbps"]) for r in rows)
    unit = "GB/s" if gb else "TFLOP/s"
    out = [f"| step | name | ms (median) | min – max | {unit} | % of limit | × previous | × step 1 | × library | error |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    previous = None  # the numbered step before this one that has a time: "× previous" is what a step gained
    for r in rows:
        if klplot.failed(r):
            out.append(f"| {r['step']} | {r['name']} | FAILED | | | | | | | {r['max_rel_err']:.1e} |")
            continue
        rate = r["gbps"] if gb else r["tflops"]
        ratio = lambda ref: f"{ref['ms_median'] / r['ms_median']:.3g}" if ref else "–"  # noqa: E731
        err = "" if math.isnan(r["max_rel_err"]) else f"{r['max_rel_err']:.1e}"
        numbered = r["step"].isdigit()
        out.append(f"| {r['step']} | {r['name']} | {r['ms_median']:.4g} | {r['ms_min']:.4g} – {r['ms_max']:.4g} | "
                   f"{rate:.4g} | {r['pct_of_limit']:.1f}% | {ratio(previous) if numbered else '–'} | {ratio(first)} | "
                   f"{ratio(lib)} | {err} |")
        if numbered:
            previous = r
    return "\n".join(out)


def compare(rows, ours, theirs, shapes):
    """Step `ours` against step `theirs` (step labels) at each of `shapes`: ms, GB/s (TFLOP/s for
    compute-bound lessons) and the ratio."""
    rows = klplot.latest(rows)
    pick = lambda step, shape: next((r for r in rows if r["step"] == step and r["shape"] == shape), None)  # noqa: E731
    rate, unit = ("gbps", "GB/s") if any(not math.isnan(r["gbps"]) for r in rows if r["step"] != "copy") else ("tflops", "TFLOP/s")
    out = ["| shape | " + f"{ours} ms | {ours} {unit} | {theirs} ms | {theirs} {unit} | × {theirs} |",
           "|---|---:|---:|---:|---:|---:|"]
    for shape in shapes:
        a, b = pick(ours, shape), pick(theirs, shape)
        if a is None or b is None or klplot.failed(a) or klplot.failed(b):
            out.append(f"| {shape} | – | – | – | – | – |")
            continue
        out.append(f"| {shape} | {a['ms_median']:.4g} | {a[rate]:.4g} | {b['ms_median']:.4g} | {b[rate]:.4g} | "
                   f"{b['ms_median'] / a['ms_median']:.2f} |")
    return "\n".join(out)


def across(rows, shapes):
    """Each step's median ms at each of `shapes` (its inputs differ, e.g. lesson05 --logits), and
    how many times its time at the first shape that is."""
    rows = klplot.latest(rows)
    steps = []
    for r in rows:
        if r["shape"] in shapes and r["step"] != "copy" and (r["step"], r["name"]) not in steps:
            steps.append((r["step"], r["name"]))
    pick = {(r["step"], r["name"], r["shape"]): r for r in rows}
    out = ["| step | name | " + " | ".join(shapes) + " |", "|---|---|" + "---:|" * len(shapes)]
    for step, name in steps:
        base = pick.get((step, name, shapes[0]))
        cells = []
        for shape in shapes:
            r = pick.get((step, name, shape))
            if r is None or klplot.failed(r):
                cells.append("FAILED" if r is not None else "–")
            elif shape == shapes[0] or base is None or klplot.failed(base):
                cells.append(f"{r['ms_median']:.4g} ms")
            else:
                cells.append(f"{r['ms_median']:.4g} ms ({r['ms_median'] / base['ms_median']:.2f} ×)")
        out.append(f"| {step} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: md_table.py CSV SHAPE")
    print(table(klplot.read_rows(sys.argv[1]), sys.argv[2]))
