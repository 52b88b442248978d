#!/usr/bin/env python3
"""include_check.py: the rules a step file keeps, checked over the include graph (ctest include_check).

    include_check.py [ROOT]            exit 0: every step file keeps the rules; 1: one breaks them
    include_check.py --self-test       plants each kind of violation in a scratch tree: exit 0 when
                                       every one is caught and a clean tree passes

For every lessons/*/steps/*.cuh (a lesson added later is checked by being there):
  1. it is at most 150 lines long (two screens);
  2. it includes no step file of its own lesson, directly or through what it includes: what several
     steps share lives in the lesson's parts.cuh (a lesson's step 1 may be an earlier lesson's step,
     reused: lessons/02_warp_shuffle/steps/01_block_atomic.cuh is lesson 01's step 4);
  3. nothing it includes, directly or not, is the executable's side: the driver (common/ladder.hpp),
     the command line (common/cli.hpp), the table and CSV (common/report.hpp) or the timing
     (common/timing.cuh). A kernel file needs CUDA and the problem it solves, nothing else.
Each violation is one line on stderr, with the chain of includes that leads to it.
"""
import glob
import os
import re
import sys
import tempfile

MAX_LINES = 150
DRIVER = ("common/ladder.hpp", "common/cli.hpp", "common/report.hpp", "common/timing.cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
STEP = re.compile(r"^lessons/([^/]+)/steps/[^/]+\.cuh$")


def includes(root, path, cache):
    """The repository files `path` includes with "...", as paths relative to `root`."""
    if path not in cache:
        with open(os.path.join(root, path), encoding="utf-8") as f:
            text = f.read()
        found = []
        for name in INCLUDE.findall(text):
            for candidate in (name, os.path.normpath(os.path.join(os.path.dirname(path), name))):
                if os.path.isfile(os.path.join(root, candidate)):
                    found.append(candidate)
                    break
        cache[path] = found
    return cache[path]


def closure(root, start, cache):
    """Every file `start` reaches, each with the chain of includes that first reaches it."""
    chains = {start: [start]}
    todo = [start]
    while todo:
        path = todo.pop(0)
        for inc in includes(root, path, cache):
            if inc not in chains:
                chains[inc] = chains[path] + [inc]
                todo.append(inc)
    del chains[start]
    return chains


def check(root):
    """The violations under `root`, one line each."""
    cache = {}
    problems = []
    steps = sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "lessons/*/steps/*.cuh")))
    for step in steps:
        lesson = STEP.match(step).group(1)
        with open(os.path.join(root, step), encoding="utf-8") as f:
            lines = f.read().count("\n")
        if lines > MAX_LINES:
            problems.append(f"{step}: {lines} lines, more than {MAX_LINES}: move what later steps share to parts.cuh")
        for path, chain in closure(root, step, cache).items():
            other = STEP.match(path)
            if other and other.group(1) == lesson:
                problems.append(f"{step}: includes the step {path} ({' -> '.join(chain)}): share it through parts.cuh")
            if path in DRIVER:
                problems.append(f"{step}: reaches the driver's {path} ({' -> '.join(chain)}): a kernel file needs CUDA only")
    return steps, problems


def self_test():
    """Plants one violation of each rule in a scratch lesson, and checks that each is caught."""
    clean = {
        "common/ladder.hpp": "#pragma once\n",
        "lessons/99_x/problem.cuh": "#pragma once\n",
        "lessons/99_x/parts.cuh": '#include "lessons/99_x/problem.cuh"\n',
        "lessons/99_x/steps/01_a.cuh": '#include "lessons/99_x/parts.cuh"\n',
        "lessons/99_x/steps/02_b.cuh": '#include "lessons/99_x/parts.cuh"\n',
    }
    planted = {
        "too long": ({"lessons/99_x/steps/02_b.cuh": "//\n" * (MAX_LINES + 1)}, "lines, more than"),
        "a step includes a step": ({"lessons/99_x/steps/02_b.cuh": '#include "lessons/99_x/steps/01_a.cuh"\n'},
                                   "includes the step"),
        "a step reaches the driver": ({"lessons/99_x/problem.cuh": '#include "common/ladder.hpp"\n'},
                                      "reaches the driver's common/ladder.hpp"),
        "parts includes a step": ({"lessons/99_x/parts.cuh": '#include "lessons/99_x/steps/02_b.cuh"\n'},
                                  "includes the step"),
    }
    failed = []
    for name, (change, expected) in [("clean", ({}, None))] + list(planted.items()):
        with tempfile.TemporaryDirectory() as root:
            for path, text in {**clean, **change}.items():
                os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
                with open(os.path.join(root, path), "w", encoding="utf-8") as f:
                    f.write(text)
            _, problems = check(root)
        caught = [p for p in problems if expected and expected in p]
        ok = not problems if expected is None else bool(caught)
        print(f"include_check self-test: {name}: {'ok' if ok else 'MISSED'} {problems if not ok else ''}")
        if not ok:
            failed.append(name)
    return 1 if failed else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    steps, problems = check(root)
    if not steps:
        sys.exit(f"include_check: no lessons/*/steps/*.cuh under {root}")
    for p in problems:
        print(f"include_check: {p}", file=sys.stderr)
    print(f"include_check: {len(steps)} step files, {len(problems)} violations")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
