"""Lesson 02's figure script draws both figures from the sample CSV, and the summary picks its best step."""
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import klplot  # noqa: E402
import lesson02  # noqa: E402
import summary  # noqa: E402


class Lesson02(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.rows = klplot.read_rows(os.path.join(HERE, "sample", "lesson02.csv"))

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_default_shape_is_the_lessons_default_n(self):
        self.assertEqual(lesson02.DEFAULT_SHAPE, "n=67108864")  # 2^26, as in common/sum_problem.cuh

    def test_draws_bar_and_sweep(self):
        paths = lesson02.draw(self.rows, self.dir)
        self.assertEqual([os.path.basename(p) for p in paths], ["lesson02.png", "lesson02_sweep.png"])
        for path in paths:
            with open(path, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_no_sweep_without_three_sizes(self):
        rows = [r for r in self.rows if r["shape"] == lesson02.DEFAULT_SHAPE or r["step"] == "copy"]
        paths = lesson02.draw(rows, self.dir)
        self.assertEqual([os.path.basename(p) for p in paths], ["lesson02.png"])

    def test_summary_names_best_step(self):
        line = summary.summarize("lesson02", self.rows, lesson02.DEFAULT_SHAPE)
        self.assertIn("best step 5 float4_unrolled", line)
        self.assertIn("96.0% of limit", line)
        self.assertIn("0.99x library (cub)", line)
        self.assertNotIn("FAILED", line)


if __name__ == "__main__":
    unittest.main()
