#!/usr/bin/env bash
# csv_option_test.sh LESSON_EXE: a lesson's --csv takes only a regular file, and creates it only once
# nothing can refuse the run. Refused with exit 2 and one line, without hanging: a FIFO, /dev/stdout
# into a pipe, a folder. No file left behind by a run refused for bad input (exit 2) or for want of a
# GPU (exit 77; on a GPU machine the run goes on and the file must then hold the header).
set -uo pipefail
exe=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
refused() {  # refused WHAT CMD...: exit 2 and one line on stderr, within 20 s
  local what=$1; shift
  timeout 20 "$@" >/dev/null 2>"$work/err"
  local rc=$?
  echo "$what: exit $rc, stderr: $(cat "$work/err")"
  [ "$rc" = 2 ] || fail "$what: exit $rc, expected 2"
  [ "$(wc -l <"$work/err")" = 1 ] || fail "$what: expected one line on stderr"
}
mkfifo "$work/fifo"
refused "a FIFO" "$exe" --csv "$work/fifo"
refused "a folder" "$exe" --csv "$work"
timeout 20 "$exe" --csv /dev/stdout 2>"$work/err" | cat >/dev/null
rc=${PIPESTATUS[0]}
echo "/dev/stdout into a pipe: exit $rc, stderr: $(cat "$work/err")"
[ "$rc" = 2 ] || fail "/dev/stdout into a pipe: exit $rc, expected 2"
refused "bad input" "$exe" --reps 0 --csv "$work/bad.csv"
[ ! -e "$work/bad.csv" ] || fail "a run refused for bad input created its CSV"
timeout 300 "$exe" --csv "$work/run.csv" >/dev/null 2>&1
rc=$?
echo "a plain run: exit $rc"
if [ "$rc" = 77 ]; then
  [ ! -e "$work/run.csv" ] || fail "a run refused for want of a GPU created its CSV"
else
  [ "$rc" = 0 ] || fail "exit $rc"
  head -n 1 "$work/run.csv" | grep -q '^lesson,step,' || fail "the CSV has no header"
fi
echo "csv_option_test: ok"
