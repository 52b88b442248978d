"""Lesson 03's figures: both PNGs from the sample CSV, the sweep limited to the later steps."""
import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import klplot  # noqa: E402
import lesson03  # noqa: E402
import summary  # noqa: E402

SAMPLE = os.path.join(HERE, "sample", "lesson03.csv")


class Lesson03Figures(unittest.TestCase):
    def test_draw_writes_bar_and_sweep(self):
        with tempfile.TemporaryDirectory() as out:
            paths = lesson03.draw(klplot.read_rows(SAMPLE), out)
            self.assertEqual([os.path.basename(p) for p in paths], ["lesson03.png", "lesson03_sweep.png"])
            for p in paths:
                with open(p, "rb") as f:
                    self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_sample_has_default_shape_sweep_and_copy(self):
        rows = klplot.read_rows(SAMPLE)
        self.assertTrue(any(r["shape"] == lesson03.DEFAULT_SHAPE for r in rows))
        self.assertGreaterEqual(len({r["shape"] for r in rows if r["step"] != "copy"}), 4)
        self.assertEqual(klplot.copy_gbps(rows), 3000)
        self.assertTrue(set(lesson03.SWEEP_STEPS) <= {r["step"] for r in rows})

    def test_summary_names_the_single_pass_step(self):
        out = io.StringIO()
        with redirect_stdout(out):
            print(summary.summarize("lesson03", klplot.read_rows(SAMPLE), lesson03.DEFAULT_SHAPE))
        self.assertIn("best step 9 single_pass", out.getvalue())
        self.assertIn("x library (cub)", out.getvalue())


if __name__ == "__main__":
    unittest.main()
