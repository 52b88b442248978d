"""Lesson 10's cost model: the ring's and the tree's formulas, the fit, and the figure without a CSV."""
import contextlib
import io
import math
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import allreduce_model as m  # noqa: E402

ALPHA, BETA = 3e-6, 400e9  # any link: 3 us a message, 400 GB/s


class Ring(unittest.TestCase):
    def test_two_gpus_is_one_reduce_scatter_and_one_all_gather_step(self):
        # Two steps, each alpha + (n/2) / beta: 2 alpha + n / beta.
        n = 64 << 20
        self.assertAlmostEqual(m.ring(n, 2, ALPHA, BETA), 2 * ALPHA + n / BETA, delta=1e-15)

    def test_bandwidth_term_is_2_g_minus_1_over_g_n_over_beta(self):
        n = 1 << 30
        for G in (2, 3, 8, 64, 1024):
            self.assertAlmostEqual(m.ring(n, G, 0.0, BETA), 2 * (G - 1) / G * n / BETA, delta=1e-12)

    def test_latency_grows_linearly_in_g(self):
        for G in (2, 8, 1024):
            self.assertAlmostEqual(m.ring(0, G, ALPHA, BETA), 2 * (G - 1) * ALPHA, delta=1e-15)

    def test_bus_bandwidth_of_a_large_ring_is_the_link(self):
        n = 1 << 30
        for G in (2, 8, 256):
            self.assertAlmostEqual(m.busbw(n, G, m.ring(n, G, 0.0, BETA)) / BETA, 1.0, places=9)

    def test_one_gpu_costs_nothing(self):
        self.assertEqual(m.ring(1 << 20, 1, ALPHA, BETA), 0.0)


class Tree(unittest.TestCase):
    def test_latency_grows_as_log_g(self):
        for k in range(1, 11):
            self.assertAlmostEqual(m.tree(0, 2 ** k, ALPHA, BETA), 2 * k * ALPHA, delta=1e-15)
        # Doubling G adds one hop up and one down: 2 alpha, whatever G.
        self.assertAlmostEqual(m.tree(0, 1024, ALPHA, BETA) - m.tree(0, 512, ALPHA, BETA), 2 * ALPHA, delta=1e-15)

    def test_bandwidth_term_is_2_n_over_beta(self):
        n = 1 << 30
        self.assertAlmostEqual(m.tree(n, 64, 0.0, BETA), 2 * n / BETA, delta=1e-12)

    def test_tree_beats_ring_for_small_messages_on_many_gpus(self):
        self.assertLess(m.tree(1 << 20, 1024, ALPHA, BETA), m.ring(1 << 20, 1024, ALPHA, BETA))
        self.assertLess(m.ring(1 << 30, 2, ALPHA, BETA), m.tree(1 << 30, 2, ALPHA, BETA))


class AcrossNodes(unittest.TestCase):
    def test_one_node_is_the_nvlink_ring(self):
        nv = m.LINKS["nvlink"]
        for f in (m.flat_ring, m.two_level):
            self.assertEqual(f(1 << 26, 8), m.ring(1 << 26, 8, nv.alpha, nv.beta))

    def test_two_level_is_the_sum_of_its_phases(self):
        n, g, N = 1 << 30, 8, 16
        nv, net = m.LINKS["nvlink"], m.LINKS["net"]
        inside = 2 * (g - 1) * (nv.alpha + n / (g * nv.beta))
        across = 2 * (N - 1) * (net.alpha + n / (g * N * net.beta))  # one NIC a GPU
        self.assertAlmostEqual(m.two_level(n, g * N), inside + across, delta=1e-12)

    def test_two_level_has_fewer_latency_terms_than_the_flat_ring(self):
        self.assertLess(m.two_level(0, 1024), m.flat_ring(0, 1024))

    def test_g_not_a_multiple_of_the_node_is_refused(self):
        with self.assertRaises(ValueError):
            m.two_level(1 << 20, 12)


class Fit(unittest.TestCase):
    def test_recovers_alpha_and_beta_from_synthetic_times(self):
        sizes = [4096 * 4 ** k for k in range(10)]
        alpha_eff, beta_eff = 7e-6, 370e9
        noise = [1 + 0.002 * (-1) ** k for k in range(10)]  # +-0.2 %, alternating
        seconds = [(alpha_eff + n / beta_eff) * e for n, e in zip(sizes, noise)]
        a, b = m.fit(sizes, seconds)
        self.assertAlmostEqual(a / alpha_eff, 1.0, delta=0.05)
        self.assertAlmostEqual(b / beta_eff, 1.0, delta=0.01)

    def test_exact_data_gives_exact_parameters(self):
        sizes = [1 << k for k in range(12, 31, 3)]
        a, b = m.fit(sizes, [2e-6 + n / 450e9 for n in sizes])
        self.assertAlmostEqual(a, 2e-6, delta=1e-12)
        self.assertAlmostEqual(b / 450e9, 1.0, places=6)

    def test_every_size_weighs_alike(self):
        # 2 % too slow at the largest size only: plain least squares would move alpha_eff by a quarter
        sizes = [4096 * 4 ** k for k in range(10)]
        seconds = [7e-6 + n / 370e9 for n in sizes]
        seconds[-1] *= 1.02
        a, b = m.fit(sizes, seconds)
        self.assertAlmostEqual(a / 7e-6, 1.0, delta=0.01)
        self.assertAlmostEqual(b / 370e9, 1.0, delta=0.01)

    def test_refuses_one_size_and_a_falling_time(self):
        with self.assertRaises(ValueError):
            m.fit([1024, 1024], [1e-5, 1e-5])
        with self.assertRaises(ValueError):
            m.fit([1024, 2048], [2e-5, 1e-5])

    def test_reads_a_step_from_a_lesson_csv(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        path = os.path.join(d, "lesson10.csv")
        header = "lesson,step,name,dtype,shape,ms_median,ms_min,ms_max,gbps,tflops,pct_of_limit,max_rel_err,gpu\n"
        lines = [header]
        for k in range(10, 28, 2):
            t = (2 * 4e-6 + 4 * (1 << k) / 380e9) * 1e3
            lines.append(f"10,lib,nccl,f32,n={1 << k},{t},{t},{t},,,,,GPU\n")
        lines.append("10,4,ring,f32,n=1024,,,,,,,,GPU\n")  # FAILED: no time
        with open(path, "w") as f:
            f.writelines(lines)
        links = m.links_from_csv(path, "nccl")
        self.assertAlmostEqual(links["nvlink"].alpha / 4e-6, 1.0, places=6)  # alpha_eff / 2
        self.assertAlmostEqual(links["nvlink"].beta / 380e9, 1.0, places=6)
        self.assertEqual(links["net"], m.LINKS["net"])  # the network stays an assumption
        self.assertIsNone(m.links_from_csv(path, "ring"))


class Figure(unittest.TestCase):
    def test_written_without_a_csv(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            m.main(["--csv", os.path.join(d, "absent.csv"), "--out", d])
        with open(os.path.join(d, "lesson10_model.png"), "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertIn("stated assumptions", err.getvalue())

    def test_every_curve_is_finite(self):
        for n in m.SIZES.values():
            for f in m.ALGORITHMS.values():
                for G in m.GPU_COUNTS:
                    if f is m.two_level and G < m.GPUS_PER_NODE:
                        continue
                    t = f(n, G)
                    self.assertTrue(math.isfinite(t) and t > 0, (f.__name__, n, G))


if __name__ == "__main__":
    unittest.main()
