"""readme_tables.py README.md...: regenerates every table and quoted value in a README from the committed CSV,
so the numbers a student reads are the numbers a run wrote.
readme_tables.py --check README.md...: changes nothing; names each table that differs from what the
committed CSV gives (README, line, marker, and the difference) and exits 1 if any does (ctest
readme_tables.check runs it over README.md and every lessons/*/README.md). A table sits between

    <!-- table results/h100/lesson02.csv n=67108864 [dtype=f16] [steps=4,5,lib] -->
    <!-- table results/h100/lesson03.csv n=1048576,n=16777216 compare=9,lib -->  (step 9 vs lib)
    <!-- table results/h100/lesson05_ties.csv S1,S2,S3 dtype=f32 across=shapes -->  (each step at each shape)
    ...generated...
    <!-- /table -->

(the CSV path is relative to the repository root), and a sweep table, one row per shape and one column
per dtype and step:

    <!-- table results/h100/lesson04.csv MxK=* dtype=f32,f16 sweep=7,best,pytorch label=K -->

(SHAPES as a range marker's, dtype= a list; each cell the step's GB/s there, TFLOP/s for a compute-bound
lesson, `best` the fastest numbered step that is not itself a column, as "step: rate"; label=DIM names a
row by one dimension of its shape, K of MxK=16384x4096, and orders the rows by it).

A table shows one GPU's rows: those of the GPU the CSV's folder is for (klplot.read_rows), and a CSV
under results/<gpu>/ that holds no rows of that GPU is an error, so another GPU's run never appears
under the committed GPU's name.

The root README's ladder sits between

    <!-- ladder results/h100 -->
    ...generated: one row per results/h100/lessonNN.csv...
    <!-- /ladder -->

(the folder is relative to the repository root, and so are the links to lessons/NN_*/README.md): each
lesson's best step at its default shape and dtype, with the library and PyTorch rows at that shape and
dtype, chosen as plots/summary.py chooses them (summary.standing). --check covers it as it covers a table.

A number quoted in prose sits between

    <!-- value results/h100/lesson01.csv 4 n=67108864 pct_of_limit -->75<!-- /value -->
    <!-- value CSV STEP SHAPE [dtype=D] FIELD [fmt=F] -->...generated...<!-- /value -->

(inline; the marker must not begin a line, where Markdown would read it as an HTML block): one field of
the latest row of step STEP at SHAPE (and dtype D; needed where the CSV has that step at that shape in
several dtypes). STEP is a step label, or LABEL/NAME where several rows share a label (lib/cublas,
lib/cublas+epilogue: NAME is the row's name or its part before "["). FIELD is a CSV column (ms_median,
gbps, tflops, pct_of_limit, ms_min, ms_max, max_rel_err), the limit it is measured against (limit_ms:
the time this work takes at the limit, the floor, = ms_median · pct_of_limit / 100; limit_gbps,
limit_tflops: the limit itself, the run's copy bandwidth or peak; over_limit = ms_median / limit_ms, how
many times the floor), or a ratio x_REF = step REF's median time / this step's at the same shape and
dtype (above 1, this step is faster): x_step1, x_step3 (numbered steps), x_lib, x_lib/cublas,
x_pytorch, x_pytorch_topk (any other label). F is a Python format spec (.0f, .1f, .3f) or Nsig: N
significant digits, never in exponent notation (2943.6 -> 2940 with 3sig); the default is 4sig for
times and GB/s, 3sig for TFLOP/s and limit_ms, .0f for pct_of_limit, .1e for max_rel_err and 2sig for a
ratio and over_limit. rows=first quotes the first row written of the step at the shape (a CSV that holds
a default run and then a sweep: the default run's) instead of the latest. --check covers values as it
covers tables; a marker naming no row, a FAILED row or an unknown field is an error (file:line), not a
stale value.

A range quoted in prose sits between

    <!-- range results/h100/lesson02.csv 4,5,6,lib n=67108864,n=268435456 pct_of_limit -->90–106<!-- /range -->
    <!-- range CSV STEPS SHAPES [dtype=D] FIELD [fmt=F] -->...generated...<!-- /range -->

(inline, like a value): "min–max" (en dash; one number where both ends format alike) of FIELD over the
latest rows of the steps in STEPS at the shapes in SHAPES, both comma-separated lists, `*` for all,
and a SHAPES entry ending in `*` a prefix match (n=2*). FIELD, fmt, dtype= and rows=first read as for a
value; each row picked must be the only one of its step and shape (else give dtype= or LABEL/NAME) and
must not have FAILED, and a named step or shape entry that picks no row is an error (file:line).
rows=all takes every row written, not only the latest of each step and shape: the spread of the copy
rows of all the runs in a CSV (`<!-- range CSV copy * rows=all gbps -->`); it quotes no ratio.

A lesson's limits against the GPU's data sheet (klplot.NOMINAL), one row each: the copy bandwidth and
the compute rate its % of limit is of, as the run measured or computed them:

    <!-- limits results/h100/lesson06.csv -->
    ...generated...
    <!-- /limits -->

The profiler's counters (scripts/profile.sh's results/<gpu>/profile/lessonNN.csv, its rows at the
default shape) as a table, one row per kernel:

    <!-- profile results/h100/profile/lesson06.csv -->
    ...generated...
    <!-- /profile -->

and one counter quoted in prose (inline, like a value):

    <!-- counter results/h100/profile/lesson06.csv 4 smem_conflicts fmt=3sig -->16.4 M<!-- /counter -->
    <!-- counter PROFILE_CSV STEP COLUMN [kernel=K] [fmt=F] -->...generated...<!-- /counter -->

and the share of the profiler's warp samples at some SASS instructions (ncu's PC sampling exported per
instruction by scripts/profile.sh --sass, the rows kept in results/<gpu>/profile/*_sass.csv), inline too:

    <!-- sass results/h100/profile/lesson09_step8_d64_sass.csv MUFU -->31.9 %<!-- /sass -->
    <!-- sass SASS_CSV WHAT [reason=R] [fmt=F] -->...generated...<!-- /sass -->

WHAT an offset (0x1b40: that instruction) or an opcode (MUFU, WARPGROUP.DEPBAR: every listed instruction
whose opcode, predicate left out, starts with it); reason=R counts only the samples of that stall reason
(wait, mio, barrier, ...; a row lists its top three). The share is of all the kernel's samples.

STEP a step label or name; COLUMN one of the profile CSV's (plots/profile_table.py lists them; a stall
reason's share: stall1_share ...); kernel=K, the kernel's index among the step's (0 first), where the step
launched several. Counts get an SI prefix (16.4 M), megabyte columns their unit (295 MB, 3.35 GB), shares
are shown in %, fmt as for a value (default 3sig)."""
import csv
import difflib
import functools
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import klplot  # noqa: E402
import md_table  # noqa: E402
import profile_table as profiles  # noqa: E402
import summary  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = re.compile(r"(<!-- table (\S+) (\S+)((?: \w+=\S+)*) -->\n)(.*?)(<!-- /table -->)", re.S)
LADDER = re.compile(r"(<!-- ladder (\S+) -->\n)(.*?)(<!-- /ladder -->)", re.S)
VALUE = re.compile(r"(<!-- value\s((?:(?!-->).)*?)\s*-->)([^<\n]*)(<!-- /value -->)", re.S)
RANGE = re.compile(r"(<!-- range\s((?:(?!-->).)*?)\s*-->)([^<\n]*)(<!-- /range -->)", re.S)
LIMITS = re.compile(r"(<!-- limits (\S+) -->\n)(.*?)(<!-- /limits -->)", re.S)
PROFILE = re.compile(r"(<!-- profile (\S+) -->\n)(.*?)(<!-- /profile -->)", re.S)
COUNTER = re.compile(r"(<!-- counter\s((?:(?!-->).)*?)\s*-->)([^<\n]*)(<!-- /counter -->)", re.S)
SASS = re.compile(r"(<!-- sass\s((?:(?!-->).)*?)\s*-->)([^<\n]*)(<!-- /sass -->)", re.S)
DEFAULT_FMT = {"ms_median": "4sig", "ms_min": "4sig", "ms_max": "4sig", "gbps": "4sig", "tflops": "3sig",
               "pct_of_limit": ".0f", "max_rel_err": ".1e", "limit_ms": "3sig", "limit_gbps": "4sig",
               "limit_tflops": "3sig", "over_limit": "2sig"}
# The limit a row is measured against, from its own columns (pct_of_limit = 100 · floor / time = 100 · rate / limit).
DERIVED = {"limit_ms": lambda r: r["ms_median"] * r["pct_of_limit"] / 100,
           "limit_gbps": lambda r: r["gbps"] * 100 / r["pct_of_limit"],
           "limit_tflops": lambda r: r["tflops"] * 100 / r["pct_of_limit"],
           "over_limit": lambda r: 100 / r["pct_of_limit"]}
ROWS = ("last", "first", "all")  # rows=: which rows of a step at a shape a marker reads
RATIO_FMT = "2sig"
significant = klplot.significant  # Nsig formats


class MarkerError(ValueError):
    """A marker that names no row, a FAILED row, an unknown field or a bad format."""


@functools.lru_cache(maxsize=None)
def rows_of(csv_path):
    """The CSV's rows of one GPU; under results/<gpu>/ they must be that GPU's. Read once per run:
    a README names the same CSV in many markers, and no caller changes the rows."""
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


def dimension(shape, dim):
    """One dimension of a shape, with its suffix: ('MxK=16380x4097', 'K') -> '4097', ('BxD=8x64;causal', 'D')
    -> '64;causal'."""
    names, _, values = shape.partition("=")
    values, _, suffix = values.partition(";")
    named = dict(zip(names.split("x"), values.split("x")))
    if dim not in named:
        raise MarkerError(f"label={dim}: {shape} has no dimension {dim}")
    return named[dim] + (f";{suffix}" if suffix else "")


def sweep(rows, shapes, columns, dtypes, label=None):
    """One row per shape (ordered by its `label` dimension when given), one column per dtype and
    column: a step's GB/s (TFLOP/s for a compute-bound lesson) at that shape, the step given as a label or
    as LABEL/NAME (lib/cublas) where several rows share the label; `best`: the fastest numbered step that
    is not itself a column, as 'step: rate'; `best:REF` (best:lib/cublas): the fastest numbered step of all
    and its speed over REF's at that shape, as 'step: ratio×'. '–' where a step has no row."""
    rows = [r for r in klplot.latest(rows) if r["step"] != "copy" and r["dtype"] in dtypes]
    rate, unit = ("gbps", "GB/s") if any(not math.isnan(r["gbps"]) for r in rows) else ("tflops", "TFLOP/s")
    if label:
        shapes = sorted(shapes, key=lambda s: float(dimension(s, label).split(";")[0]))
    names = {}
    for c in columns:
        if c == "best":
            continue
        if c.startswith("best:"):
            names[c] = f"best ÷ {c[len('best:'):].split('/')[-1]}"
            continue
        named = sorted({r["name"] for r in rows if step_matches(c, r)})
        if len(named) > 1:
            raise MarkerError(f"step {c} has rows named {', '.join(named)}: a sweep column is one row a shape "
                              f"(name one: {c}/NAME)")
        names[c] = named[0] if named else c
    head = [f"{d} {names.get(c, c)}" + ("" if c.startswith("best:") else f" {unit}") for d in dtypes for c in columns]
    out = ["| " + " | ".join([label or "shape"] + head) + " |", "|---|" + "---:|" * (len(dtypes) * len(columns))]
    for shape in shapes:
        cells = [dimension(shape, label) if label else shape]
        for d in dtypes:
            at = [r for r in rows if r["shape"] == shape and r["dtype"] == d]
            for c in columns:
                if c == "best" or c.startswith("best:"):
                    skip = columns if c == "best" else ()
                    ours = [r for r in at if r["step"].isdigit() and r["step"] not in skip and not klplot.failed(r)]
                    best = min(ours, key=lambda r: r["ms_median"], default=None)
                    ref = next((r for r in at if step_matches(c[len("best:"):], r) and not klplot.failed(r)), None)
                    if c == "best":
                        cells.append(f"{best['step']}: {best[rate]:.4g}" if best else "–")
                    else:
                        cells.append(f"{best['step']}: {ref['ms_median'] / best['ms_median']:.2f}×" if best and ref
                                     else "–")
                    continue
                r = next((r for r in at if step_matches(c, r)), None)
                cells.append("–" if r is None else "FAILED" if klplot.failed(r) else f"{r[rate]:.4g}")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def render(match):
    head, csv_path, shape, opts = match.group(1), match.group(2), match.group(3), match.group(4)
    options = dict(o.split("=", 1) for o in opts.split())
    rows = rows_of(csv_path)
    if "sweep" in options:  # shape is a SHAPES list as in a range marker, dtype a list of dtypes
        dtypes = options.get("dtype", "").split(",") if "dtype" in options else sorted(
            {r["dtype"] for r in rows if r["step"] != "copy"})
        entries = shape.split(",")
        shapes = list(dict.fromkeys(r["shape"] for r in rows if r["step"] != "copy" and r["dtype"] in dtypes
                                    and any(shape_matches(e, r["shape"]) for e in entries)))
        if not shapes:
            raise MarkerError(f"{csv_path} has no {','.join(dtypes)} row at {shape}")
        table = sweep(rows, shapes, options["sweep"].split(","), dtypes, options.get("label"))
        return head + table + "\n" + match.group(6)
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


def format_value(v, fmt):
    if re.fullmatch(r"[1-9]\d*sig", fmt):
        return klplot.significant(v, int(fmt[:-3]))
    try:
        return format(v, fmt)
    except ValueError as e:
        raise MarkerError(f"fmt={fmt} is neither a Python format spec for a float nor Nsig ({e})")


def parse(tokens, usage):
    """(the three leading tokens, {dtype, fmt}, FIELD) of a value or range marker's tokens."""
    if len(tokens) < 4:
        raise MarkerError(usage)
    options, fields = {}, []
    for t in tokens[3:]:
        if "=" in t:
            key, val = t.split("=", 1)
            if key not in ("dtype", "fmt", "rows"):
                raise MarkerError(f"unknown option {key}=: {usage}")
            if key == "rows" and val not in ROWS:
                raise MarkerError(f"rows={val}: one of {', '.join(ROWS)}")
            options[key] = val
        else:
            fields.append(t)
    if len(fields) != 1:
        raise MarkerError(f"{len(fields)} fields ({' '.join(fields) or 'none'}): {usage}")
    field = fields[0]
    if field not in DEFAULT_FMT and not field.startswith("x_"):
        raise MarkerError(f"unknown field {field}: one of {', '.join(DEFAULT_FMT)} or a ratio x_step1, x_lib, "
                          "x_pytorch, ...")
    if options.get("rows") == "all" and field.startswith("x_"):
        raise MarkerError(f"rows=all quotes a row's own fields, not a ratio ({field}): the ratio's other row "
                          "would be ambiguous")
    return tokens[:3], options, field


def first(rows):
    """Keeps the first row written for each (step, name, dtype, shape): klplot.latest's opposite."""
    seen = {}
    for r in rows:
        seen.setdefault((r["step"], r["name"], r["dtype"], r["shape"]), r)
    return list(seen.values())


def selected(csv_path, which):
    """The rows of `csv_path` a marker with rows=`which` reads: the latest of each step and shape, the
    first, or all."""
    rows = rows_of(csv_path)
    return {"last": klplot.latest, "first": first, "all": list}[which or "last"](rows)


def step_matches(entry, row):
    """A STEP entry: a label (lib), or LABEL/NAME (lib/cublas), NAME the row's name or its part before "["."""
    label, _, name = entry.partition("/")
    return row["step"] == label and (not name or name in (row["name"], row["name"].split("[")[0]))


def picker(csv_path, rows):
    """pick(label, shape, dtype): the one row of step `label` (or LABEL/NAME) at `shape` (and dtype) among
    `rows`, or MarkerError."""
    def pick(label, shape, dtype):
        at = [r for r in rows if step_matches(label, r) and r["shape"] == shape and dtype in (None, r["dtype"])]
        where = f"step {label} at {shape}" + (f" dtype={dtype}" if dtype else "")
        if not at:
            here = sorted({r["step"] for r in rows if r["shape"] == shape and dtype in (None, r["dtype"])})
            raise MarkerError(f"{csv_path} has no row of {where}" +
                              (f" (steps there: {', '.join(here)})" if here else " (no row at that shape)"))
        if len(at) > 1:
            which = ", ".join(f"{r['name']} {r['dtype']}" for r in at)
            hint = "give dtype=" if len({r["dtype"] for r in at}) > 1 else f"name one: {label}/NAME"
            raise MarkerError(f"{csv_path} has {len(at)} rows of {where} ({which}): {hint}")
        if klplot.failed(at[0]):
            raise MarkerError(f"{where} FAILED in {csv_path}: it has no time to quote")
        return at[0]
    return pick


def field_of(pick, csv_path, row, field):
    """FIELD of `row`: a CSV column, or x_REF = REF's median time / this row's at its shape and dtype."""
    if field.startswith("x_"):
        ref = field[2:]
        ref = ref[len("step"):] if re.fullmatch(r"step\d+(/.*)?", ref) else ref
        return pick(ref, row["shape"], row["dtype"])["ms_median"] / row["ms_median"]
    v = DERIVED[field](row) if field in DERIVED else row[field]
    if math.isnan(v):
        raise MarkerError(f"step {row['step']} at {row['shape']} has no {field} in {csv_path}")
    return v


def value(tokens):
    """The text of one value marker's number, from its tokens: CSV STEP SHAPE [dtype=D] FIELD [fmt=F]."""
    (csv_path, step, shape), options, field = parse(tokens, "a value marker reads CSV STEP SHAPE "
                                                    "[dtype=D] [rows=first] FIELD [fmt=F]")
    if options.get("rows") == "all":
        raise MarkerError("rows=all is for a range marker: a value quotes one row")
    pick = picker(csv_path, selected(csv_path, options.get("rows")))
    row = pick(step, shape, options.get("dtype"))
    v = field_of(pick, csv_path, row, field)
    return format_value(v, options.get("fmt", DEFAULT_FMT.get(field, RATIO_FMT)))


def shape_matches(entry, shape):
    """A SHAPES entry: `*` (any shape), a prefix ending in `*` (RxVxK=4096x*), or one exact shape."""
    return entry == "*" or (shape.startswith(entry[:-1]) if entry.endswith("*") else shape == entry)


def value_range(tokens):
    """The text of one range marker, from its tokens: CSV STEPS SHAPES [dtype=D] FIELD [fmt=F] -> 'LO–HI'
    (or one number where both ends format alike): FIELD's min and max over the latest rows of the steps
    in STEPS at the shapes in SHAPES (comma-separated; `*` for all, a SHAPES entry may end in a `*` prefix
    match). Every row picked must pass its check and be the only one of its step and shape (give dtype=
    where several dtypes are there); each step and each shape entry named must pick at least one row."""
    usage = ("a range marker reads CSV STEPS SHAPES [dtype=D] [rows=first|all] FIELD [fmt=F] (STEPS, SHAPES "
             "comma-separated or *)")
    (csv_path, steps, shapes), options, field = parse(tokens, usage)
    steps, shapes, dtype = steps.split(","), shapes.split(","), options.get("dtype")
    rows = selected(csv_path, options.get("rows"))
    pick = picker(csv_path, rows)
    at = [r for r in rows if ("*" in steps or any(step_matches(s, r) for s in steps)) and dtype in (None, r["dtype"])
          and any(shape_matches(e, r["shape"]) for e in shapes)]
    where = f"steps {','.join(steps)} at {','.join(shapes)}" + (f" dtype={dtype}" if dtype else "")
    if not at:
        raise MarkerError(f"{csv_path} has no row of {where}")
    for s in steps:
        if s != "*" and not any(step_matches(s, r) for r in at):
            raise MarkerError(f"{csv_path} has no row of step {s} among {where}")
    for e in shapes:
        if not any(shape_matches(e, r["shape"]) for r in at):
            raise MarkerError(f"{csv_path} has no row at {e} among {where}")
    if options.get("rows") == "all":  # every row written: none may have FAILED, and no ratio is asked
        for r in at:
            if klplot.failed(r):
                raise MarkerError(f"step {r['step']} at {r['shape']} FAILED in a run in {csv_path}: it has no time")
        values = [field_of(pick, csv_path, r, field) for r in at]
    else:
        names = [s for s in steps if "/" in s]  # a LABEL/NAME entry picks its row by name
        values = [field_of(pick, csv_path, pick(next((s for s in names if step_matches(s, r)), r["step"]),
                                                 r["shape"], dtype), field) for r in at]
    fmt = options.get("fmt", DEFAULT_FMT.get(field, RATIO_FMT))
    lo, hi = format_value(min(values), fmt), format_value(max(values), fmt)
    return lo if lo == hi else f"{lo}–{hi}"


@functools.lru_cache(maxsize=None)
def profile_rows(csv_path):
    """scripts/profile.sh's rows at the lesson's default shape (profiles.read), read once per run."""
    path = os.path.join(ROOT, csv_path)
    if not os.path.exists(path):
        raise MarkerError(f"no {csv_path} (scripts/profile.sh writes it)")
    return profiles.read(path)


def microseconds(us):
    """26120.4 -> "26,120"; 68.42 -> "68.4"."""
    return f"{us:,.0f}" if us >= 1000 else f"{us:.3g}"


def profile_table(csv_path):
    """One row per kernel of each step: time, DRAM throughput, L2 hit rate, occupancy, registers, issue
    slots, the busiest pipe, and the top stall reason with its share of the stall cycles."""
    out = ["| step | kernel | µs | DRAM % of peak | L2 hit % | occupancy % | registers | issue slots % | "
           "FMA / tensor / MUFU pipe % | top stall (share) |", "|---|---|" + "---:|" * 7 + "---|"]
    for r in profile_rows(csv_path):
        if not r["kernel"]:
            out.append(f"| {r['step']} {r['name']} | {r['note'] or 'no kernel'} |" + " |" * 8)
            continue
        kernel = r["kernel"] if len(r["kernel"]) <= 40 else r["kernel"][:37] + "…"
        pct = lambda c: f"{float(r[c]):.0f}" if r[c] else "–"  # noqa: E731
        pipes = " / ".join(pct(c) for c in ("fma_pct", "tensor_pct", "mufu_pct"))
        stall = f"{r['stall1']} ({float(r['stall1_share']):.0%})" if r["stall1"] else "–"
        out.append(f"| {r['step']} {r['name']} | `{kernel.replace('|', '/')}` | {microseconds(float(r['duration_us']))} | "
                   f"{pct('dram_pct_of_peak')} | {pct('l2_hit_pct')} | {pct('occupancy_pct')} | {r['registers']} | "
                   f"{pct('issue_pct')} | {pipes} | {stall} |")
    return "\n".join(out)


def limits_table(csv_path):
    """The limits of a lesson's run against the GPU's data sheet (klplot.NOMINAL): the copy bandwidth (the
    spread of the copy rows of every run in the CSV) and, where the lesson reports TFLOP/s, the compute
    rate its % of limit is of (FP32 for f32 rows, else the tensor cores')."""
    rows = rows_of(csv_path)
    slug = csv_path.split("/")[1] if csv_path.startswith("results/") else ""
    nominal = klplot.NOMINAL.get(slug)
    copies = [r["gbps"] for r in rows if r["step"] == "copy" and math.isfinite(r["gbps"])]
    if not copies:
        raise MarkerError(f"{csv_path} has no copy row")
    sheet = f"data sheet ({nominal['name']})" if nominal else "data sheet"
    out = [f"| limit | {sheet} | this run | run ÷ data sheet |", "|---|---:|---:|---:|"]
    def spread(lo, hi, fmt):
        a, b = format(lo, fmt), format(hi, fmt)
        return a if a == b else f"{a}–{b}"

    lo, hi = min(copies), max(copies)
    ratio = spread(lo / nominal["bandwidth"], hi / nominal["bandwidth"], ".2f") if nominal else "–"
    out.append(f"| DRAM bandwidth, GB/s | {nominal['bandwidth'] if nominal else '–'} | {spread(lo, hi, '.0f')} (a "
               f"device-to-device copy, bytes read + written) | {ratio} |")
    for kind, label, how in (("fp32", "FP32, TFLOP/s", "SMs × 128 FMA × 2 × the clock the GPU reports: computed"),
                             ("tensor", "f16/bf16 tensor cores, dense TFLOP/s", "a cuBLAS f16 GEMM of 8192³ in the run")):
        peaks = [peak for dtype, peak in klplot.compute_limits(rows) if (dtype == "f32") == (kind == "fp32")]
        if not peaks:
            continue
        lo, hi = min(peaks), max(peaks)
        ratio = spread(lo / nominal[kind], hi / nominal[kind], ".2f") if nominal else "–"
        out.append(f"| {label} | {nominal[kind] if nominal else '–'} | {spread(lo, hi, '.1f')} ({how}) | {ratio} |")
    return "\n".join(out)


def render_limits(match):
    return match.group(1) + limits_table(match.group(2)) + "\n" + match.group(4)


def render_profile(match):
    return match.group(1) + profile_table(match.group(2)) + "\n" + match.group(4)


def counter(tokens):
    """The text of one counter marker: PROFILE_CSV STEP COLUMN [kernel=K] [fmt=F]."""
    positional = [t for t in tokens if "=" not in t]
    options = dict(t.split("=", 1) for t in tokens if "=" in t)
    if len(positional) != 3 or set(options) - {"kernel", "fmt"}:
        raise MarkerError("a counter marker reads PROFILE_CSV STEP COLUMN [kernel=K] [fmt=F]")
    csv_path, step, column = positional
    rows = [r for r in profile_rows(csv_path) if step in (r["step"], r["name"]) and r["kernel"]]
    if not rows:
        raise MarkerError(f"{csv_path} has no profiled kernel of step {step}")
    if "kernel" not in options and len(rows) > 1:
        raise MarkerError(f"step {step} launched {len(rows)} kernels: name one with kernel=0..{len(rows) - 1}")
    k = int(options.get("kernel", 0))
    if not 0 <= k < len(rows):
        raise MarkerError(f"step {step} has no kernel {k} (it has {len(rows)})")
    if column not in rows[k]:
        raise MarkerError(f"unknown column {column} of {csv_path}")
    text = rows[k][column]
    try:
        v = float(text)
    except ValueError:
        return text  # a name: a stall reason, a kernel
    if math.isnan(v):
        raise MarkerError(f"step {step} has no {column} (ncu did not measure it)")
    if column.endswith("_share"):
        return format_value(100 * v, options.get("fmt", ".0f")) + " %"
    digits = lambda x: format_value(x, options.get("fmt", "3sig"))  # noqa: E731
    if column.endswith("_mb"):  # megabytes, shown with their unit: 295 MB, 3.35 GB
        return profiles.human(v * 1e6, "B", digits)
    return profiles.human(v, " %" if column.endswith("_pct") else "", digits).removesuffix(" %")


@functools.lru_cache(maxsize=None)
def sass_rows(csv_path):
    """The rows of a per-instruction sampling CSV (plots/sass_samples.py writes them)."""
    path = os.path.join(ROOT, csv_path)
    if not os.path.exists(path):
        raise MarkerError(f"no {csv_path}")
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def sass_share(tokens):
    """The text of one sass marker: SASS_CSV WHAT [reason=R] [fmt=F]."""
    positional = [t for t in tokens if "=" not in t]
    options = dict(t.split("=", 1) for t in tokens if "=" in t)
    if len(positional) != 2 or set(options) - {"reason", "fmt"}:
        raise MarkerError("a sass marker reads SASS_CSV WHAT [reason=R] [fmt=F]")
    csv_path, what = positional
    rows = sass_rows(csv_path)
    if len({r["kernel"] for r in rows}) > 1:
        raise MarkerError(f"{csv_path} samples several kernels: a sass marker reads a file of one")
    opcode = lambda r: re.sub(r"^@!?U?P\w+\s+", "", r["sass"].strip())  # noqa: E731
    hits = [r for r in rows if (r["offset"] == what if what.startswith("0x") else opcode(r).startswith(what))]
    if not hits:
        raise MarkerError(f"{csv_path} lists no instruction {what}")
    top = max(rows, key=lambda r: int(r["samples"]))
    total = int(top["samples"]) / float(top["share"])  # the kernel's samples (share is rounded: from the largest)
    if "reason" in options:
        picked = sum(int(r[f"reason{i}_samples"]) for r in hits for i in (1, 2, 3) if r[f"reason{i}"] == options["reason"])
    else:
        picked = sum(int(r["samples"]) for r in hits)
    return format_value(100 * picked / total, options.get("fmt", ".0f")) + " %"


def render_sass(match):
    return match.group(1) + sass_share(match.group(2).split()) + match.group(4)


def render_counter(match):
    return match.group(1) + counter(match.group(2).split()) + match.group(4)


def render_value(match):
    return match.group(1) + value(match.group(2).split()) + match.group(4)


def render_range(match):
    return match.group(1) + value_range(match.group(2).split()) + match.group(4)


INLINE = {render_value: "value", render_range: "range", render_counter: "counter", render_sass: "sass"}
USAGE = {"value": "CSV STEP SHAPE [dtype=D] [rows=first] FIELD [fmt=F]",
         "range": "CSV STEPS SHAPES [dtype=D] [rows=first|all] FIELD [fmt=F]",
         "counter": "PROFILE_CSV STEP COLUMN [kernel=K] [fmt=F]", "sass": "SASS_CSV WHAT [reason=R] [fmt=F]"}
BLOCKS = ((BLOCK, render), (LADDER, render_ladder), (VALUE, render_value), (RANGE, render_range),
          (PROFILE, render_profile), (COUNTER, render_counter), (SASS, render_sass), (LIMITS, render_limits))


def filled(path, text):
    """(match, what it becomes) for each table, ladder and value in `text`, in order; a bad marker exits,
    naming path:line."""
    matches = sorted(((m, fill) for pattern, fill in BLOCKS for m in pattern.finditer(text)),
                     key=lambda mf: mf[0].start())
    inline = {m.start() for m, fill in matches if fill in INLINE}
    for opening in re.finditer(r"<!-- (value|range|counter|sass)\b", text):
        if opening.start() not in inline:
            line, kind = text.count("\n", 0, opening.start()) + 1, opening.group(1)
            sys.exit(f"readme_tables: {path}:{line}: a {kind} marker without its number and <!-- /{kind} --> on the "
                     f"same line: <!-- {kind} {USAGE[kind]} -->NUMBER<!-- /{kind} -->")
    end = 0
    for match, fill in matches:
        if match.start() < end:  # inside a block already filled
            continue
        end = match.end()
        line = text.count("\n", 0, match.start()) + 1
        try:
            if fill in INLINE and not text[text.rfind("\n", 0, match.start()) + 1:match.start()].strip():
                raise MarkerError(f"a {INLINE[fill]} marker must not begin a line: Markdown would read the line as "
                                  "an HTML block and end the paragraph there")
            yield line, match, fill(match)
        except MarkerError as e:
            sys.exit(f"readme_tables: {path}:{line}: {' '.join(match.group(1).split())}: {e}")


def stale_tables(path, text):
    """(line, marker, diff) for each table, ladder and value in `text` that differs from what its CSV gives."""
    stale = []
    for line, match, new in filled(path, text):
        old = match.group(0)
        if new != old:
            if match.re in (VALUE, RANGE, COUNTER):
                diff = [f"-{match.group(3)}", f"+{new[len(match.group(1)):-len(match.group(4))]}"]
            else:
                diff = difflib.unified_diff(old.splitlines(), new.splitlines(), "README", "CSV", n=0, lineterm="")
                diff = [d for d in diff if not d.startswith(("---", "+++", "@@"))]
            stale.append((line, " ".join(match.group(1).split()), diff))
    return stale


def main(paths, check=False):
    """Regenerates the tables and values in `paths`; with check=True changes nothing and returns 1 if one is stale."""
    stale = 0
    rows_of.cache_clear()  # a run reads the CSVs as they are now
    profile_rows.cache_clear()
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
        parts, end = [], 0
        for _, match, replacement in list(filled(path, text)):
            parts += [text[end:match.start()], replacement]
            end = match.end()
        new = "".join(parts) + text[end:]
        if new != text:
            with open(path, "w") as f:
                f.write(new)
            print("updated", path)
    if stale:
        print(f"{stale} stale table(s) or value(s): run python3 plots/readme_tables.py on the README(s) above and "
              "commit them")
    return 1 if stale else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    check = "--check" in args
    paths = [a for a in args if a != "--check"]
    if not paths:
        sys.exit("usage: readme_tables.py [--check] README.md...")
    sys.exit(main(paths, check))
