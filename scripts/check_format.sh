#!/usr/bin/env bash
# check_format.sh [--fix]: every C++/CUDA file of common/, lessons/ and solutions/ is laid
# out as .clang-format says. Exit 0 when all are, 1 naming the files that are not (--fix rewrites
# them), 77 (skipped) without clang-format 14, the version the layout was made with: other versions
# break some lines differently. exercises/ is left out: a student's edits are not graded on layout.
set -euo pipefail
cd "$(dirname "$0")/.."
cf=${CLANG_FORMAT:-clang-format}
command -v "$cf" >/dev/null || { echo "check_format: clang-format not found: skipped"; exit 77; }
major=$("$cf" --version | sed -E 's/.*version ([0-9]+).*/\1/')
[ "$major" = 14 ] || { echo "check_format: clang-format $major, not 14: skipped"; exit 77; }
mapfile -t files < <(find common lessons solutions -type f \( -name '*.cu' -o -name '*.cuh' -o -name '*.hpp' -o -name '*.cpp' -o -name '*.h' \) | sort)
if [ "${1:-}" = --fix ]; then "$cf" -i "${files[@]}"; exit 0; fi
bad=0
for f in "${files[@]}"; do
  if ! "$cf" "$f" | cmp -s - "$f"; then echo "not formatted: $f (scripts/check_format.sh --fix)"; bad=1; fi
done
[ $bad = 0 ] && echo "check_format: ${#files[@]} files formatted"
exit $bad
