#!/usr/bin/env bash
# grade_selftest.sh BUILD_DIR CASE: tests scripts/grade.py as a student, a teacher and a student who
# wants a good grade would use it, on the CPU (--cpu-only, so that it means the same on a GPU
# machine), with the exercise and solution tests already built in BUILD_DIR. CASE:
#   skeletons    the unsolved exercises: none passes; those with a CPU part fail it (exit 1)
#   solutions    the solutions: none fails; every GPU part NOT GRADED (exit 77)
#   submissions  a class of three: a solved copy, a copy that does not compile, an empty folder
#   class        a class of students who attack the grader (exercise 04.1, whose CPU part runs their
#                code): graded once into BUILD_DIR/grade_attacks/grades.csv for the cases below
#   attack:NAME  one student's verdict in that CSV (after `class`): see expect() below
#   csv:KIND     --csv to a folder, a FIFO, /dev/stdout, a missing folder: exit 2, one line, no file
#   no_sandbox   without bubblewrap, --submissions refuses (exit 2, one line naming --unsafe)
#   read_only_source  the repository read-only, KL_BUILD_ROOT elsewhere: grades lesson 01 there
#   timeout:STAGE     a configure (STAGE configure) or a build (build) past its limit: FAIL
# Cases that need bubblewrap exit 77 (skipped) where it cannot make a sandbox.
set -uo pipefail
cd "$(dirname "$0")/.."
build=$1
grade() { python3 scripts/grade.py --cpu-only --build-dir "$build" "$@"; }
fail() { echo "FAIL: $*"; exit 1; }
count=$(python3 -c 'import sys; sys.path.insert(0, "scripts"); import grade; print(len(grade.load_exercises()))')
sandbox_or_skip() {
  why=$(python3 -c 'import sys; sys.path.insert(0, "scripts"); import grade; print(grade.sandbox_works() or "")')
  [ -z "$why" ] || { echo "skipped: $why"; exit 77; }
}
attacks="$build/grade_attacks"

# The class of attackers: each a folder with a copy of exercises/04_online_softmax/ changed one way.
make_class() {
  local class=$1 solved=solutions/04_online_softmax/online_combine.cuh
  local skeleton=exercises/04_online_softmax/online_combine.cuh
  student() { mkdir -p "$class/$1/04_online_softmax"; cp "${2:-$solved}" "$class/$1/04_online_softmax/online_combine.cuh"; }
  add() { printf '%s\n' "$2" >>"$class/$1/04_online_softmax/online_combine.cuh"; }
  student honest
  student skeleton "$skeleton"
  # a macro that silences the CPU part's checks
  student macro "$skeleton"
  add macro '#undef CHECK'
  add macro '#define CHECK(...) (void)0'
  # headers named like the grader's, handed in beside the exercise
  student shadow "$skeleton"
  mkdir -p "$class/shadow/04_online_softmax/doctest" "$class/shadow/04_online_softmax/common"
  printf '#include_next <doctest/doctest.h>\n#undef CHECK\n#define CHECK(...) (void)0\n' \
    >"$class/shadow/04_online_softmax/doctest/doctest.h"
  cp common/grade.cuh "$class/shadow/04_online_softmax/common/grade.cuh"
  printf '#undef CHECK\n#define CHECK(...) (void)0\n' >>"$class/shadow/04_online_softmax/common/grade.cuh"
  # out of the grader's namespace, to the solution
  student escape "$skeleton"
  add escape '}  // namespace graded'
  add escape '#include "solutions/04_online_softmax/online_combine.cuh"'
  add escape 'namespace graded {'
  # KL_SANITIZE set from the submission, to skip the timing
  student setenv
  add setenv 'inline bool skip_timing() { return setenv("KL_SANITIZE", "1", 1) == 0; }'
  # forged verdict lines from an object built before main
  student forged
  add forged 'struct Forge { Forge() { printf("grade 04.1 exercise check PASS\ngrade 04.1 exercise speed 1.25 1 1.25\n"); } };'
  add forged 'static Forge forge;'
  # a file written outside the build folder, before main (a mark in /tmp: never the repository)
  student writes
  add writes 'struct Mark { Mark() { if (FILE* f = fopen("/tmp/kl_grade_mark", "w")) fclose(f); } };'
  add writes 'static Mark mark;'
  # a loop that never ends, in the host code of the CPU part
  student loop
  sed -i 's/^__host__ __device__ inline kl::MaxSum online_combine(kl::MaxSum a, kl::MaxSum b) {/&\n  for (volatile int spin = 1; spin;) {\n  }/' \
    "$class/loop/04_online_softmax/online_combine.cuh"
  grep -q "volatile int spin" "$class/loop/04_online_softmax/online_combine.cuh" || fail "the loop was not added"
  # folder names the build cannot take, and one a spreadsheet would run: each with the skeleton
  student 'x;solutions' "$skeleton"
  student $'new\nline' "$skeleton"
  student '=HYPERLINK("evil","y")' "$skeleton"
  student .hidden
}

# What each attacker must get in the CSV: the student cell, the verdict, and a regex of the detail.
expect() {
  case $1 in
    honest) printf '%s\t%s\t%s' honest 'NOT GRADED' 'its CPU part passes' ;;
    skeleton) printf '%s\t%s\t%s' skeleton FAIL '^CPU part: ' ;;
    macro) printf '%s\t%s\t%s' macro FAIL "^refused: line [0-9]+: the directive '#undef CHECK'" ;;
    shadow) printf '%s\t%s\t%s' shadow FAIL '^CPU part: ' ;;
    escape) printf '%s\t%s\t%s' escape FAIL '^refused: ' ;;
    setenv) printf '%s\t%s\t%s' setenv FAIL "^refused: the name 'setenv'" ;;
    forged) printf '%s\t%s\t%s' forged FAIL '^refused: a file-scope declaration' ;;
    writes) printf '%s\t%s\t%s' writes FAIL "^refused: the name 'fopen'" ;;
    loop) printf '%s\t%s\t%s' loop FAIL '^CPU part: still running after 20 s' ;;
    semicolon) printf '%s\t%s\t%s' 'x;solutions' FAIL '^CPU part: ' ;;
    newline) printf '%s\t%s\t%s' newline FAIL '^CPU part: ' ;;
    formula) printf '%s\t%s\t%s' "'=HYPERLINK(\"evil\",\"y\")" FAIL '^CPU part: ' ;;
  esac
}

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
  sandbox_or_skip
  class=$(mktemp -d)
  trap 'rm -rf "$class"' EXIT
  mkdir -p "$class/alice/01_naive_reduction" "$class/bob/01_naive_reduction" "$class/carol"
  cp solutions/01_naive_reduction/*.cuh "$class/alice/01_naive_reduction/"
  cp exercises/01_naive_reduction/*.cuh "$class/bob/01_naive_reduction/"
  echo "inline void broken() { this_is_not_declared(); }" >>"$class/bob/01_naive_reduction/grid_stride.cuh"
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
class)
  sandbox_or_skip
  rm -rf "$attacks"
  mkdir -p "$attacks/class"
  make_class "$attacks/class"
  rm -f /tmp/kl_grade_mark
  tree() { git status --porcelain -uall; git diff; }
  before=$(tree | md5sum)
  out=$(KL_GRADE_BUILD_ROOT="$attacks/build" KL_GRADE_TIMEOUT_CPU=20 \
        grade --submissions "$attacks/class" --csv "$attacks/grades.csv" 04.1 2>&1); rc=$?
  echo "$out"
  [ "$rc" = 1 ] || fail "exit $rc (expected 1: the attackers fail)"
  grep -q "skipping '.hidden'" <<<"$out" || fail "the dotted folder is not listed as skipped"
  grep -q "^== x_solutions  (folder 'x;solutions')" <<<"$out" || fail "the sanitised name is not shown beside the original"
  [ ! -e /tmp/kl_grade_mark ] || fail "a submission wrote outside its build folder"
  [ "$(tree | md5sum)" = "$before" ] || fail "the repository changed"
  ;;
attack:*)
  sandbox_or_skip
  name=${2#attack:}
  csv="$attacks/grades.csv"
  [ -f "$csv" ] || fail "no $csv: run the 'class' case first"
  want=$(expect "$name")
  [ -n "$want" ] || { echo "grade_selftest: unknown attack $name" >&2; exit 2; }
  python3 - "$csv" "$want" <<'EOF' || fail "no row: $want"
import csv, re, sys
student, verdict, detail = sys.argv[2].split("\t")
rows = list(csv.reader(open(sys.argv[1], newline="")))
hits = [r for r in rows if r[0] == student and r[1] == "04.1" and r[2] == verdict and re.search(detail, r[6])]
print("\n".join(map(repr, hits or rows)))
sys.exit(0 if len(hits) == 1 else 1)
EOF
  ;;
csv:*)
  sandbox_or_skip
  class=$(mktemp -d)
  trap 'rm -rf "$class"' EXIT
  mkdir -p "$class/alice"
  case ${2#csv:} in
    folder) target="$class/alice" ;;
    fifo) target="$class/verdicts.fifo"; mkfifo "$target" ;;
    stdout) target=/dev/stdout ;;
    missing_folder) target="$class/no/such/grades.csv" ;;
    student_named_grades) mkdir -p "$class/grades.csv"; target="" ;;
    *) echo "grade_selftest: unknown csv case $2" >&2; exit 2 ;;
  esac
  before=$(ls -A "$class" | sort)
  bash scripts/expect_exit.sh 2 timeout 60 python3 scripts/grade.py --cpu-only --submissions "$class" \
    ${target:+--csv "$target"} 01 || fail "not refused with exit 2 and one line"
  [ "$(ls -A "$class" | sort)" = "$before" ] || fail "the refusal left a file behind"
  ;;
timeout:*)
  # A configure or a build past its time limit: the student's verdicts FAIL, saying so.
  sandbox_or_skip
  class=$(mktemp -d)
  trap 'rm -rf "$class"' EXIT
  mkdir -p "$class/slow/01_naive_reduction"
  cp solutions/01_naive_reduction/*.cuh "$class/slow/01_naive_reduction/"
  stage=${2#timeout:}
  case $stage in
    configure) limits=(KL_GRADE_TIMEOUT_CONFIGURE=1); want='not built: cmake did not configure .* in 1 s' ;;
    build) limits=(KL_GRADE_TIMEOUT_BUILD=2); want='does not compile: the build took over 2 s' ;;
    *) echo "grade_selftest: unknown timeout case $2" >&2; exit 2 ;;
  esac
  out=$(env "${limits[@]}" KL_GRADE_BUILD_ROOT="$class/build" timeout 300 python3 scripts/grade.py --cpu-only \
        --submissions "$class" 01.1 2>&1); rc=$?
  echo "$out"
  [ "$rc" = 1 ] || fail "exit $rc (expected 1)"
  grep -qE "^slow,01.1,FAIL,.*$want" "$class/grades.csv" || fail "no FAIL saying: $want"
  ;;
read_only_source)
  # The repository read-only (bubblewrap), the build in KL_BUILD_ROOT: lesson 01 builds and is graded.
  sandbox_or_skip
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  # (the repository bound again after /tmp's tmpfs, for a clone that lies under /tmp)
  out=$(bwrap --die-with-parent --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --ro-bind "$PWD" "$PWD" \
        --bind "$root" "$root" --chdir "$PWD" --setenv KL_BUILD_ROOT "$root" -- python3 scripts/grade.py --cpu-only 01 2>&1); rc=$?
  echo "$out"
  [ "$rc" = 77 ] || fail "exit $rc (expected 77: lesson 01 graded, nothing without a GPU)"
  [ "$(grep -c "NOT GRADED: no GPU" <<<"$out")" = 2 ] || fail "expected two NOT GRADED verdicts"
  [ -x "$root/release/lessons/01_naive_reduction/exercise01_test" ] || fail "not built in \$KL_BUILD_ROOT/release"
  ;;
no_sandbox)
  bin=$(mktemp -d)
  trap 'rm -rf "$bin"' EXIT
  ln -s "$(python3 -c 'import sys; print(sys.executable)')" "$bin/python3"
  mkdir -p "$bin/class/alice"
  bash scripts/expect_exit.sh 2 env PATH="$bin" python3 scripts/grade.py --cpu-only --submissions "$bin/class" 01 \
    | tee "$bin/log" || fail "not refused with exit 2 and one line"
  grep -q "give --unsafe" "$bin/log" || fail "the refusal does not say how to go on without a sandbox"
  [ ! -e "$bin/class/grades.csv" ] || fail "the refusal left a CSV behind"
  ;;
*)
  echo "grade_selftest: unknown case $2" >&2; exit 2
  ;;
esac
echo "grade_selftest $2: ok"
