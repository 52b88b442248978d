"""Lesson 10's figure script draws both figures from the sample CSV (synthetic numbers), and the
summary picks its best step at the default shape."""
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import klplot  # noqa: E402
import lesson10  # noqa: E402
import summary  # noqa: E402


class Lesson10(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.rows = klplot.read_rows(os.path.join(HERE, "sample", "lesson10.csv"))

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_default_shape_is_the_lessons_default(self):
        self.assertEqual(lesson10.DEFAULT_SHAPE, "n=67108864;gpus=2")  # 2^26 floats, lessons/10_across_gpus/host.cuh
        self.assertEqual(klplot.shape_value(lesson10.DEFAULT_SHAPE), 67108864)

    def test_draws_bar_and_sweep(self):
        paths = lesson10.draw(self.rows, self.dir)
        self.assertEqual([os.path.basename(p) for p in paths], ["lesson10.png", "lesson10_sweep.png"])
        for path in paths:
            with open(path, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_summary_names_best_step(self):
        line = summary.summarize("lesson10", self.rows, lesson10.DEFAULT_SHAPE)
        self.assertIn("ring", line)


if __name__ == "__main__":
    unittest.main()
