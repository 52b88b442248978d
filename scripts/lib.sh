# Shared by the scripts that build or run the lessons (tour.sh, gpu_check.sh, gpu_slug.sh, profile.sh,
# ab.sh): sourced, not run.

# The Python with matplotlib: .venv/ when bootstrap.sh had to make one, else python3.
python3() { if [ -x .venv/bin/python3 ]; then .venv/bin/python3 "$@"; else command python3 "$@"; fi; }

# The Release build folder: $KL_BUILD_ROOT/release when KL_BUILD_ROOT is set (a build outside a
# read-only source tree), else build/release, the folder of the "release" preset.
release_dir() { echo "${KL_BUILD_ROOT:-build}/release"; }

# Build Release with every core: the given targets, or everything. (The same configuration as the
# "release" preset, in release_dir.)
build_release() {
  command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
  cmake -S . -B "$(release_dir)" -DCMAKE_BUILD_TYPE=Release >/dev/null
  if [ $# -gt 0 ]; then cmake --build "$(release_dir)" -j "$(nproc)" --target "$@"
  else cmake --build "$(release_dir)" -j "$(nproc)"; fi
}

# The lesson executables, in ladder order.
lesson_binaries() { ls "$(release_dir)"/lessons/*/lesson[0-9][0-9] 2>/dev/null | sort; }

# Lesson NN's executable in the build folder BUILD (empty if it is not built).
lesson_exe() { ls "$1"/lessons/"$2"_*/lesson"$2" 2>/dev/null | head -n 1; }

# A GPU's name on stdin -> its folder under results/, the words that tell GPUs apart joined by "_":
# "NVIDIA H100 80GB HBM3" and "NVIDIA H100 SXM5 80GB" -> h100 (the SXM board, results/h100), "NVIDIA
# H100 PCIe" -> h100_pcie, "NVIDIA H100 NVL" -> h100_nvl, "NVIDIA RTX 6000 Ada Generation" ->
# rtx_6000_ada, "Quadro RTX 8000" -> quadro_rtx_8000, "NVIDIA RTX PRO 6000 Blackwell Workstation
# Edition" -> rtx_pro_6000_blackwell, "NVIDIA GeForce RTX 4090" -> rtx_4090, "Tesla T4" -> t4. Dropped:
# the maker and brand (NVIDIA, GeForce, Tesla), memory sizes and types (80GB, HBM3, GDDR6), the SXM
# form factor, and Generation, Workstation and Edition; every other word stays.
slug_of_name() {
  head -n 1 | tr 'A-Z' 'a-z' | tr -c 'a-z0-9\n' ' ' | tr ' ' '\n' |
    grep -vE '^(nvidia|geforce|tesla|generation|workstation|edition|sxm[0-9]*|[0-9]+gb|hbm[0-9a-z]*|gddr[0-9a-z]*)$' |
    grep -v '^$' | paste -sd_ -
}

# This machine's GPU's folder under results/ (empty without a GPU). scripts/gpu_slug.sh prints it.
gpu_slug() { nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | slug_of_name; }
