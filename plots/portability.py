#!/usr/bin/env python3
"""Writes results/<gpu>/portability.md: which steps of each lesson ran, failed or were n/a (and why)
in each build of a portability run, from the files that run left in DIR:

  DIR/<build>/lessonNN.csv   each lesson's default run in that build (rows of the steps that ran)
  DIR/<build>/na.txt         the run's "n/a" lines ("lessonNN: 4 tile_registers: n/a: ...")
  DIR/<build>/ctest.txt      the last lines of the build's GPU test suite (ctest -L gpu)
  DIR/builds.txt             one line per build: "<build>|<title>", in column order
  DIR/about.md               the run: GPU, driver, commands (printed first)

usage: python3 plots/portability.py DIR > results/h100/portability.md
"""
import csv
import os
import re
import sys


def lesson_rows(path):
    """{step label: (name, ok)} of one lesson CSV, the lesson's own steps and library rows."""
    out = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["step"] == "copy" or r["step"].startswith("pytorch"):
                continue
            ok = bool(r["ms_median"])
            key = (r["step"], r["name"])
            out[key] = out.get(key, True) and ok
    return out


def na_lines(path):
    """{lesson: {(step, name): reason}} from the n/a lines."""
    out = {}
    if not os.path.exists(path):
        return out
    for line in open(path):
        m = re.match(r"(lesson\d\d): (\S+) (.+?): n/a: (.*)", line.strip())
        if m:
            out.setdefault(m.group(1), {})[(m.group(2), m.group(3))] = m.group(4)
    return out


def step_order(key):
    step = key[0]
    return (0, int(step), key[1]) if step.isdigit() else (1, 0, step + key[1])


def report(root):
    builds = [line.strip().split("|", 1) for line in open(os.path.join(root, "builds.txt")) if line.strip()]
    lessons = sorted({f[:-4] for b, _ in builds for f in os.listdir(os.path.join(root, b))
                      if re.fullmatch(r"lesson\d\d\.csv", f)})
    lines = [open(os.path.join(root, "about.md")).read().rstrip(), ""]
    lines += ["## The GPU test suite (`ctest -L gpu`, unsolved exercises excluded)", ""]
    lines += ["| build | result |", "|---|---|"]
    for b, title in builds:
        path = os.path.join(root, b, "ctest.txt")
        summary = [s for s in open(path).read().splitlines() if "tests passed" in s] if os.path.exists(path) else []
        lines.append(f"| {title} | {summary[-1].strip() if summary else 'not run'} |")
    lines.append("")
    for lesson in lessons:
        ran = {b: lesson_rows(os.path.join(root, b, lesson + ".csv"))
               for b, _ in builds if os.path.exists(os.path.join(root, b, lesson + ".csv"))}
        na = {b: na_lines(os.path.join(root, b, "na.txt")).get(lesson, {}) for b, _ in builds}
        keys = sorted({k for d in list(ran.values()) + list(na.values()) for k in d}, key=step_order)
        lines += [f"## {lesson} (default run)", ""]
        lines.append("| step | " + " | ".join(t for _, t in builds) + " |")
        lines.append("|---" * (len(builds) + 1) + "|")
        for key in keys:
            cells = []
            for b, _ in builds:
                if key in na[b]:
                    cells.append("n/a: " + na[b][key])
                elif b not in ran:
                    cells.append("not run")
                elif key in ran[b]:
                    cells.append("ran, checked" if ran[b][key] else "**FAILED**")
                else:
                    cells.append("—")
            lines.append(f"| {key[0]} {key[1]} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: portability.py DIR")
    sys.stdout.write(report(sys.argv[1]))
