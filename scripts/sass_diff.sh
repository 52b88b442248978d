#!/usr/bin/env bash
# sass_diff.sh: proves whether a change altered the GPU code. It builds BASE and HEAD for sm_90
# (Release, the project's own CMake), disassembles every kernel of the lesson and test executables
# with cuobjdump, and compares them kernel by kernel: the SASS instructions with their encodings
# (which carry the scheduling bits), and the registers, static shared memory, stack and local
# memory that `cuobjdump -res-usage` reports. A refactor that claims "no change to the kernels"
# passes when every line of the table says IDENTICAL and the script exits 0.
#
# Reading the table (stdout), one line per kernel, then the totals:
#   IDENTICAL   same instructions, same resources
#   DIFFERENT   the SASS differs: +added/-removed instruction lines, and any resource change
#   RESOURCES   same instructions, but registers / shared / stack / local memory changed
#   ONLY-BASE   a kernel of BASE that nothing in HEAD matches (removed, or renamed: see --map)
#   ONLY-HEAD   a kernel of HEAD that nothing in BASE matches (added, or renamed)
# The brackets name the executables the kernel is in; "A  =>  B" is a kernel renamed through --map.
# A name listed twice has different code in different executables (e.g. a header's static kernel,
# compiled per file): each such copy is compared on its own. The unified diff of every DIFFERENT
# kernel is written to OUT/diffs/ and the table to OUT/summary.txt; the cuobjdump output of each
# build is kept, gzipped, in its build directory's sass_dump/.
# The /*0040*/ position column is left out: it follows from the order of the lines, and without
# it one inserted instruction shows as one line, not as every line after it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGETS_RE=${TARGETS_RE:-'^(lesson[0-9]+|lesson[0-9]+_test|solution[0-9]+_test)$'}
JOBS=${JOBS:-$(nproc)}
OUT=$ROOT/build/sass_diff
MAP=""
WORKTREES=()
BUILT=""

usage() {
  cat <<EOF
usage: scripts/sass_diff.sh [--out DIR] [--map FILE] BASE [HEAD]

Builds BASE and HEAD (git commit-ishes) for sm_90 and compares the SASS and resource usage of
every kernel in the executables matching $TARGETS_RE.
  BASE        a commit-ish, built in a git worktree under /tmp; cached in build/sass_cache/<sha>
  HEAD        a commit-ish as well; left out: the working tree as it is, uncommitted changes
              included, built incrementally in build/sass_head
  --out DIR   where the diffs and the summary go (default build/sass_diff)
  --map FILE  kernels renamed between BASE and HEAD, tried after the exact names. One rule a line
              ('#' starts a comment):
                OLD<TAB>NEW     the demangled BASE name OLD is the HEAD kernel NEW
                s/REGEX/REPL/   a Python regex substitution applied to the BASE names, e.g.
                                s/lesson04::softmax_/lesson04::steps::softmax_/
Environment: JOBS (build parallelism, default nproc), TARGETS_RE (the executables compared).
Exit: 0 every kernel matched and identical; 1 a kernel differs or is unmatched; 2 bad usage or
a failed build.
EOF
}

die() { echo "sass_diff: $*" >&2; exit 2; }
say() { echo "sass_diff: $*" >&2; }

# cuobjdump and nvdisasm come with a full CUDA toolkit, or from PyPI (nvidia-cuda-cuobjdump,
# nvidia-cuda-nvdisasm: they land in site-packages/nvidia/cu13/bin).
find_tools() {
  command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
  local site dir
  site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null || true)
  for dir in "${CUDA_HOME:-/usr/local/cuda}/bin" "$site"/nvidia/cu*/bin; do
    if [ -d "$dir" ]; then PATH="$PATH:$dir"; fi
  done
  command -v cuobjdump >/dev/null || die "cuobjdump not found: pip install nvidia-cuda-cuobjdump"
  command -v nvdisasm >/dev/null || die "nvdisasm (cuobjdump -sass runs it) not found: pip install nvidia-cuda-nvdisasm"
  command -v python3 >/dev/null || die "python3 not found"
}

# doctest is needed to configure: system-wide, or in .deps/ (scripts/bootstrap.sh), which the
# worktrees share through a symbolic link.
ensure_doctest() {
  [ -f /usr/include/doctest/doctest.h ] || [ -d "$ROOT/.deps" ] || bash "$ROOT/scripts/bootstrap.sh" >&2
}

# configure_and_build SRC BUILD_DIR: Release, sm_90 only; builds just the executables we compare.
configure_and_build() {
  local src=$1 dir=$2 targets
  cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$dir.configure.log" 2>&1 ||
    die "configure of $src failed: see $dir.configure.log"
  targets=$(cmake --build "$dir" --target help | sed -E 's/^\.\.\. //; s/:.*//' | grep -E "$TARGETS_RE" | sort -u)
  [ -n "$targets" ] || die "no target in $dir matches $TARGETS_RE"
  # shellcheck disable=SC2086  # one word a target
  cmake --build "$dir" -j "$JOBS" --target $targets >"$dir.build.log" 2>&1 ||
    die "build of $src failed: see $dir.build.log"
}

# build_commit SHA: builds the commit in a detached worktree, once (the stamp .complete records
# which targets were built); the worktree is removed again on exit. Sets BUILT.
build_commit() {
  local sha=$1 dir=$ROOT/build/sass_cache/$1 wt=${TMPDIR:-/tmp}/kl_sass_wt_$1
  BUILT=$dir
  [ "$(cat "$dir/.complete" 2>/dev/null)" = "$TARGETS_RE" ] && return
  say "building ${sha:0:12} in $wt (cached in build/sass_cache/$sha)"
  git -C "$ROOT" worktree prune
  [ -d "$wt" ] || git -C "$ROOT" worktree add --detach --quiet "$wt" "$sha" >&2
  WORKTREES+=("$wt")
  if [ -d "$ROOT/.deps" ] && [ ! -e "$wt/.deps" ]; then ln -s "$ROOT/.deps" "$wt/.deps"; fi
  mkdir -p "$dir"
  configure_and_build "$wt" "$dir"
  echo "$TARGETS_RE" >"$dir/.complete"
}

# label REV: "HEAD~1 (b12d0d9)"; the working tree when REV is empty.
label() {
  if [ -n "$1" ]; then echo "$1 ($(git -C "$ROOT" rev-parse --short "$1^{commit}"))"; else echo "working tree"; fi
}

# build_side REV: REV empty means the working tree, built incrementally. Sets BUILT.
build_side() {
  local start=$SECONDS
  if [ -z "$1" ]; then
    say "building the working tree in build/sass_head"
    BUILT=$ROOT/build/sass_head
    mkdir -p "$BUILT"
    configure_and_build "$ROOT" "$BUILT"
  else
    build_commit "$(git -C "$ROOT" rev-parse --verify --quiet "$1^{commit}")"
  fi
  say "  ${1:-working tree}: ready in $((SECONDS - start)) s"
}

# dump_side BUILD_DIR: cuobjdump's SASS and resource usage of each executable, gzipped, into
# BUILD_DIR/sass_dump/ (hundreds of MB as text); an executable older than its dump is skipped.
dump_side() {
  local out=$1/sass_dump exe name
  mkdir -p "$out"
  while IFS= read -r exe; do
    name=$(basename "$exe")
    [[ $name =~ $TARGETS_RE ]] || continue
    [ "$out/$name.res" -nt "$exe" ] && continue
    cuobjdump -sass "$exe" | gzip -1 >"$out/$name.sass.gz" || die "cuobjdump -sass failed on $exe"
    cuobjdump -res-usage "$exe" >"$out/$name.res" || die "cuobjdump -res-usage failed on $exe"
  done < <(find "$1" -path '*/CMakeFiles' -prune -o -path "$out" -prune -o -type f -perm -u+x -print | sort)
}

# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  local wt
  for wt in "${WORKTREES[@]}"; do git -C "$ROOT" worktree remove --force "$wt" 2>/dev/null || true; done
  git -C "$ROOT" worktree prune
}

main() {
  local args=()
  while [ $# -gt 0 ]; do
    case $1 in
      -h | --help) usage; exit 0 ;;
      --out) [ $# -ge 2 ] || die "--out needs a directory"; OUT=$(mkdir -p "$2" && cd "$2" && pwd); shift 2 ;;
      --map)
        [ -f "${2:-}" ] || die "--map needs a readable file"
        MAP=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
        shift 2 ;;
      -*) die "unknown option $1 (see --help)" ;;
      *) args+=("$1"); shift ;;
    esac
  done
  if [ ${#args[@]} -lt 1 ] || [ ${#args[@]} -gt 2 ]; then die "expected BASE [HEAD] (see --help)"; fi
  local base=${args[0]} head=${args[1]:-}
  for rev in "$base" $head; do
    git -C "$ROOT" rev-parse --verify --quiet "$rev^{commit}" >/dev/null || die "not a commit: $rev"
  done
  find_tools
  ensure_doctest
  trap cleanup EXIT
  local base_dump head_dump
  build_side "$base"
  dump_side "$BUILT"
  base_dump=$BUILT/sass_dump
  build_side "$head"
  dump_side "$BUILT"
  head_dump=$BUILT/sass_dump
  rm -rf "$OUT/diffs" && mkdir -p "$OUT"
  python3 "$ROOT/scripts/sass_kernels.py" --base-label "$(label "$base")" --head-label "$(label "$head")" \
    ${MAP:+--map "$MAP"} "$base_dump" "$head_dump" "$OUT/diffs" | tee "$OUT/summary.txt"
}

main "$@"; exit
