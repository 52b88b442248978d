#!/usr/bin/env bash
# grade_selftest.sh BUILD_DIR CASE: tests scripts/grade.py as a student and a teacher would use it,
# on the CPU (--cpu-only, so that it means the same on a GPU machine), with the exercise and solution
# tests already built in BUILD_DIR. CASE:
#   skeletons    the unsolved exercises: none passes; those with a CPU part fail it (exit 1)
#   solutions    the solutions: none fails; every GPU part NOT GRADED (exit 77)
#   submissions  a class of three: a solved copy, a copy that does not compile, an empty folder
set -uo pipefail
cd "$(dirname "$0")/.."
build=$1
grade() { python3 scripts/grade.py --cpu-only --build-dir "$build" "$@"; }
fail() { echo "FAIL: $*"; exit 1; }
count=$(python3 -c 'import sys; sys.path.insert(0, "scripts"); import grade; print(len(grade.load_exercises()))')

case $2 in
skeletons)
  out=$(grade --no-build); rc=$?
  echo "$out"
  ! grep -q " PASS" <<<"$out" || fail "an unsolved exercise passes"
  [ "$(grep -cE '^[0-9]{2}\.[0-9]+ ' <<<"$out")" = "$count" ] || fail "expected $count verdicts"
  if grep -q "FAIL CPU part" <<<"$out"; then
    [ "$rc" = 1 ] || fail "exit $rc with a failed exercise (expected 1)"
    grep -q "hint: " <<<"$out" || fail "a FAIL without its hint"
  else
    [ "$rc" = 77 ] || fail "exit $rc (expected 77: nothing graded without a GPU)"
  fi
  ;;
solutions)
  out=$(grade --no-build --solutions); rc=$?
  echo "$out"
  ! grep -q " FAIL" <<<"$out" || fail "a solution fails"
  [ "$(grep -c "NOT GRADED: no GPU" <<<"$out")" = "$count" ] || fail "expected $count NOT GRADED verdicts"
  [ "$rc" = 77 ] || fail "exit $rc (expected 77)"
  ;;
submissions)
  class=$(mktemp -d)
  trap 'rm -rf "$class"' EXIT
  mkdir -p "$class/alice/01_naive_reduction" "$class/bob/01_naive_reduction" "$class/carol"
  cp solutions/01_naive_reduction/*.cuh "$class/alice/01_naive_reduction/"
  cp exercises/01_naive_reduction/*.cuh "$class/bob/01_naive_reduction/"
  echo "this is not C++" >>"$class/bob/01_naive_reduction/grid_stride.cuh"
  out=$(KL_GRADE_BUILD_ROOT="$build/grade_selftest" grade --submissions "$class" 01); rc=$?
  echo "$out"
  [ "$rc" = 1 ] || fail "exit $rc (expected 1: bob's copy does not compile)"
  csv="$class/grades.csv"
  [ -f "$csv" ] || fail "no $csv"
  cat "$csv"
  [ "$(wc -l <"$csv")" = 7 ] || fail "expected a header and 6 rows (3 students x 2 exercises)"
  grep -q '^alice,01.1,NOT GRADED,' "$csv" || fail "alice's 01.1 should be NOT GRADED (no GPU)"
  grep -q '^bob,01.1,FAIL,.*does not compile' "$csv" || fail "bob's 01.1 should fail to compile"
  grep -q '^carol,01.2,NOT GRADED,' "$csv" || fail "carol's 01.2 (the skeleton) should be NOT GRADED"
  ;;
*)
  echo "grade_selftest: unknown case $2" >&2; exit 2
  ;;
esac
echo "grade_selftest $2: ok"
