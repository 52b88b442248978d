"""Lesson 05 step 7's bound, modelled on the CPU (scripts/topk_bound_model.py): the group widths, the bound
never above a row's K-th best, and the candidate counts the README quotes as about K + 1."""
import os
import sys
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts"))

import topk_bound_model as m  # noqa: E402


class BoundModel(unittest.TestCase):
    def test_group_widths_follow_lanes_per_row(self):
        for vocab, g in [(1, 1), (8, 1), (9, 2), (64, 8), (65, 16), (128, 16), (129, 32), (256, 32)]:
            self.assertEqual(m.group_width(vocab), g, vocab)

    def test_bound_is_never_above_the_kth_best(self):
        rng = np.random.default_rng(1)
        for g, k in [(8, 6), (16, 8), (32, 8), (32, 3)]:
            x = rng.integers(-3, 4, (500, 8 * g)).astype(np.float32)  # many ties
            kth = -np.sort(-x, axis=1)[:, k - 1]
            self.assertTrue(np.all(m.bounds(x, g, k) <= kth), (g, k))

    def test_more_winners_than_lanes_have_no_bound(self):
        x = np.zeros((3, 64), np.float32)
        self.assertTrue(np.all(np.isneginf(m.bounds(x, 8, 9))))
        self.assertEqual(m.model(64, 9, rows=100)[3], 1.0)  # every row falls back

    def test_normal_rows_leave_a_few_more_than_k(self):
        for vocab, k in [(128, 8), (256, 8), (200, 4)]:
            g, mean, p99, back = m.model(vocab, k, rows=2000)
            self.assertGreaterEqual(mean, k)
            self.assertLess(mean, k + 3)
            self.assertLessEqual(p99, 32)
            self.assertEqual(back, 0.0)


if __name__ == "__main__":
    unittest.main()
