# Shared by tour.sh and gpu_check.sh (sourced, not run).

# The Python with matplotlib: .venv/ when bootstrap.sh had to make one, else python3.
python3() { if [ -x .venv/bin/python3 ]; then .venv/bin/python3 "$@"; else command python3 "$@"; fi; }

# Build Release with every core: the given targets, or everything.
build_release() {
  command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
  cmake --preset release >/dev/null
  if [ $# -gt 0 ]; then cmake --build --preset release -j "$(nproc)" --target "$@"
  else cmake --build --preset release -j "$(nproc)"; fi
}



# The lesson executables, in ladder order.
lesson_binaries() { ls build/release/lessons/*/lesson[0-9][0-9] 2>/dev/null | sort; }

# A GPU's name on stdin -> its folder under results/: "NVIDIA H100 80GB HBM3" -> "h100".
slug_of_name() {
  head -n 1 | tr 'A-Z' 'a-z' | sed -E 's/(nvidia|geforce|tesla|rtx) //g' | awk '{print $1}' | tr -cd 'a-z0-9'
}

# This machine's GPU's folder under results/ (empty without a GPU). scripts/gpu_slug.sh prints it.
gpu_slug() { nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | slug_of_name; }
