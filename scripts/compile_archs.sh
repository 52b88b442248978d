#!/usr/bin/env bash
# compile_archs.sh ARCH...: compiles every lesson executable for the given GPU architectures
# (e.g. 75 120: the oldest and newest a class may have) without cuDNN, and runs nothing. CI uses it
# to keep every lesson building from sm_75 to sm_120 on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: scripts/compile_archs.sh ARCH... (e.g. 75 120)" >&2; exit 2; }
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
archs=$(IFS=';'; echo "$*")
dir="build/archs-$(IFS=-; echo "$*")"
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$archs" -DKL_CUDNN=OFF >/dev/null
cmake --build "$dir" -j "${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" --target lessons
echo "compiled every lesson for sm_${archs//;/, sm_} without cuDNN"
