"""readme_tables.py fills a README's marked table from a CSV and leaves the rest of the text alone."""
import os
import sys
import tempfile
import unittest

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


if __name__ == "__main__":
    unittest.main()
