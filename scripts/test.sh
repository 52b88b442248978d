#!/usr/bin/env bash
# The test command: bootstrap, then configure -> build -> ctest (Release). GPU cases are listed
# as skipped on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
cmake --workflow --preset test
