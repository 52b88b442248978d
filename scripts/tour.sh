#!/usr/bin/env bash
# The tour: bootstrap, build the lessons (Release; the tests are scripts/test.sh's), run every lesson
# at its default size, write
# results/<gpu>/lessonNN.csv, draw the figures and print one summary line per lesson; on a GPU other
# than the H100, then your numbers beside the committed H100 ones (results/h100/), step by step.
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
dir="results/$slug"
mkdir -p "$dir"
for exe in $(lesson_binaries); do
  name=$(basename "$exe")
  rm -f "$dir/$name.csv"
  echo; echo "== $name"
  "$exe" --csv "$dir/$name.csv"
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
