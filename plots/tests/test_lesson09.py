"""Lesson 09's figure from the sample CSV: TFLOP/s vs S, one panel per (D, causal), a line per step of
the CSV. The sample is a fixture, not a result: lesson 07's committed H100 rows of the kernels lesson 09
starts from (its step 6 as step 1, its library row, PyTorch's FLASH, CUDNN and EFFICIENT rows),
relabelled lesson 09."""
import copy
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import klplot  # noqa: E402
import lesson09  # noqa: E402
import summary  # noqa: E402


class Lesson08Figure(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.rows = klplot.read_rows(os.path.join(HERE, "sample", "lesson09.csv"))

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_one_png(self):
        paths = lesson09.draw(self.rows, self.dir)
        self.assertEqual([os.path.basename(p) for p in paths], ["lesson09.png"])
        with open(paths[0], "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertGreater(os.path.getsize(paths[0]), 10000)

    def test_lines_steps_then_library_then_pytorch(self):
        self.assertEqual([s for s, _ in lesson09.lines(self.rows)],
                         ["1", "lib", "pytorch_flash", "pytorch_cudnn", "pytorch_efficient"])
        self.assertEqual(lesson09.lines(self.rows)[0][1], "step 1: flash_mma")

    def test_a_new_step_gets_its_line(self):
        """A step added to the table shows up from its CSV rows alone (here step 1's rows copied as step 2
        and, to check the order, step 10)."""
        rows = list(self.rows)
        for step, name in (("10", "flash_ten"), ("2", "flash_wgmma")):
            for r in self.rows:
                if r["step"] == "1":
                    extra = copy.copy(r)
                    extra["step"], extra["name"] = step, name
                    rows.append(extra)
        labels = lesson09.lines(rows)
        self.assertEqual([s for s, _ in labels][:3], ["1", "2", "10"])
        self.assertIn(("2", "step 2: flash_wgmma"), labels)
        self.assertEqual(len(lesson09.draw(rows, self.dir)), 1)

    def test_panels_and_peak(self):
        for dim in (64, 128):
            for causal in (False, True):
                self.assertEqual([s for s, _ in lesson09.lesson07.series(self.rows, "1", dim, causal)],
                                 [128 << i for i in range(8)])
        self.assertGreater(lesson09.lesson07.peak_tflops(self.rows), 500)
        self.assertTrue(any(r["shape"] == lesson09.DEFAULT_SHAPE for r in self.rows))

    def test_no_flash_rows_no_figure(self):
        only_copy = [r for r in self.rows if r["step"] == "copy"]
        self.assertEqual(lesson09.draw(only_copy, self.dir), [])

    def test_summary_line(self):
        line = summary.summarize("lesson09", self.rows, lesson09.DEFAULT_SHAPE)
        self.assertIn("lesson09 [BxHxSxD=16x16x4096x64]: best step 1 flash_mma", line)
        self.assertIn("(f16)", line)  # lesson09's default dtype, from its lesson()


if __name__ == "__main__":
    unittest.main()
