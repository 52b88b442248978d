"""Lesson 08's figures from the sample CSV: bars per step at 8192³, and the sweep (TFLOP/s against the size,
the best step against cuBLAS at the other shapes). The sample is a fixture: rows of the committed H100 run
at five shapes."""
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import klplot  # noqa: E402
import lesson08  # noqa: E402


class Lesson08Figures(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.rows = klplot.read_rows(os.path.join(HERE, "sample", "lesson08.csv"))

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_two_pngs(self):
        paths = lesson08.draw(self.rows, self.dir)
        self.assertEqual([os.path.basename(p) for p in paths], ["lesson08.png", "lesson08_sweep.png"])
        for p in paths:
            with open(p, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_shapes(self):
        self.assertEqual(lesson08.dims("MxNxK=8192x4096x14336;bias;gelu_tanh"), (8192, 4096, 14336))
        self.assertTrue(lesson08.is_square("MxNxK=6144x6144x6144"))
        self.assertFalse(lesson08.is_square("MxNxK=8192x8192x8192;bias;gelu_tanh"))
        self.assertFalse(lesson08.is_square("MxNxK=8192x4096x4096"))

    def test_square_lines_one_per_step_and_library(self):
        lines = lesson08.square_lines(self.rows)
        self.assertIn(("1", "mma_sync"), lines)
        self.assertIn(("lib", "cublas"), lines)
        self.assertEqual([s for s, _ in lines[("1", "mma_sync")]], [4096, 8192, 16384])

    def test_others_compare_the_epilogue_with_cublaslt_and_the_rest_with_cublas(self):
        pairs = {shape: lib["name"] for shape, _, lib in lesson08.others(self.rows)}
        self.assertEqual(pairs["MxNxK=8192x8192x8192;bias;gelu_tanh"], "cublaslt_epilogue")
        self.assertEqual(pairs["MxNxK=8192x4096x14336"], "cublas")
        for _, ours, _ in lesson08.others(self.rows):
            self.assertTrue(ours["step"].isdigit())


if __name__ == "__main__":
    unittest.main()
