"""plots/profile_table.py and plots/roofline.py on ncu's raw output of real steps (plots/tests/profile_sample/,
written by scripts/profile.sh on an H100): one row per kernel with the step's shape, an n/a step as one row
with its reason, the grader's comparison on the slower side only, and the rooflines drawn."""
import csv
import io
import math
import os
import shutil
import stat
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import profile_table as pt  # noqa: E402
import roofline  # noqa: E402

SAMPLE = os.path.join(HERE, "profile_sample")


def raw(name):
    with open(os.path.join(SAMPLE, name)) as f:
        return f.read()


def side(name):
    label, step, args, gpu, launches = pt.parse_raw(raw(name))[:5]
    return pt.combined([pt.kernel_row("06", label, step, args, gpu, m) for m in launches])


class Table(unittest.TestCase):
    def rows(self, *names, lesson="06"):
        rows, empty = pt.table(lesson, [raw(n) for n in names])
        out = io.StringIO()
        pt.write(rows, out)
        return list(csv.DictReader(io.StringIO(out.getvalue()))), empty

    def test_one_row_per_kernel_with_the_steps_shape(self):
        rows, empty = self.rows("06_2_smem_tiles.txt", "06_3_register_tile.txt")
        self.assertEqual(empty, [])
        self.assertEqual([(r["step"], r["name"], r["kernel"]) for r in rows],
                         [("2", "smem_tiles", "gemm_smem_tiles"), ("3", "register_tile", "gemm_register_tile")])
        for r in rows:
            self.assertEqual((r["dtype"], r["shape"], r["args"]), ("f32", "MxNxK=4096x4096x4096", ""))
            self.assertEqual((r["clock_control"], r["gpu"]), ("none", "NVIDIA H100 80GB HBM3"))
        # step 3's kernel: about half step 2's time, 160 registers, and the B reads' bank conflicts
        self.assertAlmostEqual(float(rows[1]["duration_us"]) / float(rows[0]["duration_us"]), 0.51, delta=0.02)
        self.assertEqual(rows[1]["registers"], "160")
        self.assertGreater(float(rows[1]["smem_conflicts"]), 1e8)
        for r in rows:  # every stall share is a share, the three in decreasing order
            shares = [float(r[f"stall{i}_share"]) for i in (1, 2, 3)]
            self.assertEqual(shares, sorted(shares, reverse=True))
            self.assertLessEqual(sum(shares), 1.0 + 1e-9)

    def test_read_takes_the_default_shape_or_a_files_only_shape(self):
        head = "lesson,step,name,dtype,shape,args,kernel,duration_us\n"
        mixed = head + "05,2,a,f32,S,,k2,1\n05,2,a,f32,T,--rows 8,k2,2\n"
        single = head + "05,2,a,f32,T,--rows 8,k2,2\n05,4,b,f32,T,--rows 8,k4,3\n"
        two = head + "05,2,a,f32,T,--rows 8,k2,2\n05,2,a,f32,U,--rows 9,k2,3\n"
        with tempfile.TemporaryDirectory() as d:
            def read(text):
                path = os.path.join(d, "p.csv")
                with open(path, "w") as f:
                    f.write(text)
                return [(r["step"], r["duration_us"]) for r in pt.read(path)]
            self.assertEqual(read(mixed), [("2", "1")])  # the default shape wins
            self.assertEqual(read(single), [("2", "2"), ("4", "3")])  # a profile of one other shape
            self.assertEqual(read(two), [])  # several other shapes: none is the file's

    def test_a_library_step_of_two_kernels(self):
        rows, _ = self.rows("02_lib_cub.txt", lesson="02")
        self.assertEqual(len(rows), 2)
        self.assertTrue(rows[0]["kernel"].startswith("DeviceReduceKernel<"))
        self.assertTrue(rows[1]["kernel"].startswith("DeviceReduceSingleTileKernel<"))
        self.assertNotIn("(", rows[0]["kernel"])  # the parameter list is dropped

    def test_a_step_with_no_kernel_is_one_row_with_its_reason(self):
        rows, empty = self.rows("04_2_warp_per_row.txt", lesson="04")
        self.assertEqual(empty, ["2 warp_per_row"])
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0]["kernel"], "")
        self.assertIn("n/a: a row of 4096 does not fit", rows[0]["note"])

    def test_kernel_names(self):
        self.assertEqual(pt.kernel_name("void ns::gemm<Plain, (int)3>(ns::Problem, float *)"), "ns::gemm<Plain, (int)3>")
        self.assertEqual(pt.kernel_name("plain_kernel"), "plain_kernel")

    def test_numbers_in_base_units(self):
        self.assertEqual(pt.number("1,234.5"), 1234.5)
        self.assertEqual(pt.number("2", "Kbyte"), 2000)
        self.assertTrue(math.isnan(pt.number("n/a")))
        self.assertTrue(math.isnan(pt.number("No-CC")))


class Diagnosis(unittest.TestCase):
    def test_only_where_the_submission_is_slower(self):
        slow, fast = side("06_2_smem_tiles.txt"), side("06_3_register_tile.txt")
        lines = pt.differences(slow, fast)
        self.assertTrue(lines[0].startswith("DRAM traffic: 8.4"), lines)
        self.assertIn("FMA pipe: 15 % vs 28 %", lines)
        # step 3 has the bank conflicts, so they do not explain step 2's slowness
        self.assertFalse(any("bank conflicts" in line for line in lines), lines)
        # the other way round, the conflicts come first
        self.assertTrue(pt.differences(fast, slow)[0].startswith("shared-memory bank conflicts: 271 M vs 15"))

    def test_human(self):
        self.assertEqual(pt.human(1.55e7, ""), "15.5 M")
        self.assertEqual(pt.human(6.8e8, "B"), "680 MB")
        self.assertEqual(pt.human(12.5, " %"), "12.5 %")
        self.assertEqual(pt.human(0, "B"), "0 B")

    def test_metric_list_from_a_stand_in_ncu(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        fake = os.path.join(tmp, "ncu")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\nprintf 'Device GH100\\ngpu__time_duration   Counter  nsecond  time\\n"
                    "dram__bytes_read  Counter  byte  read\\n'\n")
        os.chmod(fake, os.stat(fake).st_mode | stat.S_IXUSR)
        self.assertEqual(pt.ncu_metrics(fake), "gpu__time_duration.sum,dram__bytes_read.sum,launch__registers_per_thread")


class Roofline(unittest.TestCase):
    def test_points_and_figures(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        out = os.path.join(tmp, "h100")
        os.makedirs(os.path.join(out, "profile"))
        shutil.copy(os.path.join(HERE, "sample", "lesson06.csv"), out)
        rows, _ = pt.table("06", [raw("06_2_smem_tiles.txt"), raw("06_3_register_tile.txt")])
        with open(os.path.join(out, "profile", "lesson06.csv"), "w") as f:
            pt.write(rows, f)
        pts = roofline.points(pt.read(os.path.join(out, "profile", "lesson06.csv")),
                              roofline.klplot.read_rows(os.path.join(out, "lesson06.csv")), "lesson06")
        self.assertEqual([p.step for p in pts], ["2", "3"])
        for p in pts:  # the problem's FLOPs (2 M N K), not ncu's count
            self.assertAlmostEqual(p.flops / (2 * 4096.0 ** 3), 1.0, delta=0.01)
        self.assertGreater(pts[1].flops / pts[1].bytes, 5 * pts[0].flops / pts[0].bytes)  # step 3 reuses tiles
        roofline.main(out)
        for name in ("roofline_lesson06.png", "roofline.png"):
            self.assertGreater(os.path.getsize(os.path.join(out, "profile", name)), 10000)


if __name__ == "__main__":
    unittest.main()


class Markers(unittest.TestCase):
    """readme_tables' profile table and counter markers on the committed H100 profiles."""

    def setUp(self):
        import readme_tables

        self.rt = readme_tables

    def test_counter(self):
        c = lambda *t: self.rt.counter(["results/h100/profile/lesson06.csv", *t])  # noqa: E731
        self.assertRegex(c("3", "smem_conflicts"), r"^\d+(\.\d+)? M$")
        self.assertRegex(c("register_tile", "stall1_share"), r"^\d+ %$")
        self.assertEqual(c("3", "registers"), "160")
        with self.assertRaisesRegex(self.rt.MarkerError, "unknown column"):
            c("3", "no_such_column")
        with self.assertRaisesRegex(self.rt.MarkerError, "no profiled kernel of step 99"):
            c("99", "registers")

    def test_sass_share(self):
        import csv

        path = "results/h100/profile/lesson09_step8_d128_sass.csv"
        with open(os.path.join(self.rt.ROOT, path), newline="") as f:
            rows = list(csv.DictReader(f))
        top = max(rows, key=lambda r: int(r["samples"]))
        share = lambda *t: float(self.rt.sass_share([path, *t]).removesuffix(" %"))  # noqa: E731
        self.assertAlmostEqual(share(top["offset"], "fmt=.2f"), 100 * float(top["share"]), places=1)
        self.assertGreaterEqual(share("WARPGROUP.DEPBAR", "fmt=.2f"), share(top["offset"], "fmt=.2f"))
        mufu = sum(float(r["share"]) for r in rows if r["sass"].lstrip("@!P0123456 ").startswith("MUFU"))
        self.assertAlmostEqual(share("MUFU", "fmt=.2f"), 100 * mufu, delta=0.1)
        self.assertLess(share("MUFU", "reason=wait", "fmt=.2f"), share("MUFU", "fmt=.2f"))
        with self.assertRaisesRegex(self.rt.MarkerError, "lists no instruction"):
            share("NO_SUCH_OPCODE")
        with self.assertRaisesRegex(self.rt.MarkerError, "a sass marker reads"):
            self.rt.sass_share([path])

    def test_sass_samples_of_ncu_source_page(self):
        import sass_samples

        sample = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sample", "ncu_source_sass.csv")
        with open(sample, newline="") as f:
            rows = sass_samples.compact(f, min_share=0.0)
        with open(sample, newline="") as f:
            kept = sass_samples.compact(f, min_share=0.05)
        self.assertEqual(len(rows), 15)  # every instruction of the sample
        self.assertEqual(rows[0][1], "0x0")  # offsets from the first
        self.assertAlmostEqual(sum(float(r[4]) for r in rows), 1.0, delta=0.001)  # shares of the sample's own total
        self.assertTrue(all(float(r[4]) >= 0.05 for r in kept) and 0 < len(kept) < len(rows))
        depbar = next(r for r in rows if r[2] == "WARPGROUP.DEPBAR.LE gsb0, 0x0")
        self.assertEqual(depbar[6], "barrier")  # its top stall reason, "stall_" left out
        self.assertGreaterEqual(depbar[7], depbar[9])  # reasons largest first
        with self.assertRaisesRegex(ValueError, "not ncu's source page"):
            sass_samples.compact(["a,b\n", "1,2\n"])

    def test_a_step_of_several_kernels_needs_kernel(self):
        with self.assertRaisesRegex(self.rt.MarkerError, "launched 4 kernels"):
            self.rt.counter(["results/h100/profile/lesson03.csv", "1", "duration_us"])
        self.assertTrue(self.rt.counter(["results/h100/profile/lesson03.csv", "1", "duration_us", "kernel=3"]))

    def test_profile_table_rows(self):
        lines = self.rt.profile_table("results/h100/profile/lesson04.csv").splitlines()
        self.assertTrue(lines[0].startswith("| step | kernel | µs |"))
        self.assertTrue(any("n/a: a row of 4096" in line for line in lines))

    def test_times_previous(self):
        import md_table

        rows = roofline.klplot.read_rows(os.path.join(HERE, "sample", "lesson06.csv"))
        shape = "MxNxK=4096x4096x4096"
        table = md_table.table(rows, shape).splitlines()
        self.assertIn("× previous", table[0])
        cells = {line.split("|")[1].strip(): line.split("|")[7].strip() for line in table[2:]}
        at = {r["step"]: r["ms_median"] for r in roofline.klplot.latest(rows) if r["shape"] == shape}
        self.assertEqual(cells["1"], "–")
        self.assertEqual(cells["3"], f"{at['2'] / at['3']:.3g}")
        self.assertEqual(cells["lib"], "–")


class Limits(unittest.TestCase):
    def test_limits_tables(self):
        import readme_tables

        copy_only = readme_tables.limits_table("results/h100/lesson01.csv").splitlines()
        self.assertEqual(len(copy_only), 3)
        self.assertIn("| DRAM bandwidth, GB/s | 3350 |", copy_only[2])
        fp32 = readme_tables.limits_table("results/h100/lesson06.csv")
        self.assertIn("| FP32, TFLOP/s | 66.9 |", fp32)
        self.assertNotIn("tensor", fp32)
        tensor = readme_tables.limits_table("results/h100/lesson09.csv")
        self.assertIn("| f16/bf16 tensor cores, dense TFLOP/s | 989.4 |", tensor)
