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


if __name__ == "__main__":
    unittest.main()
