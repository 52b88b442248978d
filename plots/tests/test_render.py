"""The figure and summary scripts turn the sample CSV into PNG files and one line per lesson."""
import io
import os
import shutil
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import make_figures  # noqa: E402
import summary  # noqa: E402


class RenderSample(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        for name in os.listdir(os.path.join(HERE, "sample")):
            shutil.copy(os.path.join(HERE, "sample", name), self.dir)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_figures_are_png(self):
        with redirect_stdout(io.StringIO()):
            make_figures.main(self.dir)
        for png in ("lesson01.png", "lesson01_sweep.png"):
            path = os.path.join(self.dir, png)
            self.assertTrue(os.path.exists(path), png)
            with open(path, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            self.assertGreater(os.path.getsize(path), 10000)

    def test_summary_names_best_step_and_ratios(self):
        out = io.StringIO()
        with redirect_stdout(out):
            summary.main(self.dir)
        line = out.getvalue().strip()
        self.assertIn("best step 4 block_atomic", line)
        self.assertIn("94.2% of limit", line)
        self.assertIn("12632x step 1", line)
        self.assertIn("0.98x library (cub)", line)
        self.assertIn("FAILED: atomic_per_element", line)


if __name__ == "__main__":
    unittest.main()
