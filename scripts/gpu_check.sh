#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU (on the H100 lessons 01-04 took 6 minutes; all
# seven lessons take longer than one 10-minute device call, see KL_LESSONS below):
#   1. Release build;  2. full ctest, GPU cases included, then scripts/grade.py on every exercise
#   (unsolved: each must fail) and solution (each must pass);  3. compute-sanitizer memcheck,
#   racecheck and synccheck over every GPU test binary at small sizes (zero errors required);
#   4. every lesson at its default size and with --sweep into results/<gpu>/;  5. PyTorch's
#   equivalents when torch imports;  6. figures;  7. a summary table, printed last.
# Exit code 0 only when every stage passed. Logs go to build/gpu_check/.
# KL_LESSONS="05 06" limits stages 2-5 to those lessons (common_test always runs), so that the check
# can be split over several runs of a time-limited machine, e.g. "01 02 03 04", then "05", "06", "07".
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
logs=build/gpu_check
rm -rf "$logs"
mkdir -p "$logs"
status=()
stage() {  # stage NAME CMD...: runs CMD with its output in $logs/NAME.log, records PASS/FAIL
  local name=$1; shift
  local t0=$SECONDS
  if "$@" >"$logs/$name.log" 2>&1; then status+=("PASS  $name ($((SECONDS - t0)) s)")
  else status+=("FAIL  $name ($((SECONDS - t0)) s): see $logs/$name.log"); fi
  echo "${status[-1]}"
}

nvidia-smi -L >/dev/null 2>&1 || { echo "gpu_check: no NVIDIA GPU here (nvidia-smi -L failed)"; exit 77; }
dir="results/$(gpu_slug)"
mkdir -p "$dir"

lessons=${KL_LESSONS:-$(ls -d lessons/[0-9][0-9]_* | sed -E 's|lessons/([0-9]+)_.*|\1|' | tr '\n' ' ')}
only="common|(lesson|exercise|solution)($(echo $lessons | tr ' ' '|'))"
echo "gpu_check: lessons $lessons"
stage bootstrap bash scripts/bootstrap.sh
stage build build_release
# The exercise timings (solutions, wrong techniques, skeletons) go to results/<gpu>/exercises.csv.
rm -f "$dir/exercises.csv"
export KL_GRADE_CSV="$PWD/$dir/exercises.csv"
stage ctest ctest --preset release ${KL_LESSONS:+-R "$only"}
# The grader on every exercise as given (each must FAIL) and on every solution (each must PASS).
grade_all() {
  local rc=0 out
  out=$(python3 scripts/grade.py --no-build $lessons)
  echo "$out"
  if grep -q " PASS" <<<"$out"; then echo "an unsolved exercise passes"; rc=1; fi
  python3 scripts/grade.py --no-build --solutions $lessons || rc=1
  return $rc
}
stage grade grade_all
unset KL_GRADE_CSV

sanitize() {
  local rc=0
  local tests=(build/release/common_test) n
  for n in $lessons; do tests+=(build/release/lessons/${n}_*/{lesson,solution,exercise}${n}_test); done
  for t in "${tests[@]}"; do
    [ -x "$t" ] || continue
    for tool in memcheck racecheck synccheck; do
      echo "== $tool $t"
      KL_SANITIZE=1 compute-sanitizer --tool "$tool" --error-exitcode 9 "$t" --gpu || rc=1
    done
  done
  return $rc
}
stage sanitizer sanitize

run_lessons() {
  local rc=0
  local n exe
  for n in $lessons; do
    exe=$(ls build/release/lessons/${n}_*/lesson$n)
    local name t0=$SECONDS; name=$(basename "$exe")
    rm -f "$dir/$name.csv"
    "$exe" --csv "$dir/$name.csv" || rc=1
    "$exe" --sweep --csv "$dir/$name.csv" || rc=1
    # Lessons with several dtypes sweep the half-precision one too.
    if "$exe" --help | grep -q -- '--dtype f32|f16'; then "$exe" --sweep --dtype f16 --csv "$dir/$name.csv" || rc=1; fi
    # Lesson 05's goals name bf16 too.
    if [ "$n" = 05 ]; then "$exe" --sweep --dtype bf16 --csv "$dir/$name.csv" || rc=1; fi
    echo "== $name: default and sweep in $((SECONDS - t0)) s" | tee -a "$logs/lesson_times.txt" >&2
  done
  return $rc
}
stage lessons run_lessons

if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  # PyTorch appends its rows to every lessonNN.csv it finds: show it only the lessons just run.
  torch_rows() {
    local n tmp=$logs/pytorch_csv
    mkdir -p "$tmp"
    for n in $lessons; do cp "$dir/lesson$n.csv" "$tmp/"; done
    python3 scripts/torch_baselines.py "$tmp" && python3 scripts/frameworks.py "$tmp" && cp "$tmp"/lesson*.csv "$dir/"
  }
  stage pytorch torch_rows
else
  status+=("SKIP  pytorch: torch with CUDA does not import here")
fi
stage figures python3 plots/make_figures.py "$dir"

echo
python3 plots/summary.py "$dir" | tee "$logs/summary.txt"
echo
printf '%s\n' "${status[@]}"
! printf '%s\n' "${status[@]}" | grep -q '^FAIL'
