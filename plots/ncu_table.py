"""ncu_table.py NCU_STEPS.CSV OUT.md: a Markdown table of the Nsight Compute counters of each step, from a
file of `### STEP` lines each followed by the CSV that `ncu --csv --page raw --metrics ...` printed for one
kernel launch (scripts' profile runs write it so; the lesson's own output lines in between are skipped).
Columns: duration, tensor-pipe activity, L2 read and write sectors, DRAM bytes, and the three largest warp
stall reasons as a share of all stall cycles per issued instruction."""
import csv
import io
import sys

STALL = "smsp__average_warps_issue_stalled_"


def blocks(text):
    """{step: {metric: value string}} from the ### STEP sections."""
    out, step, lines = {}, None, []
    for line in text.splitlines() + ["### end"]:
        if line.startswith("### "):
            if step:
                rows = list(csv.reader(io.StringIO("\n".join(l for l in lines if l.startswith('"')))))
                if len(rows) >= 3:
                    out[step] = dict(zip(rows[0], rows[2]))
            step, lines = line[4:].strip(), []
        else:
            lines.append(line)
    return out


def number(s):
    return float(s.replace(",", "")) if s not in ("", "n/a") else float("nan")


def table(steps):
    head = ["step", "kernel ms", "tensor pipe active", "L2 read sectors (M)", "L2 write sectors (M)",
            "DRAM read + write (GB)", "top stall reasons (share of stall cycles)"]
    out = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * 5 + "---|"]
    for step, m in steps.items():
        stalls = {k[len(STALL):-len("_per_issue_active.ratio")]: number(v) for k, v in m.items() if k.startswith(STALL)}
        total = sum(v for v in stalls.values() if v == v) or float("nan")
        top = sorted(stalls.items(), key=lambda kv: -kv[1])[:3]
        tensor = m.get("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "")
        dram = (number(m.get("dram__bytes_read.sum", "")) + number(m.get("dram__bytes_write.sum", ""))) / 1e9
        out.append("| " + " | ".join([
            step, f"{number(m['gpu__time_duration.sum']) / 1e6:.3f}", f"{number(tensor):.1f} %" if tensor else "–",
            f"{number(m['lts__t_sectors_op_read.sum']) / 1e6:.0f}", f"{number(m['lts__t_sectors_op_write.sum']) / 1e6:.1f}",
            f"{dram:.2f}", ", ".join(f"{k} {v / total:.0%}" for k, v in top)]) + " |")
    return "\n".join(out)


def main(src, dst):
    with open(src) as f:
        steps = blocks(f.read())
    if not steps:
        sys.exit(f"ncu_table: no step with counters in {src}")
    with open(dst, "w") as f:
        f.write(table(steps) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: ncu_table.py NCU_STEPS.CSV OUT.md")
    main(sys.argv[1], sys.argv[2])
