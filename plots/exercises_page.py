#!/usr/bin/env python3
"""Writes the exercise tables of exercises/README.md and of each lesson README from
exercises/NN_name/exercises.json and the measured timings (results/h100/exercises.csv).

  exercises_page.py [--check] [--csv results/h100/exercises.csv]

Markers, each closed by <!-- /exercises -->:
  <!-- exercises all -->    exercises/README.md: every exercise, its step, difficulty, time, and the
                            H100 timings of its skeleton and solution
  <!-- exercises wrong -->  exercises/README.md: the wrong techniques each exercise's test keeps, and
                            what became of them on the H100
  <!-- exercises NN -->     lessons/NN_name/README.md: the lesson's exercises and the grading command
--check rewrites nothing and fails (exit 1) naming each block that differs from what it would write.
"""
import argparse
import csv
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from grade import load_exercises  # noqa: E402  (the one reader of exercises/NN_name/exercises.json)
BLOCK = re.compile(r"(<!-- exercises (\S+) -->\n)(.*?)(<!-- /exercises -->)", re.S)


def load_timings(path):
    """{(exercise, impl): row}, the last row of each pair (a later run replaces an earlier one)."""
    rows = {}
    if os.path.exists(path):
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                rows[(r["exercise"], r["impl"])] = r
    return rows


def ms(v):
    x = float(v)
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


def ratio(v):
    """A speed ratio to two significant digits (0.21, 0.0049)."""
    return f"{float(f'{float(v):.2g}'):g}"


def has_cpu_part(ex):
    with open(os.path.join(ROOT, "exercises", ex["lesson"], "test.cu")) as f:
        return f'"exercise {ex["id"]} [cpu]' in f.read()


def skeleton_cell(ex, t):
    if not t:
        return "fails its CPU part (not timed)" if has_cpu_part(ex) else "not measured"
    if t["check"] != "pass":
        return f"fails the check ({ms(t['ms'])} ms)" if t["ms"] else "fails the check"
    return f"right, {ms(t['ms'])} ms: {ratio(t['ratio'])}× the solution's speed"


def table_all(exercises, timings):
    lines = ["| exercise | goal | reproduces | difficulty | time | skeleton (H100) | solution (H100) |",
             "|---|---|---|---|---|---|---|"]
    for ex in exercises:
        link = f"[{ex['id']} {ex['title']}]({ex['lesson']}/{ex['file']})"
        skel = skeleton_cell(ex, timings.get((ex["id"], "exercise")))
        sol = timings.get((ex["id"], "solution"))
        sol_cell = f"{ms(sol['ms'])} ms" if sol else "not measured"
        step = f"lesson {ex['lesson'][:2]}, step {ex['step']}"
        lines.append(f"| {link} | {ex['goal']} | {step} | {'★' * int(ex['difficulty'])} | {ex['minutes']} min "
                     f"| {skel} | {sol_cell} |")
    return "\n".join(lines) + "\n"


def variants(ex):
    """The wrong techniques the exercise's test keeps: its wrong_variant("NN.k", "name", ...) calls."""
    with open(os.path.join(ROOT, "exercises", ex["lesson"], "test.cu")) as f:
        calls = re.findall(r'wrong_variant\(\s*"([\d.]+)",\s*"([^"]+)"', f.read())
    return [name for i, name in calls if i == ex["id"]]


def table_wrong(exercises, timings):
    lines = ["| exercise | wrong technique (kept in the test) | on the H100 |", "|---|---|---|"]
    for ex in exercises:
        for name in variants(ex):
            t = timings.get((ex["id"], f"wrong:{name}"))
            if t is None:
                result = "not measured"
            elif t["check"] == "fail":
                result = f"fails the check ({ms(t['ms'])} ms)" if t["ms"] else "fails the check (untimed)"
            elif float(t["ratio"]) < 0.8:
                result = f"right, {ratio(t['ratio'])}× the solution's speed: fails the bar"
            else:
                result = f"right, {ratio(t['ratio'])}× the solution's speed: PASSES (its test fails)"
            path = f"../solutions/{ex['lesson']}/wrong/{name}.cuh"
            if not os.path.exists(os.path.join(ROOT, "exercises", path)):
                path = f"{ex['lesson']}/test.cu"
            lines.append(f"| {ex['id']} | [{name}]({path}) | {result} |")
    return "\n".join(lines) + "\n"


def table_lesson(exercises, num):
    mine = [e for e in exercises if e["id"].startswith(num + ".")]
    if not mine:
        return None
    lines = ["| exercise | goal | difficulty | time |", "|---|---|---|---|"]
    for ex in mine:
        link = f"[{ex['id']} {ex['title']}](../../exercises/{ex['lesson']}/{ex['file']})"
        lines.append(f"| {link} | {ex['goal']} | {'★' * int(ex['difficulty'])} | {ex['minutes']} min |")
    lesson = mine[0]["lesson"]
    lines += ["", f"Grade: `scripts/grade.sh {num}` (one: `scripts/grade.sh {mine[0]['id']}`), right on every test shape and at",
              f"least 80 % of the solution's speed on your GPU. [Solutions](../../solutions/{lesson}/), explained;",
              "[all exercises](../../exercises/README.md), with their timings."]
    return "\n".join(lines) + "\n"


def render(text, exercises, timings):
    def one(m):
        kind = m.group(2)
        if kind == "all":
            body = table_all(exercises, timings)
        elif kind == "wrong":
            body = table_wrong(exercises, timings)
        elif re.fullmatch(r"\d\d", kind):
            body = table_lesson(exercises, kind)
            if body is None:
                raise SystemExit(f"exercises_page: no exercises for lesson {kind}")
        else:
            raise SystemExit(f"exercises_page: unknown marker <!-- exercises {kind} -->")
        return m.group(1) + body + m.group(4)

    return BLOCK.sub(one, text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--csv", default=os.path.join(ROOT, "results", "h100", "exercises.csv"))
    args = ap.parse_args()
    exercises = load_exercises()
    timings = load_timings(args.csv)
    files = [os.path.join(ROOT, "exercises", "README.md")] + sorted(
        glob.glob(os.path.join(ROOT, "lessons", "[0-9][0-9]_*", "README.md")))
    stale = []
    for path in files:
        if not os.path.exists(path):
            continue
        with open(path) as f:
            text = f.read()
        new = render(text, exercises, timings)
        if new != text:
            if args.check:
                stale.append(os.path.relpath(path, ROOT))
            else:
                with open(path, "w") as f:
                    f.write(new)
                print(f"wrote {os.path.relpath(path, ROOT)}")
    if stale:
        print("exercise tables differ from exercises.json and the CSV (run python3 plots/exercises_page.py): "
              + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
