"""The lessons' CSV as the Python baselines write it (torch_baselines.py, frameworks.py): the header,
the measured copy (the limit a % is of), and appending rows."""
import csv
import os

HEADER = "lesson,step,name,dtype,shape,ms_median,ms_min,ms_max,gbps,tflops,pct_of_limit,max_rel_err,gpu".split(",")


def copy_gbps(path):
    """The measured device-to-device copy of the lesson's CSV (the denominator of % of limit), the last
    written; NaN where the file or its copy row is missing."""
    if not os.path.exists(path):
        return float("nan")
    with open(path, newline="") as f:
        copies = [float(r["gbps"]) for r in csv.DictReader(f) if r["step"] == "copy" and r["gbps"]]
    return copies[-1] if copies else float("nan")


def append(path, rows):
    """Rows appended to the CSV, the header first where the file is new or empty."""
    fresh = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as f:
        w = csv.writer(f)
        if fresh:
            w.writerow(HEADER)
        w.writerows(rows)
