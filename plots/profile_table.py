"""profile_table.py --lesson NN RAW... | --metrics: the per-kernel table of scripts/profile.sh from
its raw files (one per step: `### LABEL NAME` and `### args ARGS` lines, then what the lesson printed and
what `ncu --csv --page raw --print-units base` printed, whose lines start with a double quote), as CSV on
stdout, one row per kernel launch, in launch order:

  lesson, step, name, dtype, shape (the step's row in a timed run: the lesson prints them as it profiles),
  args (the lesson's extra arguments; empty: its default shape), kernel (the
  demangled name without its parameter list), duration_us, dram_read_mb, dram_write_mb,
  dram_pct_of_peak (DRAM throughput, % of the peak), l2_hit_pct, occupancy_pct (achieved: warps active,
  % of the SM's maximum), registers (per thread), local_mb (local-memory load + store traffic: spills
  and stack), issue_pct (issue slots used), fma_pct, tensor_pct (the pipes' active cycles, % of peak; tensor:
  the larger of the two tensor-pipe counters), mufu_pct (instructions issued to the XU pipe, % of peak), smem_conflicts (shared-memory
  bank conflicts, loads + stores), fp32_flops (2 FFMA + FADD + FMUL thread instructions), stall1..3 and
  stall1..3_share (the three largest warp-stall reasons, as a share of all stall cycles per issued
  instruction), clock_control (none: ncu left the GPU's clocks alone, as the lessons' timings do), gpu,
  note (for a step that launched no kernel, one row with the lesson's reason, e.g. its n/a line).

A metric this ncu did not know leaves its column empty."""
import argparse
import collections
import csv
import io
import math
import os
import re
import subprocess
import sys

STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio$")
COLUMNS = ["lesson", "step", "name", "dtype", "shape", "args", "kernel", "duration_us", "dram_read_mb", "dram_write_mb",
           "dram_pct_of_peak", "l2_hit_pct", "occupancy_pct", "registers", "local_mb", "issue_pct", "fma_pct",
           "tensor_pct", "mufu_pct", "smem_conflicts", "fp32_flops", "stall1", "stall1_share", "stall2",
           "stall2_share", "stall3", "stall3_share", "clock_control", "gpu", "note"]
SCALE = {"": 1, "byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "nsecond": 1, "usecond": 1e3,
         "msecond": 1e6, "second": 1e9, "%": 1, "register/thread": 1, "inst": 1, "sector": 1, "cycle": 1}


def number(text, unit=""):
    """A raw value in base units (bytes, nanoseconds): "1,234.5" -> 1234.5; "" or "n/a" -> NaN."""
    text = text.replace(",", "").strip()
    if text in ("", "n/a"):
        return math.nan
    try:
        return float(text) * SCALE.get(unit, 1)
    except ValueError:  # a text attribute (e.g. "No-CC")
        return math.nan


def kernel_name(demangled):
    """`void ns::gemm<Plain>(ns::Problem)` -> `ns::gemm<Plain>`: no return type, no parameter list."""
    name = re.sub(r"^void ", "", demangled.strip())
    depth = 0
    for i in range(len(name) - 1, -1, -1):  # drop the last balanced (...) group, the parameters
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0 and name[i] == "(":
            return name[:i]
    return name


def parse_raw(text):
    """(label, name, args, gpu, [ {metric: value in base units, "Kernel Name": ...} per launch ])."""
    label = name = args = gpu = note = dtype = shape = ""
    quoted = []
    for line in text.splitlines():
        if line.startswith("### args"):
            args = line[len("### args"):].strip()
        elif line.startswith("### "):
            label, _, name = line[4:].strip().partition(" ")
        elif line.startswith('"'):
            quoted.append(line)
        elif line.startswith("profiled: "):
            m = re.match(r"profiled: step .*?, name .*?, dtype (\S*), shape (.*)$", line)
            if m:
                dtype, shape = m.group(1), m.group(2).strip()
        elif ": n/a: " in line and not note:
            note = line.strip()
        elif line.startswith("device: ") and not gpu:
            gpu = re.sub(r", \d+ SMs.*$", "", line[len("device: "):]).strip()
    rows = list(csv.reader(io.StringIO("\n".join(quoted))))
    launches = []
    if len(rows) >= 2:
        head, units = rows[0], rows[1]
        for row in rows[2:]:
            values = {}
            for h, u, v in zip(head, units, row):
                values[h] = v if h == "Kernel Name" else (number(v, u) if re.match(r"^[a-z_0-9]+__", h) else v)
            launches.append(values)
    return label, name.strip(), args, gpu, launches, note, dtype, shape


METRICS_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts", "ncu_metrics.txt")


def ncu_metrics(ncu="ncu"):
    """scripts/ncu_metrics.txt's metrics that this ncu knows (`ncu --query-metrics`; launch__ attributes,
    which it does not list, always), comma-separated as --metrics takes them; "" when it lists none."""
    out = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True).stdout
    known = {line.split()[0] for line in out.splitlines() if line.strip()}
    with open(METRICS_FILE) as f:
        wanted = [w.strip() for w in f if w.strip() and not w.startswith("#")]
    return ",".join(m for m in wanted if m.startswith("launch__") or m.split(".")[0] in known)


def first(m, *names):
    for n in names:
        v = m.get(n, math.nan)
        if isinstance(v, float) and not math.isnan(v):
            return v
    return math.nan


def fmt(x, digits=4):
    if isinstance(x, str):
        return x
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return f"{x:.{digits}g}"


def kernel_row(lesson, label, name, args, gpu, m):
    stalls = {STALL.match(k).group(1): v for k, v in m.items() if STALL.match(k) and not math.isnan(v)}
    total = sum(stalls.values())
    top = sorted(stalls.items(), key=lambda kv: -kv[1])[:3] + [("", math.nan)] * 3
    tensor = [first(m, f"sm__pipe_tensor{p}_cycles_active.avg.pct_of_peak_sustained_active") for p in ("", "_op_hmma")]
    tensor = max((t for t in tensor if not math.isnan(t)), default=math.nan)
    fp32 = [first(m, f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum") for op in ("ffma", "fadd", "fmul")]
    out = {
        "lesson": lesson, "step": label, "name": name, "args": args, "kernel": kernel_name(m.get("Kernel Name", "")),
        "duration_us": first(m, "gpu__time_duration.sum") / 1e3,
        "dram_read_mb": first(m, "dram__bytes_read.sum") / 1e6,
        "dram_write_mb": first(m, "dram__bytes_write.sum") / 1e6,
        "dram_pct_of_peak": first(m, "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
        "l2_hit_pct": first(m, "lts__t_sector_hit_rate.pct"),
        "occupancy_pct": first(m, "sm__warps_active.avg.pct_of_peak_sustained_active"),
        "registers": first(m, "launch__registers_per_thread"),
        "local_mb": (first(m, "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum")
                     + first(m, "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum")) / 1e6,
        "issue_pct": first(m, "smsp__issue_active.avg.pct_of_peak_sustained_active"),
        "fma_pct": first(m, "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"),
        "tensor_pct": tensor,
        "mufu_pct": first(m, "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"),
        "smem_conflicts": first(m, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum")
        + first(m, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
        "fp32_flops": 2 * fp32[0] + fp32[1] + fp32[2],
        "clock_control": "none", "gpu": gpu, "note": "",
    }
    out["stalls"] = stalls
    for i, (reason, v) in enumerate(top[:3], 1):
        out[f"stall{i}"] = reason
        out[f"stall{i}_share"] = v / total if reason and total > 0 else math.nan
    return out


def table(lesson, texts):
    """The rows of every raw text, and the steps that launched no kernel (n/a here, or no GPU work)."""
    rows, empty = [], []
    for text in texts:
        label, name, args, gpu, launches, note, dtype, shape = parse_raw(text)
        if not launches:
            empty.append(f"{label} {name}")
            rows.append({c: "" for c in COLUMNS} | {"lesson": lesson, "step": label, "name": name, "args": args,
                                                    "gpu": gpu, "note": note or "no kernel launched"})
        rows += [kernel_row(lesson, label, name, args, gpu, m) | {"dtype": dtype, "shape": shape} for m in launches]
    return rows, empty


# What the grader compares between a submission and the solution: (label, column, unit, how kernels
# combine: "sum", "time" for a duration-weighted mean, or "max"; which way is faster: "high", "low", or
# "" where it depends).
COMPARED = [("DRAM throughput", "dram_pct_of_peak", " %", "time", "high"),
            ("L2 hit rate", "l2_hit_pct", " %", "time", "high"),
            ("achieved occupancy", "occupancy_pct", " %", "time", ""),
            ("registers per thread", "registers", "", "max", ""),
            ("local memory (spills)", "local_bytes", "B", "sum", "low"),
            ("issue slots used", "issue_pct", " %", "time", "high"),
            ("FMA pipe", "fma_pct", " %", "time", "high"),
            ("tensor pipe", "tensor_pct", " %", "time", "high"),
            ("MUFU (XU) pipe", "mufu_pct", " %", "time", "high"),
            ("shared-memory bank conflicts", "smem_conflicts", "", "sum", "low"),
            ("DRAM traffic", "dram_bytes", "B", "sum", "low")]


def combined(rows):
    """One side's kernels (kernel_row dicts) as one: COMPARED's quantities and the stall shares (stall
    cycles per issued instruction of every reason, weighted by each kernel's time)."""
    t = [r["duration_us"] if math.isfinite(r["duration_us"]) else 0.0 for r in rows]
    total_t = sum(t) or 1.0
    out = {"duration_us": sum(t)}
    for r in rows:
        r["dram_bytes"] = (r["dram_read_mb"] + r["dram_write_mb"]) * 1e6
        r["local_bytes"] = r["local_mb"] * 1e6
    for _, col, _, how, _ in COMPARED:
        vals = [(r[col], w) for r, w in zip(rows, t) if isinstance(r[col], float) and math.isfinite(r[col])]
        if not vals:
            out[col] = math.nan
        elif how == "sum":
            out[col] = sum(v for v, _ in vals)
        elif how == "max":
            out[col] = max(v for v, _ in vals)
        else:
            out[col] = sum(v * w for v, w in vals) / (sum(w for _, w in vals) or 1.0)
    stalls = collections.Counter()
    for r, w in zip(rows, t):
        for reason, v in r["stalls"].items():
            stalls[reason] += v * w / total_t
    total = sum(stalls.values()) or 1.0
    out["stalls"] = {k: v / total for k, v in stalls.items()}
    return out


def si_prefix(v):
    """(v scaled, its SI prefix): 1.55e7 -> (15.5, "M"), 680 -> (680, "")."""
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return v / scale, prefix
    return v, ""


def human(v, unit, digits=lambda x: f"{x:.3g}"):
    """A number as the grader and the READMEs show it, 3 significant digits (or `digits`) with an SI
    prefix: (1.55e7, "") -> "15.5 M", (6.8e8, "B") -> "680 MB", (12.5, " %") -> "12.5 %" (no prefix)."""
    if unit == " %":
        return digits(v) + unit
    scaled, prefix = si_prefix(v)
    return (digits(scaled) + (f" {prefix}{unit}" if prefix or unit else "")).rstrip()


def read(path):
    """A profile CSV's rows at one shape, as text: the lesson's default (no extra args), or, in a file
    that holds a single other shape (profile.sh --shape ... --out FILE), that shape's."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    default = [r for r in rows if not r["args"]]
    return rows if not default and len({r["args"] for r in rows}) == 1 else default


def differences(mine, solution):
    """Lines "LABEL: X vs Y" where the submission is on the slower side of the solution, those that differ
    most first (relative difference; a stall reason by how much more of the stall cycles it takes), then
    the quantities with no faster side (occupancy, registers); pairs too small to matter are left out."""
    scored = []
    for label, col, unit, _, faster in COMPARED:
        a, b = mine[col], solution[col]
        if not (math.isfinite(a) and math.isfinite(b)) or max(abs(a), abs(b)) < (1.0 if unit == " %" else 1e-3 if unit == "" else 1024):
            continue
        if (faster == "high" and a >= b) or (faster == "low" and a <= b):
            continue
        score = abs(a - b) / max(abs(a), abs(b)) * (1.0 if faster else 0.5)
        scored.append((score, f"{label}: {human(a, unit)} vs {human(b, unit)}"))
    for reason in set(mine["stalls"]) | set(solution["stalls"]):
        a, b = mine["stalls"].get(reason, 0.0), solution["stalls"].get(reason, 0.0)
        if a >= 0.05 and a > b:
            scored.append((a - b, f"stall {reason}: {a:.0%} vs {b:.0%} of stall cycles"))
    return [text for _, text in sorted(scored, key=lambda x: -x[0])]


def write(rows, out):
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow([fmt(r[c], 3 if c.endswith("_share") else 4) for c in COLUMNS])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--metrics", action="store_true", help="print the --metrics list this ncu knows, and exit")
    ap.add_argument("--lesson")
    ap.add_argument("raw", nargs="*")
    a = ap.parse_args()
    if a.metrics:
        listed = ncu_metrics()
        print(listed)
        sys.exit(0 if listed else 77)
    if not a.lesson or not a.raw:
        ap.error("--lesson NN and the raw files are needed")
    texts = []
    for path in a.raw:
        with open(path, errors="replace") as f:
            texts.append(f.read())
    rows, empty = table(a.lesson, texts)
    for e in empty:
        print(f"profile_table: step {e}: no kernel profiled (n/a on this GPU, or it launched none)", file=sys.stderr)
    if not any(r["kernel"] for r in rows):
        sys.exit("profile_table: no kernel in any raw file: nothing to write")
    write(rows, sys.stdout)


if __name__ == "__main__":
    main()
