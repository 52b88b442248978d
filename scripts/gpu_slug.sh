#!/usr/bin/env bash
# gpu_slug.sh: the folder under results/ for this machine's GPU ("NVIDIA H100 80GB HBM3" -> h100), so
# that a command writes its results to its own GPU's folder, never to another GPU's:
#     lesson04 --sweep --csv results/$(scripts/gpu_slug.sh)/lesson04.csv
#     python3 plots/make_figures.py results/$(scripts/gpu_slug.sh)
# It also makes results/<slug>/ when missing (the lessons append to a file, they make no folders).
# No GPU: a message on stderr, nothing on stdout, exit 77.
# gpu_slug.sh "GPU NAME": the folder for that name (the plot scripts ask it about the CSV's gpu column).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/scripts/lib.sh"
if [ $# -gt 0 ]; then
  slug=$(printf '%s\n' "$1" | slug_of_name)
  [ -n "$slug" ] || { echo "gpu_slug.sh: no folder name in GPU name '$1'" >&2; exit 2; }
  echo "$slug"
  exit 0
fi
slug=$(gpu_slug)
if [ -z "$slug" ]; then
  echo "gpu_slug.sh: no NVIDIA GPU here (nvidia-smi names none), so no results/<gpu>/ folder to write to" >&2
  exit 77
fi
mkdir -p "$root/results/$slug"
echo "$slug"
