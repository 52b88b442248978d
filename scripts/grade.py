#!/usr/bin/env python3
"""Grades the exercises: one verdict per exercise (scripts/grade.sh is the command to run).

  grade.py [NN | NN.k ...] [--solutions] [--build-dir DIR] [--no-build]
  grade.py --submissions DIR [--csv FILE] [NN | NN.k ...]

An exercise passes when its check finds no wrong case and it runs at least 80 % of the solution's
speed in the same process (exercises/NN_name/test.cu and common/grade.cuh decide both; this script
runs them and reads their `grade ...` lines). Verdicts: PASS with the speed against the solution;
FAIL with the first failing case, what was expected, and a hint from exercises/NN_name/exercises.json;
NOT GRADED: no GPU (or: needs sm_90a, for lesson 09 on another GPU). Parts that need no GPU (test cases outside the "gpu" suite) are graded on the CPU.
Exit status: 1 if any exercise failed, else 77 if any could not be graded for want of a GPU, else 0.
"""
import argparse
import csv
import glob
import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BAR = 0.8
TIMEOUT_S = 600  # one exercise's GPU part; a kernel that hangs is a FAIL, not a hung grader


def load_exercises():
    """Every exercise of every lesson, in ladder order, from exercises/NN_name/exercises.json."""
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "exercises", "[0-9][0-9]_*", "exercises.json"))):
        lesson = os.path.basename(os.path.dirname(path))
        with open(path) as f:
            for ex in json.load(f):
                ex["lesson"] = lesson
                out.append(ex)
    return out


def refuse(why):
    """Bad input: one line on stderr, exit 2 (as every command of the repository does)."""
    print(f"grade: {why}", file=sys.stderr)
    sys.exit(2)


def select(exercises, wanted):
    """The exercises named by NN (a lesson) or NN.k (one exercise); all of them when none is named."""
    if not wanted:
        return exercises
    chosen = []
    for w in wanted:
        if not re.fullmatch(r"\d\d(\.\d+)?", w):
            refuse(f"'{w}' is not an exercise: give NN (a lesson, e.g. 01) or NN.k (e.g. 01.2)")
        hits = [e for e in exercises if e["id"] == w or e["id"].split(".")[0] == w]
        if not hits:
            ids = ", ".join(e["id"] for e in exercises)
            refuse(f"no exercise {w} (there are {ids})")
        chosen += [e for e in hits if e not in chosen]
    return chosen


def run(cmd, **kw):
    return subprocess.run(cmd, cwd=ROOT, text=True, capture_output=True, **kw)


def build(build_dir, lessons, kind, exercises_dir=None):
    """Configures build_dir (Release) and builds the <kind>NN_test of each lesson; returns
    {lesson: error text} for the lessons whose test did not build (a submission that does not compile)."""
    if not shutil.which("nvcc") and os.path.isdir("/usr/local/cuda/bin"):
        os.environ["PATH"] = "/usr/local/cuda/bin:" + os.environ["PATH"]
    cfg = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release"]
    if exercises_dir:
        cfg.append(f"-DKL_EXERCISES_DIR={exercises_dir}")
    r = run(cfg)
    if r.returncode != 0:
        sys.exit(f"grade: cmake could not configure {build_dir}:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    errors = {}
    targets = [f"{kind}{lesson[:2]}_test" for lesson in lessons]
    for lesson, target in zip(lessons, targets):  # a stale binary must never be graded
        for old in glob.glob(os.path.join(build_dir, "lessons", lesson, target)):
            os.remove(old)
    jobs = str(os.cpu_count() or 2)
    if len(targets) > 1:  # one target, so that make builds the lessons in parallel; -k: past a broken one
        keep_going = ["-k", "0"] if os.path.exists(os.path.join(build_dir, "build.ninja")) else ["-k"]
        cmd = ["cmake", "--build", build_dir, "-j", jobs, "--target", kind + "s", "--", *keep_going]
    else:
        cmd = ["cmake", "--build", build_dir, "-j", jobs, "--target", *targets]
    print(f"grade: building {', '.join(targets)} in {os.path.relpath(build_dir, ROOT)} ...", file=sys.stderr)
    r = run(cmd)
    for lesson, target in zip(lessons, targets):
        if not os.path.exists(binary(build_dir, lesson, kind)):
            log = r.stdout + r.stderr
            first = next((l for l in log.splitlines() if "error" in l.lower()), "the build failed")
            errors[lesson] = first.strip()
    return errors


def binary(build_dir, lesson, kind):
    return os.path.join(build_dir, "lessons", lesson, f"{kind}{lesson[:2]}_test")


def first_doctest_error(text):
    """The first failed assertion of a doctest run, on one line, without the file path."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "ERROR:" in line or "FATAL ERROR" in line:
            parts = [line.split("ERROR:", 1)[-1].strip()]
            for more in lines[i + 1:i + 4]:
                if not more.startswith("  "):
                    break
                parts.append(more.strip())
            return " ".join(parts)
    return None


def grade_one(ex, exe, cpu_only):
    """{verdict: PASS | FAIL | NOT GRADED, detail, ratio, ms, solution_ms}."""
    out = {"verdict": None, "detail": "", "ratio": "", "ms": "", "solution_ms": ""}
    hints = ex.get("hints", {})
    pattern = f"-tc=exercise {ex['id']}*"
    cpu = run([exe, pattern])
    if cpu.returncode != 0:
        err = first_doctest_error(cpu.stdout + cpu.stderr) or f"the CPU test exited with {cpu.returncode}"
        out.update(verdict="FAIL", detail=f"CPU part: {err}", hint=hints.get("check", ""))
        return out
    has_cpu = re.search(r"test cases:\s*[1-9]", cpu.stdout) is not None
    if cpu_only:
        out.update(verdict="NOT GRADED", detail="no GPU" + (" (its CPU part passes)" if has_cpu else ""))
        return out
    try:
        gpu = run([exe, "--gpu", pattern], timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        out.update(verdict="FAIL", detail=f"still running after {TIMEOUT_S} s (a kernel that never ends?)",
                   hint=hints.get("check", ""))
        return out
    if gpu.returncode == 77:
        out.update(verdict="NOT GRADED", detail="no GPU" + (" (its CPU part passes)" if has_cpu else ""))
        return out
    check = speed = skip = None
    for line in gpu.stdout.splitlines():
        m = re.match(rf"grade {re.escape(ex['id'])} (exercise|solution) (check|speed|skip) (.*)", line)
        if m and m.group(2) == "check":
            check = m.group(3)
        elif m and m.group(2) == "skip":
            skip = m.group(3)
        elif m:
            speed = m.group(3)
    if skip is not None and check is None:
        out.update(verdict="NOT GRADED", detail=skip + (" (its CPU part passes)" if has_cpu else ""))
        return out
    if check is None:
        err = first_doctest_error(gpu.stdout + gpu.stderr) or (gpu.stdout + gpu.stderr).strip()[-300:]
        out.update(verdict="FAIL", detail=f"the test stopped before a verdict: {err}", hint=hints.get("check", ""))
        return out
    if check.startswith("FAIL"):
        out.update(verdict="FAIL", detail=check[4:].strip(), hint=hints.get("check", ""))
        return out
    m = re.match(r"([\d.]+|nan|inf) ([\d.]+|nan|inf) ([\d.]+|nan|inf)", speed or "")
    if not m:
        out.update(verdict="PASS", detail="right on every case; speed not measured")
        return out
    ratio, ms, sol = (float(g) for g in m.groups())
    out.update(ratio=f"{ratio:.2f}", ms=f"{ms:.4f}", solution_ms=f"{sol:.4f}")
    times = f"{ms:.4g} ms against the solution's {sol:.4g} ms"
    if not ratio >= BAR:
        out.update(verdict="FAIL", detail=f"right, but {ratio:.2f}x the solution's speed ({times}); "
                                          f"the bar is {BAR:.2f}x", hint=hints.get("speed", ""))
    elif gpu.returncode != 0:
        err = first_doctest_error(gpu.stdout + gpu.stderr) or f"exit {gpu.returncode}"
        out.update(verdict="FAIL", detail=err, hint=hints.get("check", ""))
    else:
        out.update(verdict="PASS", detail=f"{ratio:.2f}x the solution's speed ({times})")
    return out


def has_gpu():
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    except OSError:
        return False


def print_verdict(ex, v):
    head = f"{ex['id']}  {ex['title']:<34} "
    word = v["verdict"] + (":" if v["verdict"] == "NOT GRADED" else "")
    print(f"{head}{word} {v['detail']}".rstrip())
    if v["verdict"] == "FAIL" and v.get("hint"):
        print(f"{'':{len(head)}}hint: {v['hint']}")


def grade_tree(exercises, build_dir, kind, exercises_dir, no_build, gpu):
    lessons = sorted({e["lesson"] for e in exercises})
    errors = {} if no_build else build(build_dir, lessons, kind, exercises_dir)
    verdicts = []
    for ex in exercises:
        exe = binary(build_dir, ex["lesson"], kind)
        if ex["lesson"] in errors:
            v = {"verdict": "FAIL", "detail": f"does not compile: {errors[ex['lesson']]}", "ratio": "", "ms": "",
                 "solution_ms": "", "hint": ""}
        elif not os.path.exists(exe):
            sys.exit(f"grade: {os.path.relpath(exe, ROOT)} is not built (run without --no-build)")
        else:
            v = grade_one(ex, exe, cpu_only=not gpu)
        print_verdict(ex, v)
        verdicts.append(v)
    return verdicts


def status(verdicts):
    if any(v["verdict"] == "FAIL" for v in verdicts):
        return 1
    if any(v["verdict"] == "NOT GRADED" for v in verdicts):
        return 77
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("exercises", nargs="*", help="NN (a lesson's exercises) or NN.k (one exercise); default all")
    ap.add_argument("--solutions", action="store_true", help="grade solutions/ instead of exercises/")
    ap.add_argument("--submissions", metavar="DIR",
                    help="grade every sub-folder of DIR: a student's copy of exercises/ (NN_name/ folders)")
    ap.add_argument("--csv", metavar="FILE", help="with --submissions: the verdicts' CSV (default DIR/grades.csv)")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--no-build", action="store_true", help="grade what build-dir holds, without building")
    ap.add_argument("--cpu-only", action="store_true", help="grade only the parts that need no GPU, as without one")
    args = ap.parse_args()
    if args.csv and not args.submissions:
        refuse("--csv goes with --submissions")
    exercises = select(load_exercises(), args.exercises)
    gpu = has_gpu() and not args.cpu_only
    why = "--cpu-only" if args.cpu_only else "no NVIDIA GPU here"
    notice = (lambda: None) if gpu else (
        lambda: print(f"grade: {why}: only the parts that need no GPU are graded", file=sys.stderr))

    if not args.submissions:
        kind = "solution" if args.solutions else "exercise"
        notice()
        verdicts = grade_tree(exercises, os.path.abspath(args.build_dir), kind, None, args.no_build, gpu)
        return status(verdicts)

    top = os.path.abspath(args.submissions)
    if not os.path.isdir(top):
        refuse(f"--submissions {args.submissions}: not a folder")
    students = sorted(d for d in os.listdir(top) if os.path.isdir(os.path.join(top, d)) and not d.startswith("."))
    if not students:
        refuse(f"--submissions {args.submissions}: no sub-folders (one per student)")
    csv_path = args.csv or os.path.join(top, "grades.csv")
    notice()
    rows = []
    worst = 0
    for name in students:
        folder = os.path.join(top, name)
        if os.path.isdir(os.path.join(folder, "exercises")):  # a copy of the whole repository
            folder = os.path.join(folder, "exercises")
        print(f"\n== {name}")
        build_root = os.environ.get("KL_GRADE_BUILD_ROOT", os.path.join(ROOT, "build", "grade"))
        build_dir = os.path.join(build_root, re.sub(r"[^A-Za-z0-9_.-]", "_", name))
        verdicts = grade_tree(exercises, build_dir, "exercise", folder, args.no_build, gpu)
        for ex, v in zip(exercises, verdicts):
            rows.append([name, ex["id"], v["verdict"], v["ratio"], v["ms"], v["solution_ms"], v["detail"]])
        s = status(verdicts)
        worst = s if s == 1 or worst == 0 else worst
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "exercise", "verdict", "speed_vs_solution", "ms", "solution_ms", "detail"])
        w.writerows(rows)
    print(f"\ngrade: {len(students)} submissions, verdicts in {csv_path}")
    return worst


if __name__ == "__main__":
    sys.exit(main())
