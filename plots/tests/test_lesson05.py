"""Lesson 05's figures from the sample CSV: ms per step at the default shape (f32 and f16 panels,
PyTorch and the read-once floor) and the speed-up vs K; R, V and K are read from 'RxVxK=...' shapes."""
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import klplot  # noqa: E402
import lesson05  # noqa: E402
import summary  # noqa: E402


class Lesson05Figures(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.rows = klplot.read_rows(os.path.join(HERE, "sample", "lesson05.csv"))

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_shapes(self):
        self.assertEqual(lesson05.dims(lesson05.DEFAULT_SHAPE), (4096, 50257, 10))
        self.assertEqual(klplot.shape_value(lesson05.DEFAULT_SHAPE), 4096)
        self.assertTrue(any(r["shape"] == lesson05.DEFAULT_SHAPE for r in self.rows))
        # the floor: 4096 x 50257 floats read and 4096 x 10 pairs written at 1000 GB/s
        self.assertAlmostEqual(lesson05.floor_ms(lesson05.DEFAULT_SHAPE, "f32", 1000.0),
                               (4096 * 50257 * 4 + 4096 * 10 * 8) / 1e12 * 1e3)

    def test_three_pngs(self):
        paths = lesson05.draw(self.rows, self.dir)
        names = sorted(os.path.basename(p) for p in paths)
        self.assertEqual(names, ["lesson05.png", "lesson05_small.png", "lesson05_speedup.png"])
        for p in paths:
            with open(p, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            self.assertGreater(os.path.getsize(p), 10000)

    def test_speedups_follow_the_sample(self):
        over_pytorch = dict(lesson05.speedups(self.rows, "f32", "pytorch"))
        self.assertEqual(sorted(over_pytorch), [1, 2, 4, 8, 10, 16, 32, 50, 64])
        self.assertGreater(over_pytorch[10], 5)
        self.assertGreater(dict(lesson05.speedups(self.rows, "f16", "1"))[1], 1)

    def test_without_pytorch_or_sweep(self):
        only_default = [r for r in self.rows if r["shape"] == lesson05.DEFAULT_SHAPE and not r["step"].startswith("py")]
        paths = lesson05.draw(only_default + [r for r in self.rows if r["step"] == "copy"], self.dir)
        self.assertEqual([os.path.basename(p) for p in paths], ["lesson05.png"])

    def test_decode_and_moe_figure(self):
        def row(step, name, dtype, shape, ms):
            return {"lesson": "05", "step": step, "name": name, "dtype": dtype, "shape": shape, "ms_median": ms,
                    "gpu": "GPU X"}
        rows = [row("9", "dispatch", "f32", "RxVxK=8x128256x50", 0.02), row("pytorch", "torch.topk(softmax)", "f32",
                "RxVxK=8x128256x50", 0.1), row("9", "dispatch", "f16", "RxVxK=1x128256x50", 0.02),
                row("9", "dispatch", "f32", "RxVxK=65536x8x2", 0.006), row("8", "radix_select", "f32", "RxVxK=8x128256x50", 1.0),
                row("9", "dispatch", "f32", "RxVxK=4096x128256x50", 0.7)]
        cells = lesson05.small_cells(rows)
        self.assertEqual(cells[("f32", "RxVxK=8x128256x50")], {"dispatch": 20.0, "pytorch": 100.0})
        self.assertEqual(cells[("f32", "RxVxK=4096x128256x50")], {"dispatch": 700.0})  # the rows sweep's last
        self.assertEqual(cells[("f32", "RxVxK=65536x8x2")], {"dispatch": 6.0})
        path = lesson05.small_figure(rows, os.path.join(self.dir, "small.png"))
        self.assertGreater(os.path.getsize(path), 10000)
        with_copy = rows + [{"lesson": "05", "step": "copy", "name": "copy", "dtype": "u8", "shape": "bytes=1",
                             "ms_median": 1.0, "gbps": 2000.0, "gpu": "GPU X"}]
        self.assertGreater(os.path.getsize(lesson05.small_figure(with_copy, os.path.join(self.dir, "goals.png"))), 10000)
        # the goal: 6 µs, or twice the copy time where that is longer (8 x 128256 floats at 2000 GB/s: 2.05 µs)
        self.assertEqual(lesson05.goal_us("RxVxK=8x128256x50", "f32", 2000.0), 6.0)
        self.assertAlmostEqual(lesson05.goal_us("RxVxK=256x128256x50", "f32", 2000.0),
                               2 * (256 * 128256 * 4 + 256 * 50 * 8) / 2000e9 * 1e6)
        self.assertIsNone(lesson05.small_figure([row("9", "dispatch", "f32", lesson05.DEFAULT_SHAPE, 0.3)],
                                                os.path.join(self.dir, "none.png")))  # neither rows sweep nor MoE

    def test_summary_line(self):
        line = summary.summarize("lesson05", self.rows, lesson05.DEFAULT_SHAPE)
        self.assertIn("lesson05 [RxVxK=4096x50257x10]: best step", line)


if __name__ == "__main__":
    unittest.main()
