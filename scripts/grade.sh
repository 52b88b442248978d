#!/usr/bin/env bash
# Grades the exercises, one verdict each: PASS (with the speed against the solution), FAIL (the first
# failing case, what was expected, a hint) or NOT GRADED: no GPU (exit 77). Works on a fresh clone:
# installs what the build needs, configures and builds the exercise tests.
#   scripts/grade.sh                 every exercise (your files in exercises/)
#   scripts/grade.sh 04 | 04.2       one lesson's exercises | one exercise
#   scripts/grade.sh --solutions     the solutions (a teacher's check of the GPU)
#   scripts/grade.sh --submissions DIR [--csv FILE] [--unsafe]
#                                    a class: each sub-folder of DIR is a student's copy of exercises/,
#                                    built and run in a bubblewrap sandbox (refused without one unless
#                                    --unsafe); verdicts also go to DIR/grades.csv (or FILE), each as made
# Build folders go under $KL_BUILD_ROOT (default build/), so a read-only source tree can be graded.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh >&2
exec python3 scripts/grade.py "$@"
