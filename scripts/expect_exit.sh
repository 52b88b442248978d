#!/usr/bin/env bash
# expect_exit.sh CODE CMD ARGS...: passes when CMD exits with CODE and, unless CODE is 0, says why
# on exactly one line of stderr (ctest uses it for the bad-input checks). A CMD that exits 77 (no GPU) is passed
# through, so ctest can list the check as skipped where it needs a GPU.
want=$1; shift
err=$(mktemp)
"$@" >/dev/null 2>"$err"
got=$?
lines=$(wc -l <"$err")
echo "exit $got, stderr:"; cat "$err"; rm -f "$err"
[ "$got" = 77 ] && [ "$want" != 77 ] && exit 77
[ "$got" = "$want" ] || { echo "FAIL: expected exit $want"; exit 1; }
[ "$want" = 0 ] && exit 0
[ "$lines" = 1 ] || { echo "FAIL: expected one line on stderr, got $lines"; exit 1; }
