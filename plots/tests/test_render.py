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

    def summary_lines(self):
        out = io.StringIO()
        with redirect_stdout(out):
            summary.main(self.dir)
        return {line.split()[0]: line for line in out.getvalue().splitlines()}

    def test_summary_names_best_step_and_ratios(self):
        line = self.summary_lines()["lesson01"]
        self.assertIn("best step 4 block_atomic", line)
        self.assertIn("94.2% of limit", line)
        self.assertIn("13000x step 1", line)  # 12632x, to two significant digits
        self.assertIn("0.98x library (cub)", line)
        self.assertIn("FAILED: atomic_per_element", line)

    def test_summary_compares_in_the_default_dtype(self):
        """Lesson 05's CSV holds f32 and f16 rows at the default shape; its default run is f32, so the best
        step, step 1 and PyTorch are all f32 rows (mixing would give 0.0487 ms and 73x PyTorch)."""
        line = self.summary_lines()["lesson05"]
        self.assertIn("[RxVxK=4096x50257x10]: best step 4 warp_select 0.0974 ms (f32)", line)
        self.assertIn("34x step 1", line)  # 3.29495 / 0.0974 (f32 / f32)
        self.assertIn("37x PyTorch", line)  # 3.56953 / 0.0974 (f32 / f32)
        self.assertNotIn("73x", line)
        self.assertIn("ms (f16)", self.summary_lines()["lesson07"])  # lesson 07 runs f16 by default

    def test_summary_ratios_have_two_significant_digits(self):
        line = self.summary_lines()["lesson02"]
        self.assertIn(", 1.3x step 1,", line)  # 0.122016 / 0.0932068 = 1.309, not "1x"
        for x, text in ((1.25, ("1.2", "1.3")), (1.309, ("1.3",)), (0.984, ("0.98",)), (7.34, ("7.3",)),
                        (9.96, ("10",)), (52.3, ("52",)), (12632, ("13000",))):
            self.assertIn(summary.ratio(x), text, x)

    def test_default_dtype_is_main_cu_first(self):
        self.assertEqual([summary.default_dtype(f"lesson0{n}") for n in range(1, 10)],
                         ["f32"] * 6 + ["f16", "bf16", "f16"])


if __name__ == "__main__":
    unittest.main()
