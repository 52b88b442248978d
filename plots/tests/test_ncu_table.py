"""plots/ncu_table.py on the committed lesson 08 profile (results/h100/lesson08/ncu_steps.csv): one row per
step, in file order, the kernel time in ms and the top three stall reasons with shares that add up to at
most 100 %."""
import os
import re
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import ncu_table  # noqa: E402

SRC = os.path.join(os.path.dirname(os.path.dirname(HERE)), "results", "h100", "lesson08", "ncu_steps.csv")


class NcuTable(unittest.TestCase):
    def setUp(self):
        with open(SRC) as f:
            self.steps = ncu_table.blocks(f.read())

    def test_every_step_in_order(self):
        self.assertEqual(list(self.steps)[:3], ["mma_sync", "wgmma", "tma_ring"])
        self.assertEqual(list(self.steps)[-1], "tma_store")

    def test_rows(self):
        rows = ncu_table.table(self.steps).splitlines()[2:]
        self.assertEqual(len(rows), len(self.steps))
        for row in rows:
            cells = [c.strip() for c in row.strip("|").split("|")]
            self.assertGreater(float(cells[1]), 0)  # ms
            shares = [int(s) for s in re.findall(r"(\d+)%", cells[-1])]
            self.assertEqual(len(shares), 3)
            self.assertLessEqual(sum(shares), 101)  # rounding

    def test_committed_markdown_is_what_the_counters_give(self):
        with open(os.path.join(os.path.dirname(SRC), "profile.md")) as f:
            self.assertEqual(f.read(), ncu_table.table(self.steps) + "\n")

    def test_no_counters_is_an_error(self):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write("### step\nnot a csv line\n")
        with self.assertRaises(SystemExit):
            ncu_table.main(f.name, f.name + ".md")
        os.unlink(f.name)


if __name__ == "__main__":
    unittest.main()
