#!/usr/bin/env bash
# Installs what is missing, and only that: doctest (Debian's doctest-dev), bubblewrap (the grading
# sandbox, Debian's bubblewrap) and the plotting packages (plots/requirements.txt, from PyPI). Safe
# to run again; needs no network when all is there.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "bootstrap: $*"; }

command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] ||
  { say "nvcc not found: install the CUDA Toolkit (https://developer.nvidia.com/cuda-downloads)" >&2; exit 1; }
command -v cmake >/dev/null || { say "cmake not found: apt-get install cmake (3.25 or newer)" >&2; exit 1; }

if [ -f /usr/include/doctest/doctest.h ] || [ -f .deps/usr/include/doctest/doctest.h ]; then
  say "doctest: present"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  say "doctest: apt-get install doctest-dev"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq doctest-dev >/dev/null
elif command -v apt-get >/dev/null; then  # not root: unpack the same package into .deps/
  say "doctest: unpacking doctest-dev into .deps/"
  mkdir -p .deps && (cd .deps && apt-get download -qq doctest-dev && dpkg -x doctest-dev_*.deb .)
else
  say "doctest not found: install doctest-dev (Debian/Ubuntu) or doctest from your package manager" >&2
  exit 1
fi

# bubblewrap: the sandbox in which scripts/grade.sh builds and runs each student's code. Optional:
# without it a class is graded only with --unsafe, and its ctest cases are skipped.
if command -v bwrap >/dev/null; then
  say "bubblewrap: present"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  say "bubblewrap: apt-get install bubblewrap"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap; } >/dev/null 2>&1 ||
    say "bubblewrap: could not be installed; grading a class will need --unsafe"
else
  say "bubblewrap: not installed (apt-get install bubblewrap); grading a class will need --unsafe"
fi

# matplotlib for the figures: already there; else pip; where the system Python refuses pip
# (Debian 12, Ubuntu 24.04: "externally managed"), Debian's python3-matplotlib when we are root,
# else a virtual environment in .venv/ that the scripts and CMake then use.
if python3 -c "import matplotlib" 2>/dev/null || { [ -x .venv/bin/python3 ] && .venv/bin/python3 -c "import matplotlib" 2>/dev/null; }; then
  say "matplotlib: present"
elif python3 -m pip install -q -r plots/requirements.txt 2>/dev/null; then
  say "matplotlib: pip install -r plots/requirements.txt"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && [ "$(command -v python3)" = /usr/bin/python3 ]; then
  say "matplotlib: apt-get install python3-matplotlib (this Python does not take pip installs)"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-matplotlib >/dev/null
else
  say "matplotlib: this Python does not take pip installs; installing into .venv/"
  python3 -m venv .venv || { say "python3 -m venv failed: apt-get install python3-venv (or python3-matplotlib)" >&2; exit 1; }
  .venv/bin/python3 -m pip install -q -r plots/requirements.txt
fi
