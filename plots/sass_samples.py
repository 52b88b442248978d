"""sass_samples.py RAW_CSV OUT_CSV [--min-share F]: where a kernel's warps were when the profiler sampled them,
per SASS instruction, from Nsight Compute's source page (`ncu --import REPORT --page source --csv --print-source
sass`, of a report taken with `--section SourceCounters --section WarpStateStats`; scripts/profile.sh --sass
runs both). One row per instruction with at least F of its kernel's samples (default 0.001), in address order:

    kernel, offset (from the kernel's first instruction), sass, samples, share (of the kernel's samples),
    not_issued (samples of a warp that issued nothing), reason1, reason1_samples, ..., reason3_samples
    (the three stall reasons sampled most at it, ties by name from z to a: wait, barrier, long_sb, mio, ... as
    ncu names them less stall_)

A report of several kernels gives each kernel's rows, its shares of its own samples. plots/readme_tables.py's
sass marker quotes the shares. Exit 0 written; 1 a file that is not ncu's source page."""
import csv
import sys

ALL, NOT_ISSUED = "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)"
COLUMNS = ["kernel", "offset", "sass", "samples", "share", "not_issued"] + [
    f"reason{i}{suffix}" for i in (1, 2, 3) for suffix in ("", "_samples")]


def kernels(lines):
    """(kernel name, header, rows) for each kernel of ncu's source page: a "Kernel Name" line, the header, rows."""
    out = []
    for row in csv.reader(lines):
        if row and row[0] == "Kernel Name":
            out.append([row[1] if len(row) > 1 else "", None, []])
        elif out and out[-1][1] is None:
            out[-1][1] = row
        elif out and row:
            out[-1][2].append(row)
    return out


def count(text):
    return int(text.replace(",", "")) if text.strip() else 0


def compact(lines, min_share=0.001):
    """The rows of COLUMNS for every kernel in ncu's source-page CSV `lines`."""
    found = kernels(lines)
    if not found or any(header is None or "Address" not in header or ALL not in header for _, header, _ in found):
        raise ValueError("not ncu's source page with warp-stall sampling (--page source --csv --print-source sass "
                         "of a report with --section SourceCounters --section WarpStateStats)")
    out = []
    for name, header, rows in found:
        ix = {h: i for i, h in enumerate(header)}
        reasons = [h for h in header if h.startswith("stall_") and not h.endswith("(Not Issued)")]
        total = sum(count(r[ix[ALL]]) for r in rows)
        if not rows or total == 0:
            continue
        base = int(rows[0][ix["Address"]], 16)
        for r in rows:
            samples = count(r[ix[ALL]])
            if samples < min_share * total:
                continue
            top = sorted(((count(r[ix[h]]), h.removeprefix("stall_")) for h in reasons), reverse=True)[:3]
            row = [name, hex(int(r[ix["Address"]], 16) - base), r[ix["Source"]].strip(), samples,
                   f"{samples / total:.4f}", count(r[ix[NOT_ISSUED]]) if NOT_ISSUED in ix else ""]
            for n, reason in top:
                row += [reason, n]
            out.append(row)
    return out


def main(argv):
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--min-share"):
        sys.exit("usage: sass_samples.py RAW_CSV OUT_CSV [--min-share F]")
    with open(argv[0], newline="") as f:
        try:
            rows = compact(f, float(argv[3]) if len(argv) == 4 else 0.001)
        except ValueError as e:
            sys.exit(f"sass_samples.py: {argv[0]}: {e}")
    with open(argv[1], "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        w.writerows(rows)


if __name__ == "__main__":
    main(sys.argv[1:])
