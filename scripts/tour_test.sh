#!/usr/bin/env bash
# tour_test.sh: scripts/tour.sh on a stand-in machine, without a GPU or a build: nvidia-smi names an
# "NVIDIA H100 PCIe", cmake does nothing, and the lessons of a stand-in build folder ($KL_BUILD_ROOT)
# exit 77 (lesson01: no GPU after all) or 1 (lesson02). The tour must write to results/h100_pcie/ (in
# $KL_RESULTS_ROOT, outside the source tree), never to h100/; leave the CSV that was there byte for
# byte (no truncation, no temporary file left); and exit 1 naming both lessons.
set -uo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$work/bin" "$work/build/release/lessons/01_x" "$work/build/release/lessons/02_x" "$work/results/h100_pcie"
printf '#!/bin/sh\ncase "$*" in *query-gpu=name*) echo "NVIDIA H100 PCIe" ;; *) echo "GPU 0: NVIDIA H100 PCIe" ;; esac\n' \
  >"$work/bin/nvidia-smi"
printf '#!/bin/sh\nexit 0\n' >"$work/bin/cmake"
printf '#!/bin/sh\necho "lesson01: no CUDA device" >&2\nexit 77\n' >"$work/build/release/lessons/01_x/lesson01"
printf '#!/bin/sh\necho "lesson02: a step FAILED" >&2\nexit 1\n' >"$work/build/release/lessons/02_x/lesson02"
chmod +x "$work/bin/"* "$work/build/release/lessons/"*/lesson*
cp results/h100/lesson01.csv "$work/results/h100_pcie/lesson01.csv"
before=$(md5sum <"$work/results/h100_pcie/lesson01.csv")
h100_before=$(cat results/h100/*.csv | md5sum)
out=$(PATH="$work/bin:$PATH" KL_BUILD_ROOT="$work/build" KL_RESULTS_ROOT="$work/results" bash scripts/tour.sh 2>&1)
rc=$?
echo "$out" | tail -n 20
[ "$rc" = 1 ] || fail "exit $rc (expected 1: two lessons failed)"
grep -q "tour: failed: lesson01 lesson02" <<<"$out" || fail "the failed lessons are not named"
[ "$(md5sum <"$work/results/h100_pcie/lesson01.csv")" = "$before" ] || fail "lesson01.csv changed"
[ ! -e "$work/results/h100_pcie/lesson02.csv" ] || fail "a failed lesson left a CSV"
[ -z "$(ls -A "$work/results/h100_pcie" | grep tmp)" ] || fail "a temporary file was left"
[ ! -e "$work/results/h100" ] || fail "an H100 PCIe wrote to h100/"
[ "$(cat results/h100/*.csv | md5sum)" = "$h100_before" ] || fail "the committed results/h100 changed"
echo "tour_test: ok"
