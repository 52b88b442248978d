#!/usr/bin/env bash
# ab.sh NN [--base REF] [--rounds N] [--reps R] [--out DIR] CELL...: a change to lesson NN timed against a
# base revision in one run on one GPU. The lesson is built from REF (default main) and from the working
# tree; each CELL runs with both builds in turn (base, new, base, new, ...), N rounds, so that a clock that
# drifts or a GPU that warms up falls on both alike.
#
#   scripts/ab.sh 04 "--cols 4097 --dtype f16 --step dispatch" "--cols 65536 --dtype f32 --step dispatch"
#   scripts/ab.sh 09 --base HEAD~1 --rounds 3 "--step 8 --seq 4096"
#   scripts/ab.sh 01 -- --sweep
#
# A CELL is the lesson's own options for one timing, in one argument; ab.sh adds --reps R (default 50) and
# --no-check (run the lesson once without it, or its tests, to check the new build). Every row goes to
# DIR/ab_base.csv and DIR/ab_new.csv (default build/ab/results), and the last lines printed are, per row,
# the mean of the rounds' medians in each build and base / new (above 1: the new build is faster).
# Builds go to build/ab/{base,new} (Release; CMAKE_CUDA_ARCHITECTURES from $KL_AB_ARCH if set, else the
# project's default). Exit 0 done; 2 bad arguments (before anything is built, but a CELL the lesson
# refuses, after); 77 no GPU.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
source scripts/lib.sh

usage() {
  echo "ab.sh: $1 (usage: scripts/ab.sh NN [--base REF] [--rounds N] [--reps R] [--out DIR] CELL...)" >&2
  exit 2
}
[ $# -ge 1 ] || usage "no lesson"
nn=$1
shift
[[ $nn =~ ^[0-9][0-9]$ ]] || usage "the lesson is two digits (01, 06, ...), not '$nn'"
lesson_dir=$(ls -d lessons/${nn}_* 2>/dev/null | head -n 1)
[ -n "$lesson_dir" ] || usage "no lesson $nn under lessons/"
base=main rounds=2 reps=50 out=build/ab/results cells=()
while [ $# -gt 0 ]; do
  case $1 in
    --base | --rounds | --reps | --out) [ $# -ge 2 ] || usage "$1 needs a value" ;;&
    --base) base=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --) shift; cells+=("$@"); break ;;
    --*" "*) cells+=("$1"); shift ;;
    --*) usage "unknown option '$1' (a CELL is one quoted argument; a CELL of one word comes after --)" ;;
    *) cells+=("$1"); shift ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || usage "--rounds takes a whole number of at least 1, not '$rounds'"
[[ $reps =~ ^[1-9][0-9]*$ ]] || usage "--reps takes a whole number of at least 1, not '$reps'"
[ ${#cells[@]} -gt 0 ] || usage "no CELL to time"
git rev-parse --verify --quiet "$base^{commit}" >/dev/null || usage "--base '$base' is no commit of this repository"
nvidia-smi -L >/dev/null 2>&1 || { echo "ab.sh: no NVIDIA GPU here (nvidia-smi -L failed): nothing timed" >&2; exit 77; }

# The base revision's tree, as git holds it, beside the working tree's; doctest comes from the system
# or from this checkout's .deps/ (scripts/bootstrap.sh), which the base tree shares.
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
src=build/ab/src
rm -rf "$src" && mkdir -p "$src" "$out" || exit 1
git archive "$base" | tar -x -C "$src" || { echo "ab.sh: git archive $base failed" >&2; exit 1; }
[ -d .deps ] && cp -r .deps "$src/"
arch=()
[ -n "${KL_AB_ARCH:-}" ] && arch=(-DCMAKE_CUDA_ARCHITECTURES="$KL_AB_ARCH")
for side in base new; do
  tree=$([ $side = base ] && echo "$src" || echo .)
  cmake -S "$tree" -B build/ab/$side -DCMAKE_BUILD_TYPE=Release "${arch[@]}" >/dev/null || exit 1
done
jobs=$(( $(nproc) / 2 > 1 ? $(nproc) / 2 : 1 ))
cmake --build build/ab/base -j "$jobs" --target lesson$nn >build/ab/base.log 2>&1 &
cmake --build build/ab/new -j "$jobs" --target lesson$nn >build/ab/new.log 2>&1 ||
  { echo "ab.sh: the working tree's lesson$nn did not build (build/ab/new.log)" >&2; exit 1; }
wait $! || { echo "ab.sh: $base's lesson$nn did not build (build/ab/base.log)" >&2; exit 1; }
exe_base=$(lesson_exe build/ab/base "$nn") exe_new=$(lesson_exe build/ab/new "$nn")

for cell in "${cells[@]}"; do
  read -r -a args <<< "$cell"
  why=$("$exe_new" "${args[@]}" --list 2>&1 >/dev/null) || usage "lesson$nn refuses the CELL \"$cell\": ${why#lesson$nn: }"
done
rm -f "$out"/ab_base.csv "$out"/ab_new.csv "$out"/ab_base.log "$out"/ab_new.log
for ((r = 1; r <= rounds; r++)); do
  for cell in "${cells[@]}"; do
    read -r -a args <<< "$cell"
    for side in base new; do
      exe=$([ $side = base ] && echo "$exe_base" || echo "$exe_new")
      "$exe" "${args[@]}" --reps "$reps" --no-check --csv "$out/ab_$side.csv" >>"$out/ab_$side.log" 2>&1 ||
        { echo "ab.sh: round $r, $side build, \"$cell\" failed ($out/ab_$side.log)" >&2; exit 1; }
    done
  done
  echo "ab.sh: round $r of $rounds done"
done
python3 scripts/ab_summary.py "$out/ab_base.csv" "$out/ab_new.csv"
