"""readme_tables.py README.md...: regenerates every table in a lesson README from the committed CSV,
so the numbers a student reads are the numbers a run wrote.
readme_tables.py --check README.md...: changes nothing; names each table that differs from what the
committed CSV gives (README, line, marker, and the difference) and exits 1 if any does (ctest
readme_tables.check runs it over README.md and every lessons/*/README.md). A table sits between

    <!-- table results/h100/lesson02.csv n=67108864 [dtype=f16] [steps=4,5,lib] -->
    <!-- table results/h100/lesson03.csv n=1048576,n=16777216 compare=9,lib -->  (step 9 vs lib)
    <!-- table results/h100/lesson05_ties.csv S1,S2,S3 dtype=f32 across=shapes -->  (each step at each shape)
    ...generated...
    <!-- /table -->

(the CSV path is relative to the repository root). A table shows one GPU's rows: those of the GPU
the CSV's folder is for (klplot.read_rows), and a CSV under results/<gpu>/ that holds no rows of
that GPU is an error, so another GPU's run never appears under the committed GPU's name.

The root README's ladder sits between

    <!-- ladder results/h100 -->
    ...generated: one row per results/h100/lessonNN.csv...
    <!-- /ladder -->

(the folder is relative to the repository root, and so are the links to lessons/NN_*/README.md): each
lesson's best step at its default shape and dtype, with the library and PyTorch rows at that shape and
dtype, chosen as plots/summary.py chooses them (summary.standing). --check covers it as it covers a table."""
import difflib
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import klplot  # noqa: E402
import md_table  # noqa: E402
import summary  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = re.compile(r"(<!-- table (\S+) (\S+)((?: \w+=\S+)*) -->\n)(.*?)(<!-- /table -->)", re.S)
LADDER = re.compile(r"(<!-- ladder (\S+) -->\n)(.*?)(<!-- /ladder -->)", re.S)


def rows_of(csv_path):
    """The CSV's rows of one GPU; under results/<gpu>/ they must be that GPU's."""
    rows = klplot.read_rows(os.path.join(ROOT, csv_path))
    gpus = {r["gpu"] for r in rows}
    assert len(gpus) <= 1, gpus  # klplot.read_rows keeps one GPU's rows
    parts = csv_path.split("/")
    if len(parts) == 3 and parts[0] == "results":
        other = [g for g in gpus if klplot.gpu_slug(g) != parts[1]]
        if other:
            sys.exit(f"readme_tables: {csv_path} holds rows of {other[0]}, whose folder is "
                     f"results/{klplot.gpu_slug(other[0])}/, and none of a {parts[1]} GPU: a README table shows "
                     f"the {parts[1]} run only")
    return rows


def render(match):
    head, csv_path, shape, opts = match.group(1), match.group(2), match.group(3), match.group(4)
    options = dict(o.split("=", 1) for o in opts.split())
    rows = rows_of(csv_path)
    if "dtype" in options:
        rows = [r for r in rows if r["dtype"] == options["dtype"]]
    if "steps" in options:
        keep = options["steps"].split(",")
        rows = [r for r in rows if r["step"] in keep]
    if options.get("across") == "shapes":  # shape is a comma-separated list; each step's ms at each
        return head + md_table.across(rows, shape.split(",")) + "\n" + match.group(6)
    if "compare" in options:  # shape is then a comma-separated list of shapes
        ours, theirs = options["compare"].split(",")
        return head + md_table.compare(rows, ours, theirs, shape.split(",")) + "\n" + match.group(6)
    return head + md_table.table(rows, shape) + "\n" + match.group(6)


def lesson_link(lesson):
    """'lesson01' -> '[01 naive reductions](lessons/01_naive_reduction/README.md)': the title is what
    follows "— " in the first line of the lesson's README; the link is relative to the repository root."""
    number = lesson[len("lesson"):]
    dirs = sorted(d for d in os.listdir(summary.LESSONS) if d.startswith(number + "_"))
    if len(dirs) != 1:
        sys.exit(f"readme_tables: no single lessons/{number}_*/ for {lesson}")
    with open(os.path.join(summary.LESSONS, dirs[0], "README.md")) as f:
        title = f.readline().strip().split(" — ", 1)[-1].lstrip("# ")
    return f"[{number} {title}](lessons/{dirs[0]}/README.md)"


def ladder(out_dir):
    """One row per out_dir/lessonNN.csv: the best step at the lesson's default shape and dtype, and
    the library and PyTorch rows there (× = their median time / our best step's: above 1, ours is faster)."""
    out = ["| lesson | default run | best step | ms | rate | % of limit | × step 1 | library ms | × library | "
           "PyTorch ms | × PyTorch |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for lesson, csv_path in summary.lessons(os.path.join(ROOT, out_dir)):
        shape, dtype = summary.default_shape(lesson), summary.default_dtype(lesson)
        s = summary.standing(rows_of(f"{out_dir}/{lesson}.csv"), shape, dtype)
        run = f"`{shape}` {dtype}"
        if s.best is None:
            out.append(f"| {lesson_link(lesson)} | {run} | {s.problem} | | | | | | | | |")
            continue
        best = s.best
        times = lambda ref: ((f"{ref['ms_median']:.4g} (`{ref['name']}`)",  # noqa: E731
                              summary.ratio(ref["ms_median"] / best["ms_median"])) if ref else ("–", "–"))
        step = f"{best['step']} `{best['name']}`" + (f"; FAILED: {', '.join(s.failed)}" if s.failed else "")
        out.append(" | ".join([f"| {lesson_link(lesson)}", run, step, f"{best['ms_median']:.4g}", summary.rate(best),
                               f"{best['pct_of_limit']:.1f}%", times(s.first)[1], *times(s.lib), *times(s.pytorch)])
                   + " |")
    return "\n".join(out)


def render_ladder(match):
    return match.group(1) + ladder(match.group(2)) + "\n" + match.group(4)


BLOCKS = ((BLOCK, render), (LADDER, render_ladder))


def stale_tables(path, text):
    """(line, marker, diff) for each table and ladder in `text` that differs from what its CSV gives."""
    stale = []
    matches = sorted(((m, fill) for pattern, fill in BLOCKS for m in pattern.finditer(text)),
                     key=lambda mf: mf[0].start())
    for match, fill in matches:
        old, new = match.group(0), fill(match)
        if new != old:
            line = text.count("\n", 0, match.start()) + 1
            diff = difflib.unified_diff(old.splitlines(), new.splitlines(), "README", "CSV", n=0, lineterm="")
            stale.append((line, match.group(1).strip(), [d for d in diff if not d.startswith(("---", "+++", "@@"))]))
    return stale


def main(paths, check=False):
    """Regenerates the tables in `paths`; with check=True changes nothing and returns 1 if a table is stale."""
    stale = 0
    for path in paths:
        with open(path) as f:
            text = f.read()
        if check:
            for line, marker, diff in stale_tables(path, text):
                stale += 1
                print(f"{path}:{line}: {marker} differs from the committed CSV")
                for d in diff[:20]:
                    print("    " + d)
                if len(diff) > 20:
                    print(f"    ... {len(diff) - 20} more lines")
            continue
        new = text
        for pattern, fill in BLOCKS:
            new = pattern.sub(fill, new)
        if new != text:
            with open(path, "w") as f:
                f.write(new)
            print("updated", path)
    if stale:
        print(f"{stale} stale table(s): run python3 plots/readme_tables.py on the README(s) above and commit them")
    return 1 if stale else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    check = "--check" in args
    paths = [a for a in args if a != "--check"]
    if not paths:
        sys.exit("usage: readme_tables.py [--check] README.md...")
    sys.exit(main(paths, check))
