#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU (the H100 run takes under 8 minutes):
#   1. Release build;  2. full ctest, GPU cases included;  3. compute-sanitizer memcheck,
#   racecheck and synccheck over every GPU test binary at small sizes (zero errors required);
#   4. every lesson at its default size and with --sweep into results/<gpu>/;  5. PyTorch's
#   equivalents when torch imports;  6. figures;  7. a summary table, printed last.
# Exit code 0 only when every stage passed. Logs go to build/gpu_check/.
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

stage bootstrap bash scripts/bootstrap.sh
stage build build_release
stage ctest ctest --preset release
# The exercise skeletons must fail their grading until a student solves them.
stage exercises_fail_unsolved bash -c '! ctest --preset exercises'

sanitize() {
  local rc=0
  for t in build/release/common_test build/release/lessons/*/lesson[0-9][0-9]_test build/release/lessons/*/solution[0-9][0-9]_test; do
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
  for exe in $(lesson_binaries); do
    local name t0=$SECONDS; name=$(basename "$exe")
    rm -f "$dir/$name.csv"
    "$exe" --csv "$dir/$name.csv" || rc=1
    "$exe" --sweep --csv "$dir/$name.csv" || rc=1
    # Lessons with several dtypes sweep the half-precision one too.
    if "$exe" --help | grep -q -- '--dtype f32|f16'; then "$exe" --sweep --dtype f16 --csv "$dir/$name.csv" || rc=1; fi
    echo "== $name: default and sweep in $((SECONDS - t0)) s" | tee -a "$logs/lesson_times.txt" >&2
  done
  return $rc
}
stage lessons run_lessons

if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  stage pytorch python3 scripts/torch_baselines.py "$dir"
else
  status+=("SKIP  pytorch: torch with CUDA does not import here")
fi
stage figures python3 plots/make_figures.py "$dir"

echo
python3 plots/summary.py "$dir" | tee "$logs/summary.txt"
echo
printf '%s\n' "${status[@]}"
! printf '%s\n' "${status[@]}" | grep -q '^FAIL'
