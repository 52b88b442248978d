"""readme_tables.py fills a README's marked table from a CSV and leaves the rest of the text alone."""
import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import readme_tables  # noqa: E402


class FillTable(unittest.TestCase):
    def test_table_between_markers(self):
        text = ("# Lesson\n\nbefore\n<!-- table plots/tests/sample/lesson01.csv n=67108864 -->\nstale\n"
                "<!-- /table -->\nafter\n")
        with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
            f.write(text)
        readme_tables.main([f.name])
        with open(f.name) as g:
            out = g.read()
        os.unlink(f.name)
        self.assertNotIn("stale", out)
        self.assertIn("| 4 | block_atomic | 0.095 |", out)
        self.assertIn("| 2 | atomic_per_element | FAILED |", out)
        self.assertTrue(out.startswith("# Lesson\n\nbefore\n") and out.endswith("<!-- /table -->\nafter\n"))

    def test_across_shapes(self):
        import md_table
        row = lambda step, shape, ms: {"step": step, "name": "s" + step, "shape": shape, "ms_median": ms,  # noqa: E731
                                       "ms_min": ms, "ms_max": ms, "gbps": 1.0, "tflops": float("nan"),
                                       "pct_of_limit": 1.0, "max_rel_err": 0.0, "dtype": "f32"}
        rows = [row("4", "a", 1.0), row("4", "b", 1.5), row("7", "a", 2.0), row("7", "b", 1.0)]
        out = md_table.across(rows, ["a", "b"])
        self.assertIn("| 4 | s4 | 1 ms | 1.5 ms (1.50 ×) |", out)
        self.assertIn("| 7 | s7 | 2 ms | 1 ms (0.50 ×) |", out)


class CheckMode(unittest.TestCase):
    """--check changes nothing, names a stale table and fails; a freshly generated README passes."""
    STALE = ("# Lesson\n\n<!-- table plots/tests/sample/lesson01.csv n=67108864 -->\nstale\n<!-- /table -->\n"
             "text\n<!-- table plots/tests/sample/lesson02.csv n=67108864 -->\n<!-- /table -->\n")

    def setUp(self):
        with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
            f.write(self.STALE)
        self.path = f.name

    def tearDown(self):
        os.unlink(self.path)

    def check(self):
        out = io.StringIO()
        with redirect_stdout(out):
            code = readme_tables.main([self.path], check=True)
        return code, out.getvalue()

    def test_stale_table_fails_and_is_left_alone(self):
        code, out = self.check()
        self.assertEqual(code, 1)
        self.assertIn(f"{self.path}:3: <!-- table plots/tests/sample/lesson01.csv n=67108864 -->", out)
        self.assertIn(f"{self.path}:7: <!-- table plots/tests/sample/lesson02.csv n=67108864 -->", out)
        self.assertIn("-stale", out)
        with open(self.path) as f:
            self.assertEqual(f.read(), self.STALE)

    def test_fresh_table_passes(self):
        with redirect_stdout(io.StringIO()):
            readme_tables.main([self.path])
        code, out = self.check()
        self.assertEqual((code, out), (0, ""))

    def test_one_changed_number_fails(self):
        with redirect_stdout(io.StringIO()):
            readme_tables.main([self.path])
        with open(self.path) as f:
            text = f.read()
        with open(self.path, "w") as f:
            f.write(text.replace("| 4 | block_atomic | 0.095 |", "| 4 | block_atomic | 0.094 |"))
        code, out = self.check()
        self.assertEqual(code, 1)
        self.assertIn("lesson01.csv", out)
        self.assertNotIn("lesson02.csv", out)


if __name__ == "__main__":
    unittest.main()
