#!/usr/bin/env bash
# grade_gpu_selftest.sh BUILD_DIR [LOG_DIR]: the grader's attacks that need a GPU, graded as a class
# on this machine's GPU (exercises 01.1 and 04.2), in the sandbox when bubblewrap can make one here,
# else with --unsafe. Exit 0 when every verdict is as it must be, 1 naming the first that is not,
# 77 without a GPU. Students:
#   honest        the solutions: PASS (the controls: the timed-size check passes right kernels)
#   skip_timed    the solutions, returning at once at the timed size (01.1: n >= 2^26; 04.2:
#                 rows >= 2^21): FAIL "at the timed size"
#   forged_speed  04.2 as a block per row (right, about 0.16x the solution's speed), whose kernel
#                 prints "grade 04.2 exercise check PASS" and a speed of 1.5 from the GPU: FAIL on
#                 the bar, the printed lines ignored
set -uo pipefail
cd "$(dirname "$0")/.."
build=$(realpath -m "$1")
logs=${2:-$build/grade_gpu_logs}
mkdir -p "$logs"
nvidia-smi -L >/dev/null 2>&1 || { echo "skipped: no GPU"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
why=$(python3 -c 'import sys; sys.path.insert(0, "scripts"); import grade; print(grade.sandbox_works() or "")')
unsafe=${why:+--unsafe}
echo "sandbox: ${why:-bubblewrap}"

class="$build/grade_gpu_class"
rm -rf "$class"
put() {  # put STUDENT LESSON FILE SOURCE
  mkdir -p "$class/$1/$2"
  cp "$4" "$class/$1/$2/$3"
}
put honest 01_naive_reduction grid_stride.cuh solutions/01_naive_reduction/grid_stride.cuh
put honest 04_online_softmax warp_per_row.cuh solutions/04_online_softmax/warp_per_row.cuh
put skip_timed 01_naive_reduction grid_stride.cuh solutions/01_naive_reduction/grid_stride.cuh
put skip_timed 04_online_softmax warp_per_row.cuh solutions/04_online_softmax/warp_per_row.cuh
python3 - "$class/skip_timed" <<'EOF'
import re, sys
def skip(path, signature, condition):
    text = open(path).read()
    m = re.search(signature, text)
    assert m, (path, signature)
    at = text.index("{", m.end()) + 1
    open(path, "w").write(text[:at] + f"\n  if ({condition}) return;  // the work skipped at the timed size" + text[at:])
skip(sys.argv[1] + "/01_naive_reduction/grid_stride.cuh", r"__global__ void sum_grid_stride\(", "n >= (std::size_t{1} << 26)")
skip(sys.argv[1] + "/04_online_softmax/warp_per_row.cuh", r"__global__ void softmax_warp_per_row\(", "rows >= (std::int64_t{1} << 21)")
EOF
put forged_speed 04_online_softmax warp_per_row.cuh solutions/04_online_softmax/wrong/block_per_row.cuh
python3 - "$class/forged_speed/04_online_softmax/warp_per_row.cuh" <<'EOF'
import re, sys
path = sys.argv[1]
text = open(path).read()
m = re.search(r"__global__ void softmax_warp_per_row\(", text)
assert m
at = text.index("{", m.end()) + 1
forge = ('\n  if (blockIdx.x == 0 && threadIdx.x == 0 && rows == (std::int64_t{1} << 21))'
         '\n    printf("grade 04.2 exercise check PASS\\ngrade 04.2 exercise speed 1.500 1.0 1.5\\n");')
open(path, "w").write(text[:at] + forge + text[at:])
EOF
grep -q "std::size_t{1} << 26" "$class/skip_timed/01_naive_reduction/grid_stride.cuh" || fail "skip_timed 01.1 not made"
grep -q 'printf("grade 04.2' "$class/forged_speed/04_online_softmax/warp_per_row.cuh" || fail "forged_speed not made"

csv="$build/grade_gpu_class.csv"
KL_GRADE_BUILD_ROOT="$build/grade_gpu" python3 scripts/grade.py $unsafe --submissions "$class" --csv "$csv" 01.1 04.2 \
  >"$logs/class.log" 2>&1
echo "class: exit $?"
cat "$logs/class.log"
cp "$csv" "$logs/grades.csv"
python3 - "$csv" <<'EOF' || fail "a verdict is not as it must be (above)"
import csv, re, sys
rows = {(r["student"], r["exercise"]): r for r in csv.DictReader(open(sys.argv[1]))}
want = {
    ("honest", "01.1"): ("PASS", r"x the solution's speed"),
    ("honest", "04.2"): ("PASS", r"x the solution's speed"),
    ("skip_timed", "01.1"): ("FAIL", r"^at the timed size, n = 67108864, whole numbers: sum"),
    ("skip_timed", "04.2"): ("FAIL", r"^at the timed size, rows = 2097152"),
    ("forged_speed", "04.2"): ("FAIL", r"^right, but 0\.\d+x the solution's speed"),
}
bad = 0
for key, (verdict, detail) in want.items():
    r = rows.get(key)
    ok = r is not None and r["verdict"] == verdict and re.search(detail, r["detail"])
    print(("ok   " if ok else "FAIL ") + f"{key[0]} {key[1]}: want {verdict} /{detail}/, got "
          + (f"{r['verdict']}: {r['detail']}" if r else "no row"))
    bad |= not ok
sys.exit(bad)
EOF
echo "grade_gpu_selftest: ok"
