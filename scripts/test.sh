#!/usr/bin/env bash
# The test command: bootstrap, then configure -> build -> ctest (Release), as the "test" workflow
# preset does, in $KL_BUILD_ROOT/release when KL_BUILD_ROOT is set (a build outside a read-only
# source tree), else build/release. GPU cases are listed as skipped on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
if [ -n "${KL_BUILD_ROOT:-}" ]; then
  build="$KL_BUILD_ROOT/release"
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release
  cmake --build "$build"
  ctest --test-dir "$build" --output-on-failure --label-exclude exercise
else
  cmake --workflow --preset test
fi
