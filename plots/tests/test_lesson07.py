"""Lesson 07's figures from the sample CSV: ms per step for the tile problem (with PyTorch's SDPA
backends and the read-once floor) and TFLOP/s vs S for the flash steps; shapes 'B=...' and
'BxHxSxD=...[;causal]'."""
import math
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import klplot  # noqa: E402
import lesson07  # noqa: E402
import summary  # noqa: E402


class Lesson07Figures(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.rows = klplot.read_rows(os.path.join(HERE, "sample", "lesson07.csv"))

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_shapes(self):
        self.assertEqual(lesson07.flash_dims("BxHxSxD=16x16x4096x64;causal"), (16, 16, 4096, 64, True))
        self.assertEqual(lesson07.flash_dims("BxHxSxD=8x16x4096x128"), (8, 16, 4096, 128, False))
        self.assertIsNone(lesson07.flash_dims(lesson07.DEFAULT_SHAPE))
        self.assertEqual(klplot.shape_value(lesson07.DEFAULT_SHAPE), 65536)
        self.assertAlmostEqual(lesson07.floor_ms("B=4096", 1000.0), 4096 * 2048 / 1e12 * 1e3)
        self.assertTrue(any(r["shape"] == lesson07.DEFAULT_SHAPE for r in self.rows))

    def test_peak_from_a_flash_row(self):
        peak = lesson07.peak_tflops(self.rows)
        self.assertGreater(peak, 500)
        self.assertLess(peak, 1200)

    def test_two_pngs(self):
        paths = lesson07.draw(self.rows, self.dir)
        self.assertEqual(sorted(os.path.basename(p) for p in paths), ["lesson07.png", "lesson07_flash.png"])
        for p in paths:
            with open(p, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            self.assertGreater(os.path.getsize(p), 10000)

    def test_series_follow_the_sample(self):
        flash = lesson07.series(self.rows, "pytorch_flash", 64, False)
        self.assertGreaterEqual(len(flash), 2)
        self.assertEqual(flash, sorted(flash))
        self.assertTrue(all(t > 0 and not math.isnan(t) for _, t in flash))
        self.assertEqual([s for s, _ in lesson07.series(self.rows, "6", 64, False)], [4096])

    def test_tile_only(self):
        only_tiles = [r for r in self.rows if not r["shape"].startswith("BxHxSxD")]
        paths = lesson07.draw(only_tiles, self.dir)
        self.assertEqual([os.path.basename(p) for p in paths], ["lesson07.png"])

    def test_summary_line(self):
        line = summary.summarize("lesson07", self.rows, lesson07.DEFAULT_SHAPE)
        self.assertIn("lesson07 [B=65536]: best step", line)


if __name__ == "__main__":
    unittest.main()
