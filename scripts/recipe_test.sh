#!/usr/bin/env bash
# recipe_test.sh: follows CONTRIBUTING.md's "Add a step" on a scratch copy of the repository, so that
# the recipe cannot go stale. It copies what lesson 01 needs, applies the snippets CONTRIBUTING.md
# shows (each after a `<!-- recipe: ... -->` line: a new step file, an #include, a step-table entry),
# builds lesson01 and lesson01_test, and checks that the new step is
#   listed:    `lesson01 --list` shows it as step 5, just before the library;
#   tested:    the CPU cases pass and the step-table case saw it; the GPU cases pass (or exit 77);
#   diffable:  `scripts/step_diff.sh 01 4 5` shows its kernel;  laid out: `scripts/check_format.sh`;
#   reported:  a CSV row for it (measured on a GPU, else written by hand) reaches the README table
#              through plots/readme_tables.py, and the figures still render.
# Exit 0 when all hold, 1 naming the first that does not. KL_KEEP=1 keeps the scratch copy.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CALLER=$PWD  # under ctest: the build directory, whose cache names the CUDA compiler

# The example of CONTRIBUTING.md: change these with it.
LESSON=lessons/01_naive_reduction
STEP_FILE=$LESSON/steps/05_two_accumulators.cuh
STEP_NAME=two_accumulators
KERNEL=sum_two_accumulators
SHAPE=n=67108864  # lesson 01's default n, the shape of its README table and figure

say() { echo "recipe_test: $*"; }
fail() { echo "recipe_test: FAIL: $*" >&2; exit 1; }
t0=$SECONDS

[ -e "$ROOT/$STEP_FILE" ] &&
  fail "$STEP_FILE exists in the repository: give CONTRIBUTING.md's example (and this script) the next free number"
PY=python3  # the Python with matplotlib: .venv/ where scripts/bootstrap.sh had to make one
[ -x "$ROOT/.venv/bin/python3" ] && PY=$ROOT/.venv/bin/python3
command -v "$PY" >/dev/null || fail "python3 not found"
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/kl_recipe.XXXXXX")
if [ "${KL_KEEP:-0}" = 1 ]; then say "scratch copy kept in $scratch"; else trap 'rm -rf "$scratch"' EXIT; fi

# ---- a scratch copy: only what lesson 01 needs -------------------------------------------------------
cd "$ROOT"
mkdir -p "$scratch/lessons" "$scratch/solutions"  # solutions/: check_format looks there
cp -r common scripts plots CMakeLists.txt CMakePresets.json .clang-format CONTRIBUTING.md "$scratch/"
cp -r "$LESSON" "$scratch/lessons/"
for f in results/*/lesson01.csv results/*/profile/lesson01.csv; do  # every GPU's: the README's markers read them
  mkdir -p "$scratch/$(dirname "$f")" && cp "$f" "$scratch/$f"
done
[ -d .deps ] && ln -s "$ROOT/.deps" "$scratch/.deps"
cd "$scratch"

# ---- the recipe, as CONTRIBUTING.md writes it ---------------------------------------------------------
"$PY" - CONTRIBUTING.md <<'EOF' || fail "CONTRIBUTING.md's recipe does not apply (the line above says why)"
import re, sys
def die(why):
    sys.exit(f"recipe_test: CONTRIBUTING.md: {why}")
MARK = re.compile(r"<!-- recipe: (?:new (\S+)|in (\S+), (after|before) the line with (.+?)) -->$")
lines = open(sys.argv[1]).read().split("\n")
applied, i = 0, 0
while i < len(lines):
    m = MARK.match(lines[i].strip())
    if not m:
        i += 1
        continue
    if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
        die(f"line {i + 1}: a recipe mark not followed by a ``` block")
    end = next((k for k in range(i + 2, len(lines)) if lines[k].startswith("```")), None)
    if end is None:
        die(f"line {i + 1}: the ``` block is not closed")
    block = [l + "\n" for l in lines[i + 2:end]]
    if m.group(1):
        try:
            with open(m.group(1), "x") as f:
                f.writelines(block)
        except OSError as e:
            die(f"cannot create {m.group(1)}: {e.strerror}")
    else:
        path, where, anchor = m.group(2), m.group(3), m.group(4)
        try:
            text = open(path).readlines()
        except OSError as e:
            die(f"cannot read {path}: {e.strerror}")
        hits = [k for k, l in enumerate(text) if anchor in l]
        if len(hits) != 1:
            die(f"'{anchor}' is on {len(hits)} lines of {path}, not one")
        at = hits[0] + (where == "after")
        text[at:at] = block
        open(path, "w").writelines(text)
    print("recipe_test: applied", lines[i].strip()[len("<!-- recipe: "):-len(" -->")])
    applied += 1
    i = end + 1
if applied != 3:
    die(f"expected 3 recipe snippets (step file, #include, table entry), found {applied}")
EOF
[ -f "$STEP_FILE" ] || fail "the recipe did not create $STEP_FILE"

# ---- laid out and diffable (no build needed) -----------------------------------------------------------
rc=0
fmt=$(bash scripts/check_format.sh 2>&1) || rc=$?
if [ $rc = 77 ]; then
  say "layout: not checked ($fmt)"
elif grep -E "not formatted: ($STEP_FILE|$LESSON/reduce.cuh) " <<<"$fmt"; then
  fail "scripts/check_format.sh: the recipe's snippets are not laid out as .clang-format says"
elif [ $rc != 0 ] && ! grep -q "^not formatted: " <<<"$fmt"; then
  echo "$fmt"; fail "scripts/check_format.sh failed (exit $rc)"
else  # other files out of layout are the format test's to report
  say "layout: clang-format leaves the new step file and the table as they are"
fi
diff_out=$(bash scripts/step_diff.sh 01 4 5) || fail "scripts/step_diff.sh 01 4 5 failed"
grep -q "^+__global__ void $KERNEL(" <<<"$diff_out" || { echo "$diff_out"; fail "step_diff.sh 01 4 5 does not show $KERNEL"; }
say "step_diff.sh 01 4 5: $(grep -c '^[-+][^-+]' <<<"$diff_out") changed lines"

# ---- build lesson01 and lesson01_test ------------------------------------------------------------------
cache_var() { if [ -f "$CALLER/CMakeCache.txt" ]; then sed -n "s/^$1:[A-Z]*=//p" "$CALLER/CMakeCache.txt" | head -n 1; fi; }
config=(-DCMAKE_BUILD_TYPE=Release -DKL_CUDNN=OFF)  # lesson 01 needs no cuDNN
compiler=$(cache_var CMAKE_CUDA_COMPILER)
[ -n "$compiler" ] && config+=("-DCMAKE_CUDA_COMPILER=$compiler")
say "configuring and building lesson01, lesson01_test in $scratch/build"
cmake -S . -B build "${config[@]}" >configure.log 2>&1 || { tail -n 30 configure.log; fail "cmake configure failed"; }
cmake --build build --target lesson01 lesson01_test -j "${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" >build.log 2>&1 ||
  { grep -m 20 -B 2 -A 5 "error" build.log || tail -n 40 build.log; fail "the build failed"; }
say "built in $((SECONDS - t0)) s"
lesson01=build/$LESSON/lesson01
test01=build/$LESSON/lesson01_test

# ---- listed ----------------------------------------------------------------------------------------------
list=$("$lesson01" --list) || fail "lesson01 --list failed"
echo "$list"
at=$(awk -v name="$STEP_NAME" '$2 == name { print "line " NR ", label " $1 }' <<<"$list")
[ "$at" = "line 5, label 5" ] || fail "lesson01 --list: expected $STEP_NAME on line 5, label 5 (got: ${at:-not listed})"
[ "$(sed -n 6p <<<"$list" | awk '{print $1}')" = lib ] || fail "lesson01 --list: the library is not right after step 5"

# ---- tested ----------------------------------------------------------------------------------------------
cpu=$("$test01" --success --no-colors 2>&1) || { "$test01" --no-colors 2>&1 | tail -n 40 || true; fail "lesson01_test (CPU cases) failed"; }
# The step-table case CAPTUREs each step's name (doctest prints a char* as its address): it walked as
# many steps as it logged different names, and that must be every step --list shows, the new one too.
walked=$(sed -n 's/^ *logged: st.name := //p' <<<"$cpu" | sort -u | wc -l)
[ "$walked" = "$(wc -l <<<"$list")" ] ||
  fail "the step-table case walked $walked steps, --list shows $(wc -l <<<"$list"): it did not see $STEP_NAME"
say "lesson01_test: the CPU cases pass; the step-table case walked all $walked steps"
gpu_rc=0
gpu=$("$test01" --gpu 2>&1) || gpu_rc=$?
case $gpu_rc in
  0) say "lesson01_test --gpu: passed on $(sed -n 's/^GPU tests on //p' <<<"$gpu")" ;;
  77) say "lesson01_test --gpu: no GPU here, exit 77 (skipped)" ;;
  *) echo "$gpu" | tail -n 40; fail "lesson01_test --gpu failed (exit $gpu_rc)" ;;
esac

# ---- reported: a CSV row for the step reaches the README table, and the figures render ------------------
csv=results/h100/lesson01.csv
if [ $gpu_rc = 0 ]; then  # a GPU: measure the step at the default n into this GPU's folder, as a run does
  csv=results/$(scripts/gpu_slug.sh)/lesson01.csv
  "$lesson01" --step "$STEP_NAME" --csv "$csv" >run.log 2>&1 || { cat run.log; fail "lesson01 --step $STEP_NAME failed"; }
  say "measured: $(grep " $STEP_NAME " run.log | head -n 1)"
else  # no GPU: a row as lesson01 writes it on the committed GPU, numbers made up (it only travels through the scripts)
  gpu=$(tail -n 1 "$csv" | tr -d '\r' | awk -F, '{print $NF}')
  echo "01,5,$STEP_NAME,f32,$SHAPE,0.1,0.099,0.101,2684,,91,2e-08,$gpu" >>"$csv"
fi
if [ "$csv" != results/h100/lesson01.csv ]; then
  # Not an H100: the README's tables show results/h100/ (an H100's rows only); point lesson 01's at this GPU's file.
  sed -i "s|<!-- table results/h100/lesson01.csv |<!-- table $csv |" "$LESSON/README.md"
fi
"$PY" plots/readme_tables.py "$LESSON/README.md" >/dev/null || fail "plots/readme_tables.py failed"
grep -q "^| 5 | $STEP_NAME | [0-9]" "$LESSON/README.md" || fail "the README table has no timed row for step 5 $STEP_NAME"
say "README table: $(grep "^| 5 | $STEP_NAME |" "$LESSON/README.md")"
figures=$("$PY" plots/make_figures.py "$(dirname "$csv")" 2>&1) || { echo "$figures"; fail "plots/make_figures.py failed"; }
[ -s "$(dirname "$csv")/lesson01.png" ] || fail "plots/make_figures.py drew no $(dirname "$csv")/lesson01.png"
say "figures: $(tr '\n' ' ' <<<"$figures")"

say "PASS: the recipe of CONTRIBUTING.md adds step 5 $STEP_NAME to lesson 01 ($((SECONDS - t0)) s)"
