#!/usr/bin/env bash
# profile.sh NN [--step NAME] [--shape "ARGS"] [--out FILE] [--build DIR] [--sass]: Nsight Compute's counters for
# every step of lesson NN (or one), one row per kernel a step launches, in results/<gpu>/profile/lessonNN.csv.
# --sass (with --step): instead, where the step's warps were when sampled, per SASS instruction (ncu's PC
# sampling: --section SourceCounters --section WarpStateStats, then its source page; plots/sass_samples.py
# keeps the instructions with at least 0.1 % of the samples) in results/<gpu>/profile/lessonNN_NAME_sass.csv.
#
#   scripts/profile.sh 06                         # every step at the lesson's default shape
#   scripts/profile.sh 04 --step online --shape "--rows 4096 --cols 32768"
#
# Each step runs in its own process, `lessonNN ARGS --step NAME --reps 1 --no-check --profile`: the
# lesson launches the step once between cudaProfilerStart and cudaProfilerStop, and ncu, started with
# --profile-from-start off, profiles exactly the kernels of that launch (not the harness's L2 flush,
# input fill or reference). Clocks: --clock-control none, the GPU's own boost clock, as the lessons'
# timings run (ncu's default would lock them to base, and durations would grow). One fixed set of
# metrics (scripts/ncu_metrics.txt; those this ncu does not know are left out, their columns empty);
# plots/profile_table.py turns ncu's raw CSV into the table (its docstring lists the columns).
# Needs the Release build (build/release, or --build DIR: scripts/tour.sh or cmake --preset release
# makes it) and ncu (CUDA Toolkit).
# Exit 0 written; 2 bad arguments; 77 no GPU, no ncu, or no permission to read the counters (one
# line says how to enable them).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
source scripts/lib.sh

usage() {
  echo "profile.sh: $1 (usage: scripts/profile.sh NN [--step NAME] [--shape \"ARGS\"] [--out FILE] [--build DIR] [--sass])" >&2
  exit 2
}
[ $# -ge 1 ] || usage "no lesson"
nn=$1
shift
[[ $nn =~ ^[0-9][0-9]$ ]] || usage "the lesson is two digits (01, 06, ...), not '$nn'"
step="" shape="" out="" build=$(release_dir) sass=0
while [ $# -gt 0 ]; do
  case $1 in
    --step | --shape | --out | --build) [ $# -ge 2 ] || usage "$1 needs a value" ;;&
    --step) step=$2; shift 2 ;;
    --shape) shape=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --sass) sass=1; shift ;;
    *) usage "unknown argument '$1'" ;;
  esac
done
[ $sass -eq 0 ] || [ -n "$step" ] || usage "--sass samples one step: name it with --step NAME"
exe=$(lesson_exe "$build" "$nn")
[ -n "$exe" ] && [ -x "$exe" ] || usage "no $build/lessons/${nn}_*/lesson$nn: build it first (scripts/tour.sh builds every lesson)"
read -r -a shape_args <<< "$shape"
steps=$("$exe" "${shape_args[@]}" --list 2>&1) || usage "lesson$nn refuses --shape \"$shape\": $(tail -n 1 <<< "$steps")"
if [ -n "$step" ]; then
  why=$("$exe" "${shape_args[@]}" --step "$step" --list 2>&1 >/dev/null) || usage "${why#lesson$nn: }"
  steps=$(printf '%s\n' "$steps" | awk -v s="$step" '$1 == s || $2 == s')
fi

command -v ncu >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
command -v ncu >/dev/null || { echo "profile.sh: no ncu (Nsight Compute, in the CUDA Toolkit's bin/): nothing profiled" >&2; exit 77; }
slug=$(gpu_slug)
[ -n "$slug" ] || { echo "profile.sh: no NVIDIA GPU here: nothing profiled" >&2; exit 77; }
# Exits 77, saying how to enable them, when ncu's output in $1 says it may not read the counters.
exit_if_no_counters() {
  grep -q "ERR_NVGPUCTRPERM" "$1" || return 0
  echo "profile.sh: ncu may not read the GPU's counters here (ERR_NVGPUCTRPERM): run as root, or load the driver with NVreg_RestrictProfilingToAdminUsers=0 (https://developer.nvidia.com/ERR_NVGPUCTRPERM)" >&2
  exit 77
}
raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT
if [ $sass -eq 1 ]; then
  read -r _ name _ <<< "$steps"
  [ -n "$out" ] || out="results/$slug/profile/lesson${nn}_${name}_sass.csv"
  mkdir -p "$(dirname "$out")"
  ncu --profile-from-start off --clock-control none --section SourceCounters --section WarpStateStats \
    --import-source no -o "$raw/report" "$exe" "${shape_args[@]}" --step "$name" --reps 1 --no-check --profile \
    > "$raw/ncu.txt" 2>&1
  exit_if_no_counters "$raw/ncu.txt"
  ncu --import "$raw/report.ncu-rep" --page source --csv --print-source sass > "$raw/source.csv" 2>> "$raw/ncu.txt" &&
    python3 plots/sass_samples.py "$raw/source.csv" "$out" || { tail -n 5 "$raw/ncu.txt" >&2; exit 1; }
  echo "wrote $out" >&2
  exit 0
fi
[ -n "$out" ] || out="results/$slug/profile/lesson$nn.csv"
mkdir -p "$(dirname "$out")"

list=$(python3 plots/profile_table.py --metrics) || {
  echo "profile.sh: ncu --query-metrics listed none of scripts/ncu_metrics.txt (ncu $(ncu --version | tail -n 1))" >&2
  exit 77
}

while read -r label name _; do
  [ -n "$label" ] || continue
  f="$raw/$(printf '%03d' "$(ls "$raw" | wc -l)")_${label}_${name//[^A-Za-z0-9_+.-]/_}.txt"
  { echo "### $label $name"; echo "### args $shape"; } > "$f"
  ncu --profile-from-start off --clock-control none --csv --page raw --print-units base --metrics "$list" \
    "$exe" "${shape_args[@]}" --step "$name" --reps 1 --no-check --profile >> "$f" 2>&1
  rc=$?
  exit_if_no_counters "$f"
  [ $rc -eq 0 ] || echo "profile.sh: step $label $name: ncu exit $rc (its lines: grep ERROR $f)" >&2
  echo "profiled $label $name" >&2
done <<< "$steps"
# KL_PROFILE_RAW=DIR keeps ncu's raw output of each step there (plots/tests/sample/ holds such files).
if [ -n "${KL_PROFILE_RAW:-}" ]; then mkdir -p "$KL_PROFILE_RAW" && cp "$raw"/*.txt "$KL_PROFILE_RAW"/; fi
python3 plots/profile_table.py --lesson "$nn" "$raw"/*.txt > "$out.tmp" && mv "$out.tmp" "$out" || exit 1
echo "wrote $out" >&2
