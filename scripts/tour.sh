#!/usr/bin/env bash
# The tour: bootstrap, build Release, run every lesson at its default size, write
# results/<gpu>/lessonNN.csv, draw the figures and print one summary line per lesson.
# Without a GPU it builds everything, lists each lesson's steps, and says nothing could be timed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
bash scripts/bootstrap.sh
build_release

if ! nvidia-smi -L >/dev/null 2>&1; then
  for exe in $(lesson_binaries); do
    echo; echo "== $(basename "$exe"): steps"; "$exe" --list
  done
  echo
  echo "No CUDA GPU on this machine: every lesson built, but nothing could be run or timed."
  echo "Run scripts/tour.sh on a machine with an NVIDIA GPU to measure the steps."
  exit 0
fi

dir="results/$(gpu_slug)"
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
