#!/usr/bin/env bash
# The tour: bootstrap, build the lessons (Release, in $KL_BUILD_ROOT/release or build/release; the
# tests are scripts/test.sh's), run every lesson at its default size, write
# results/<gpu>/lessonNN.csv, draw the figures and print one summary line per lesson; on a GPU other
# than the H100, then your numbers beside the committed H100 ones (results/h100/), step by step.
# Each CSV is written to a temporary file and moved into place only when its lesson succeeds, so a
# run that fails or finds no GPU leaves the results that were there as they were. From a read-only
# source tree: KL_BUILD_ROOT=/writable/build KL_RESULTS_ROOT=/writable/results scripts/tour.sh.
# Without a GPU it builds the lessons, lists each lesson's steps, and says nothing could be timed.
# Prints how long it took, the build and the runs apart.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
start=$SECONDS
bash scripts/bootstrap.sh
build_release lessons
built=$SECONDS
took() { echo; echo "tour: $((SECONDS - start)) s ($((built - start)) s bootstrap and build, $((SECONDS - built)) s runs)"; }

if ! nvidia-smi -L >/dev/null 2>&1; then
  for exe in $(lesson_binaries); do
    echo; echo "== $(basename "$exe"): steps"; "$exe" --list
  done
  echo
  echo "No CUDA GPU on this machine: every lesson built, but nothing could be run or timed."
  echo "Run scripts/tour.sh on a machine with an NVIDIA GPU to measure the steps."
  took
  exit 0
fi

slug=$(gpu_slug)
[ -n "$slug" ] || { echo "tour: nvidia-smi names no GPU, so no results/<gpu>/ folder to write to" >&2; exit 1; }
dir="${KL_RESULTS_ROOT:-results}/$slug"
mkdir -p "$dir"
failed=""
for exe in $(lesson_binaries); do
  name=$(basename "$exe")
  tmp="$dir/.$name.csv.tmp"
  rm -f "$tmp"
  echo; echo "== $name"
  if "$exe" --csv "$tmp"; then
    mv -f "$tmp" "$dir/$name.csv"
  else
    rc=$?
    rm -f "$tmp"
    echo "tour: $name exited with $rc: $dir/$name.csv left as it was" >&2
    failed="$failed $name"
  fi
done
python3 plots/make_figures.py "$dir"
echo
python3 plots/summary.py "$dir"
if [ "$slug" != h100 ] && [ -d results/h100 ]; then
  echo
  echo "Your $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1) beside the committed H100 run"
  echo "(results/h100/), step by step: yours/h100 above 1 means your GPU takes longer."
  python3 plots/compare_gpus.py "$dir" results/h100
fi
took
if [ -n "$failed" ]; then
  echo "tour: failed:$failed" >&2
  exit 1
fi
