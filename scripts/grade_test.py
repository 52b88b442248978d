"""Tests of scripts/grade.py and scripts/grade_lint.py that need no build: the file checks, the
reading of the grading channel (with stand-in test binaries written in Python that play an honest
harness or a forger), the CSV cells, the folder names, and the sandbox (skipped where bubblewrap
cannot make one). Run: python3 -m unittest discover -s scripts -p 'grade_test.py'"""
import glob
import os
import shutil
import stat
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grade  # noqa: E402
import grade_lint  # noqa: E402

ROOT = grade.ROOT
SOLVED = open(os.path.join(ROOT, "solutions", "04_online_softmax", "online_combine.cuh")).read()


class Lint(unittest.TestCase):
    def test_every_skeleton_solution_and_wrong_variant_is_accepted(self):
        files = glob.glob(os.path.join(ROOT, "exercises", "*", "*.cuh")) + \
            glob.glob(os.path.join(ROOT, "solutions", "*", "*.cuh")) + \
            glob.glob(os.path.join(ROOT, "solutions", "*", "wrong", "*.cuh"))
        self.assertGreater(len(files), 30)
        for path in files:
            with open(path) as f:
                self.assertIsNone(grade_lint.refusal(f.read()), path)

    ATTACKS = {
        "a macro": "#define CHECK(...) (void)0",
        "an undef": "#undef CHECK",
        "a pragma that saves macros": '#pragma push_macro("CHECK")',
        "_Pragma": '_Pragma("GCC diagnostic ignored")',
        "a digraph directive": "%:define verdict(...)",
        "a line continuation": "// \\\n#define X",
        "a universal character name": "inline void f() { \\u0065xit(0); }",
        "the namespace closed": "}  // namespace graded\nnamespace graded {",
        "a namespace of its own": "namespace mine { }",
        "a brace too many": "inline void f() { } }",
        "the solution included": '#include "solutions/04_online_softmax/online_combine.cuh"',
        "a relative include": '#include "../../solutions/04_online_softmax/online_combine.cuh"',
        "doctest included": "#include <doctest/doctest.h>",
        "a static object": "struct Forge { Forge() {} };\nstatic Forge forge;",
        "an inline variable with a lambda": "inline int forged = [] { return 1; }();",
        "an object after its class": "struct F { F() {} } f;",
        "a braced object": "int forged{compute()};",
        "a constructor attribute": "__attribute__((constructor)) void f() {}",
        "a C++ attribute": "[[gnu::constructor]] void f() {}",
        "setenv": 'inline void f() { setenv("KL_SANITIZE", "1", 1); }',
        "putenv": 'inline void f() { putenv((char*)"KL_SANITIZE=1"); }',
        "the grader's namespace": 'inline void f() { kl::grade::verdict("04.1", {}, {}); }',
        "exit": "inline void f() { std::_Exit(0); }",
        "write": 'inline void f() { write(4, "x", 1); }',
        "fopen": 'inline void f() { fopen("/tmp/x", "w"); }',
        "system": 'inline void f() { system("rm -rf /"); }',
        "extern C": 'extern "C" int puts(const char*);',
        "inline assembly": 'inline void f() { asm("syscall"); }',
        "a raw string": 'inline const char* f() { return R"(x)"; }',
    }

    def test_each_attack_is_refused_with_one_line(self):
        for what, code in self.ATTACKS.items():
            why = grade_lint.refusal(SOLVED + "\n" + code + "\n")
            self.assertIsNotNone(why, what)
            self.assertNotIn("\n", why, what)

    def test_what_exercises_need_is_accepted(self):
        ok = ["#pragma unroll 4", "constexpr int kTile = 32;", "using Pack = float4;",
              "template <int N> __device__ float f(float x) { return x * N; }",
              "inline void g(int x = 3) { (void)x; }", "struct P { float m, s; };",
              "__device__ int counter = 0;", "__global__ void k(float* y) { extern __shared__ float s[]; y[0] = s[0]; }",
              'inline void f() { printf("%d\\n", 1); }', "// a comment with \u00e9 and \"quotes\""]
        for code in ok:
            self.assertIsNone(grade_lint.refusal(SOLVED + "\n" + code + "\n"), code)


def stand_in(body):
    """A stand-in test binary: a Python script that reads the nonce from KL_GRADE_CHANNEL's first fd
    (as common/grade_channel.hpp does), then runs body with nonce, out (the verdict fd) and say()."""
    path = tempfile.mktemp(prefix="kl_stand_in_")
    with open(path, "w") as f:
        f.write(textwrap.dedent(f"""\
            #!{sys.executable}
            import os, sys
            r, out = (int(x) for x in os.environ["KL_GRADE_CHANNEL"].split())
            nonce = os.read(r, 100).decode().strip()
            os.close(r)
            gpu = "--gpu" in sys.argv
            def say(text):
                os.write(out, (nonce + " " + text + "\\n").encode())
            """) + textwrap.dedent(body))
    os.chmod(path, stat.S_IRWXU)
    return path


EX = {"id": "04.1", "lesson": "04_online_softmax", "hints": {"check": "h", "speed": "s"}}
HONEST_CPU = 'if not gpu:\n    print("[doctest] test cases: 1 | 1 passed")\n    say("end 0")\n    sys.exit(0)\n'


class Channel(unittest.TestCase):
    def setUp(self):
        self.box = grade.Sandbox([], False, 60, 4 * grade.GiB)
        self.paths = []

    def tearDown(self):
        for p in self.paths:
            os.remove(p)

    def verdict(self, body, impl="exercise"):
        self.paths.append(stand_in(body))
        return grade.grade_one(EX, self.paths[-1], self.box, cpu_only=False, impl=impl)

    def test_an_honest_pass_passes(self):
        v = self.verdict(HONEST_CPU + 'say("04.1 exercise check PASS")\nsay("04.1 exercise speed 1.100 1.0 1.1")\n'
                         'say("end 0")\n')
        self.assertEqual(v["verdict"], "PASS", v)

    def test_a_solution_binary_passes_under_solutions_only(self):
        # grade.py --solutions runs solutionNN_test, whose verdicts say "solution"; a student's run
        # (exerciseNN_test) counts only "exercise" lines.
        body = HONEST_CPU + ('say("04.1 solution check PASS")\nsay("04.1 solution speed 1.000 1.0 1.0")\n'
                             'say("end 0")\n')
        self.assertEqual(self.verdict(body, impl="solution")["verdict"], "PASS")
        self.assertEqual(self.verdict(body)["verdict"], "FAIL")

    def test_verdicts_printed_on_stdout_are_not_believed(self):
        v = self.verdict(HONEST_CPU + 'print("grade 04.1 exercise check PASS")\n'
                         'print("grade 04.1 exercise speed 1.25 1 1.25")\nsys.exit(0)\n')
        self.assertEqual(v["verdict"], "FAIL", v)

    def test_a_line_without_the_nonce_fails(self):
        v = self.verdict(HONEST_CPU + 'os.write(out, b"0123 04.1 exercise check PASS\\n")\n'
                         'say("04.1 exercise check PASS")\nsay("04.1 exercise speed 1.1 1 1.1")\nsay("end 0")\n')
        self.assertEqual(v["verdict"], "FAIL", v)
        self.assertIn("did not write", v["detail"])

    def test_a_duplicate_line_fails(self):
        v = self.verdict(HONEST_CPU + 'say("04.1 exercise check PASS")\nsay("04.1 exercise check PASS")\n'
                         'say("04.1 exercise speed 1.1 1 1.1")\nsay("end 0")\n')
        self.assertEqual(v["verdict"], "FAIL", v)

    def test_conflicting_lines_fail(self):
        v = self.verdict(HONEST_CPU + 'say("04.1 exercise check PASS")\nsay("04.1 exercise check FAIL row 3")\n'
                         'say("04.1 exercise speed 1.1 1 1.1")\nsay("end 0")\n')
        self.assertEqual(v["verdict"], "FAIL", v)

    def test_speed_not_measured_is_not_a_pass(self):
        v = self.verdict(HONEST_CPU + 'say("04.1 exercise check PASS")\nsay("04.1 exercise speed not measured")\n'
                         'say("end 0")\n')
        self.assertEqual(v["verdict"], "FAIL", v)
        self.assertIn("not measured", v["detail"])

    def test_exit_77_without_the_harness_saying_no_gpu_fails(self):
        v = self.verdict(HONEST_CPU + 'sys.exit(77)\n')
        self.assertEqual(v["verdict"], "FAIL", v)

    def test_the_harness_saying_no_gpu_is_not_graded(self):
        v = self.verdict(HONEST_CPU + 'say("nogpu")\nsys.exit(77)\n')
        self.assertEqual(v["verdict"], "NOT GRADED", v)

    def test_a_cpu_part_that_exits_0_before_its_end_fails(self):
        v = self.verdict('if not gpu:\n    sys.exit(0)\n')
        self.assertEqual(v["verdict"], "FAIL", v)

    def test_a_run_past_its_time_is_killed_with_its_children(self):
        os.environ["KL_GRADE_TIMEOUT_CPU"] = "2"
        try:
            mark = tempfile.mktemp()
            v = self.verdict(f'import subprocess, time\nsubprocess.Popen(["sh", "-c", "sleep 4; touch {mark}"])\n'
                             'time.sleep(60)\n')
        finally:
            del os.environ["KL_GRADE_TIMEOUT_CPU"]
        self.assertEqual(v["verdict"], "FAIL", v)
        self.assertIn("still running after 2 s", v["detail"])
        import time
        time.sleep(3)
        self.assertFalse(os.path.exists(mark), "a child of the killed run went on")


    def test_a_gpu_part_past_its_time_fails(self):
        os.environ["KL_GRADE_TIMEOUT_GPU"] = "2"
        try:
            v = self.verdict(HONEST_CPU + 'import time\ntime.sleep(60)\n')
        finally:
            del os.environ["KL_GRADE_TIMEOUT_GPU"]
        self.assertEqual(v["verdict"], "FAIL", v)
        self.assertIn("still running after 2 s", v["detail"])


class Names(unittest.TestCase):
    def test_csv_cells(self):
        self.assertEqual(grade.csv_cell('=HYPERLINK("x")'), "'=HYPERLINK(\"x\")")
        for lead in "=+-@":
            self.assertEqual(grade.csv_cell(lead + "1"), "'" + lead + "1")
        self.assertEqual(grade.csv_cell("a\nb\tc\x1b"), "abc")
        self.assertEqual(grade.csv_cell("alice"), "alice")

    def test_folder_names(self):
        taken = set()
        self.assertEqual(grade.safe_name("x;solutions", taken), "x_solutions")
        self.assertEqual(grade.safe_name("x\\solutions", taken), "x_solutions-2")
        self.assertEqual(grade.safe_name('a"b\nc', taken), "a_b_c")
        self.assertEqual(grade.safe_name("-rf", taken), "_rf")
        self.assertEqual(grade.safe_name("alice", taken), "alice")


class FreshCopy(unittest.TestCase):
    def test_only_listed_files_and_no_links_are_taken(self):
        top = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, top, True)
        student = os.path.join(top, "alice", "04_online_softmax")
        os.makedirs(os.path.join(student, "doctest"))
        with open(os.path.join(student, "online_combine.cuh"), "w") as f:
            f.write(SOLVED)
        with open(os.path.join(student, "doctest", "doctest.h"), "w") as f:
            f.write("#define CHECK(...)\n")
        os.symlink(os.path.join(ROOT, "solutions", "04_online_softmax", "warp_per_row.cuh"),
                   os.path.join(student, "warp_per_row.cuh"))
        dest = os.path.join(top, "src")
        exercises = [e for e in grade.load_exercises() if e["lesson"] == "04_online_softmax"]
        refused = grade.fresh_copy(os.path.join(top, "alice"), dest, exercises)
        self.assertEqual(sorted(os.listdir(os.path.join(dest, "04_online_softmax"))),
                         ["online_combine.cuh", "warp_per_row.cuh"])
        self.assertIn("04.2", refused)
        self.assertIn("a link", refused["04.2"])
        with open(os.path.join(dest, "04_online_softmax", "warp_per_row.cuh")) as f, \
                open(os.path.join(ROOT, "exercises", "04_online_softmax", "warp_per_row.cuh")) as skeleton:
            self.assertEqual(f.read(), skeleton.read())  # the skeleton in its place
        with open(os.path.join(dest, "04_online_softmax", "online_combine.cuh")) as f:
            self.assertEqual(f.read(), SOLVED)


@unittest.skipIf(grade.sandbox_works() is not None, f"no sandbox here: {grade.sandbox_works()}")
class Sandbox(unittest.TestCase):
    def run_in(self, script):
        own = tempfile.mkdtemp()
        try:
            box = grade.Sandbox([own], True, 30, 2 * grade.GiB)
            r = grade.run(["sh", "-c", script.replace("OWN", own)], box, 30)
            return r, own
        finally:
            self.addCleanup(shutil.rmtree, own, True)

    def test_only_its_build_folder_is_writable(self):
        target = os.path.join(ROOT, "solutions", "kl_sandbox_probe")
        r, own = self.run_in(f"touch OWN/ok; touch {target} || echo repository-read-only; "
                             "touch /tmp/x && echo private-tmp; touch /var/tmp/kl_probe || echo var-read-only")
        self.assertTrue(os.path.exists(os.path.join(own, "ok")), r.out)
        self.assertFalse(os.path.exists(target), r.out)
        self.assertIn("repository-read-only", r.out)
        self.assertIn("var-read-only", r.out)

    def test_no_network(self):
        r, _ = self.run_in("tail -n +3 /proc/net/dev | cut -d: -f1")
        self.assertEqual(r.out.split(), ["lo"], r.out)

    def test_another_user_without_capabilities(self):
        r, _ = self.run_in("id -u; grep CapEff /proc/self/status")
        self.assertIn("65534", r.out)
        self.assertIn("0000000000000000", r.out)

    def test_its_environment_has_no_grader_settings(self):
        os.environ["KL_SANITIZE"] = "1"
        try:
            r, _ = self.run_in("env")
        finally:
            del os.environ["KL_SANITIZE"]
        self.assertNotIn("KL_SANITIZE", r.out)


class Diagnosis(unittest.TestCase):
    """grade.diagnose with a stand-in ncu that prints the committed raw profiles of lesson 06's steps 2
    (as the submission) and 3 (as the solution), and with no ncu at all."""

    EX = {"id": "06.2"}

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        self.box = grade.Sandbox([], False, 60, 4 * grade.GiB)

    def stand_in(self, body):
        path = os.path.join(self.tmp, "ncu")
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + body)
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
        old = os.environ["PATH"]
        os.environ["PATH"] = self.tmp + os.pathsep + old
        self.addCleanup(os.environ.__setitem__, "PATH", old)

    def test_the_slower_sides_quantities(self):
        sample = os.path.join(ROOT, "plots", "tests", "profile_sample")
        self.stand_in('if [ "$1" = --query-metrics ]; then echo "gpu__time_duration Counter ns t"; '
                      'echo "dram__bytes_read Counter byte r"; echo "dram__bytes_write Counter byte w"; '
                      'echo "sm__pipe_fma_cycles_active Counter cycle f"; exit 0; fi\n'
                      f'case $KL_GRADE_PROFILE in mine) cat {sample}/06_2_smem_tiles.txt ;; '
                      f'solution) cat {sample}/06_3_register_tile.txt ;; esac\n')
        lines = grade.diagnose(self.EX, "/bin/true", self.box)
        self.assertEqual(lines[0], "the profiler (ncu, at the timed size), yours vs the solution's:")
        self.assertEqual(len(lines), 4)
        self.assertTrue(lines[1].strip().startswith("DRAM traffic: 8.4"), lines)

    def test_no_counters(self):
        self.stand_in('if [ "$1" = --query-metrics ]; then echo "gpu__time_duration Counter ns t"; exit 0; fi\n'
                      'echo "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission"; exit 1\n')
        self.assertIn("ERR_NVGPUCTRPERM", grade.diagnose(self.EX, "/bin/true", self.box)[0])

    def test_no_ncu(self):
        old = os.environ["PATH"]
        os.environ["PATH"] = self.tmp
        self.addCleanup(os.environ.__setitem__, "PATH", old)
        real = os.access
        grade.os.access = lambda p, m: False if p.endswith("/ncu") else real(p, m)
        self.addCleanup(setattr, grade.os, "access", real)
        self.assertEqual(grade.diagnose(self.EX, "/bin/true", self.box),
                         ["diagnosis skipped: no ncu (Nsight Compute, in the CUDA Toolkit's bin/) on the PATH"])


class Harness(unittest.TestCase):
    """common/grade_channel.hpp in a real test binary (common_test, its path in KL_COMMON_TEST)."""

    def test_the_nonce_is_hidden_and_the_end_reported(self):
        exe = os.environ["KL_COMMON_TEST"]
        box = grade.Sandbox([], False, 60, 4 * grade.GiB)
        r = grade.run([exe, "-tc=grade channel*"], box, 60, channel=True, env={"KL_SANITIZE": "1"})
        self.assertEqual(r.returncode, 0, r.out)
        self.assertIn("test cases: 1 | 1 passed", r.out)
        self.assertEqual(r.channel.splitlines(), ["end 0"], r.out)


if __name__ == "__main__":
    # "grade_test.py sandbox": the sandbox's cases alone, exit 77 (skipped for ctest) where bubblewrap
    # cannot make one; "grade_test.py harness PATH/common_test": the harness's side of the channel;
    # without an argument: every other case.
    if sys.argv[1:2] == ["harness"]:
        os.environ["KL_COMMON_TEST"] = sys.argv[2]
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(Harness)
    elif sys.argv[1:] == ["sandbox"]:
        why = grade.sandbox_works()
        if why:
            print(f"skipped: {why}")
            sys.exit(77)
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(Sandbox)
    else:
        suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromTestCase(c) for c in (Lint, Channel, Names, FreshCopy, Diagnosis))
    sys.exit(0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1)
