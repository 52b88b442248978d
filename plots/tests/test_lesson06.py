"""Lesson 06's figures from the sample CSV: TFLOP/s per step with the cuBLAS and peak lines, and the
sweep (squares, then step 6 against cuBLAS at the awkward shapes); a FAILED step and tune rows are
handled."""
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import klplot  # noqa: E402
import lesson06  # noqa: E402
import summary  # noqa: E402


class Lesson06Figures(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.rows = klplot.read_rows(os.path.join(HERE, "sample", "lesson06.csv"))

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_shapes_and_peak(self):
        self.assertEqual(lesson06.dims(lesson06.DEFAULT_SHAPE), (4096, 4096, 4096))
        self.assertTrue(lesson06.is_square("MxNxK=256x256x256"))
        self.assertFalse(lesson06.is_square("MxNxK=4097x4097x4097"))
        self.assertAlmostEqual(lesson06.peak_tflops(self.rows), 67.0, places=3)

    def test_two_pngs(self):
        paths = lesson06.draw(self.rows, self.dir)
        self.assertEqual([os.path.basename(p) for p in paths], ["lesson06.png", "lesson06_sweep.png"])
        for p in paths:
            with open(p, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            self.assertGreater(os.path.getsize(p), 10000)

    def test_sweep_lines_and_awkward_shapes(self):
        lines = lesson06.sweep_lines(self.rows)
        self.assertEqual([size for size, _ in lines[("6", "warp_tiled")]], [256, 512, 1024, 2048, 4096, 8192])
        self.assertNotIn(("2", "smem_tiles"), lines)  # the early steps stay in the bar chart
        odd = lesson06.awkward(self.rows)
        self.assertEqual([o[0] for o in odd], ["MxNxK=1000x3000x777", "MxNxK=4097x4097x4097", "MxNxK=8192x64x8192"])
        for _, ours, lib in odd:
            self.assertLess(ours, lib)

    def test_without_sweep(self):
        only = [r for r in self.rows if r["shape"] == lesson06.DEFAULT_SHAPE]
        paths = lesson06.draw(only, self.dir)
        self.assertEqual([os.path.basename(p) for p in paths], ["lesson06.png"])

    def test_summary_line(self):
        line = summary.summarize("lesson06", self.rows, lesson06.DEFAULT_SHAPE)
        self.assertIn("lesson06 [MxNxK=4096x4096x4096]: best step 6 warp_tiled", line)
        self.assertIn("x library (cublas)", line)
        self.assertIn("x PyTorch (torch.mm)", line)


if __name__ == "__main__":
    unittest.main()
