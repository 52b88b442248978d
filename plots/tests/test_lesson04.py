"""Lesson 04's figures from the sample CSV: the bar chart at the default shape, the sweep (one panel
per dtype) and the crossover; K is read from 'MxK=MxK' shapes."""
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import klplot  # noqa: E402
import lesson04  # noqa: E402
import summary  # noqa: E402


class Lesson04Figures(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.rows = klplot.read_rows(os.path.join(HERE, "sample", "lesson04.csv"))

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_shapes(self):
        self.assertEqual(lesson04.cols(lesson04.DEFAULT_SHAPE), 4096)
        self.assertEqual(klplot.shape_value(lesson04.DEFAULT_SHAPE), 16384)
        self.assertTrue(any(r["shape"] == lesson04.DEFAULT_SHAPE for r in self.rows))

    def test_three_pngs(self):
        paths = lesson04.draw(self.rows, self.dir)
        names = sorted(os.path.basename(p) for p in paths)
        self.assertEqual(names, ["lesson04.png", "lesson04_crossover.png", "lesson04_sweep.png"])
        for p in paths:
            with open(p, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            self.assertGreater(os.path.getsize(p), 10000)

    def test_winners_follow_the_sample(self):
        win = dict(lesson04.winners(self.rows, "f32"))
        self.assertEqual(win[32], "2")
        self.assertEqual(win[131072], "6")

    def test_summary_line(self):
        line = summary.summarize("lesson04", self.rows, lesson04.DEFAULT_SHAPE)
        self.assertIn("lesson04 [MxK=16384x4096]: best step", line)


if __name__ == "__main__":
    unittest.main()
