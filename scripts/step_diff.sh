#!/usr/bin/env bash
# step_diff.sh NN A B [DIFF OPTIONS...]: what changed from step A to step B of lesson NN, as
# `diff -u lessons/NN_*/steps/AA_*.cuh lessons/NN_*/steps/BB_*.cuh`. Step numbers may be written
# 3 or 03. Exit 0 whether or not the steps differ; 2 on a bad command line or a missing file.
# KL_ROOT (default: this repository) is the tree to look in.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/step_diff.sh NN A B [DIFF OPTIONS...]
  NN  lesson number (4 or 04: lessons/04_*)
  A B step numbers (3 or 03: lessons/NN_*/steps/03_*.cuh)
  further arguments go to diff, e.g. -w, --color=always, -U10
Exit: 0 (different or not), 2 on a bad argument or a missing lesson or step.
Environment: KL_ROOT, the repository root (default: the one this script is in).
EOF
}

die() { echo "step_diff: $*" >&2; exit 2; }

# two_digits WHAT VALUE: 3 -> 03; anything but a number of one or two digits is an error.
two_digits() {
  [[ $2 =~ ^[0-9]{1,2}$ ]] || die "$1 must be a number like 3 or 03, not '$2'"
  printf '%02d' "$((10#$2))"
}

# only_match WHAT GLOB...: the one path the glob matched, else an error.
only_match() {
  local what=$1; shift
  [ -e "$1" ] || die "no $what"
  [ $# -eq 1 ] || die "more than one $what: $*"
  echo "$1"
}

main() {
  case ${1:-} in -h | --help) usage; exit 0 ;; esac
  [ $# -ge 3 ] || die "expected NN A B [DIFF OPTIONS...] (see --help)"
  local root=${KL_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
  local nn a b lesson from to
  nn=$(two_digits lesson "$1")
  a=$(two_digits step "$2")
  b=$(two_digits step "$3")
  shift 3
  cd "$root" 2>/dev/null || die "KL_ROOT is not a directory: $root"
  lesson=$(only_match "lesson $nn in $root/lessons" lessons/"$nn"_*/)
  [ -d "${lesson}steps" ] || die "lesson $nn has no steps folder: $root/${lesson}steps"
  from=$(only_match "step $a in $root/${lesson}steps" "$lesson"steps/"$a"_*.cuh)
  to=$(only_match "step $b in $root/${lesson}steps" "$lesson"steps/"$b"_*.cuh)
  local rc=0
  diff -u "$@" "$from" "$to" || rc=$?
  [ "$rc" -le 1 ] || exit "$rc"  # diff's own trouble (a bad option): it has said why
}

main "$@"; exit
