"""scripts/frameworks.py on the CPU: NumPy really runs; PyTorch and MLX are absent, or replaced by fakes
that compute with NumPy, so that every path that writes a row is exercised without a GPU."""
import csv
import io
import os
import sys
import tempfile
import types
import unittest
from contextlib import redirect_stdout
from unittest import mock

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import frameworks  # noqa: E402
import klplot  # noqa: E402
import summary  # noqa: E402

ABSENT = {"torch": None, "mlx": None, "mlx.core": None}  # None in sys.modules: import raises ImportError


def fake_mlx():
    """A stand-in for mlx.core with the calls frameworks.py makes, computing with NumPy."""
    mx = types.ModuleType("mlx.core")
    mx.gpu = "gpu"
    mx.__version__ = "0.0-fake"
    mx.set_default_device = lambda device: None
    mx.array = lambda a: np.array(a)
    mx.eval = lambda *arrays: None
    mx.sum = lambda x: np.sum(x)
    mx.softmax = lambda x, axis=-1: (lambda e: (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype))(
        np.exp(x.astype(np.float32) - x.astype(np.float32).max(axis=axis, keepdims=True)))
    pkg = types.ModuleType("mlx")
    pkg.core = mx
    return {"mlx": pkg, "mlx.core": mx}


def fake_torch_without_cuda():
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_available=lambda: False)
    torch.__version__ = "0.0-fake"
    return {"torch": torch}


class Frameworks(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        with open(os.path.join(self.dir, "lesson03.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(frameworks.HEADER)
            w.writerow(["03", "copy", "device-to-device copy", "u8", "bytes=1024", "1", "1", "1", "2000", "", "100",
                        "0", "test GPU"])
        with open(os.path.join(self.dir, "lesson04.csv"), "w", newline="") as f:
            csv.writer(f).writerow(frameworks.HEADER)

    def run_main(self, modules):
        with mock.patch.dict(sys.modules, modules), redirect_stdout(io.StringIO()) as out:
            code = frameworks.main([self.dir, "--n", "100003", "--rows", "37", "--cols", "1000", "--reps", "3",
                                    "--gpu", "test GPU"])
        self.assertEqual(code, 0)
        return out.getvalue()

    def rows(self, lesson):
        with open(os.path.join(self.dir, f"lesson{lesson}.csv"), newline="") as f:
            return [r for r in csv.DictReader(f) if r["step"] != "copy"]

    def test_numpy_runs_and_the_absent_frameworks_say_na(self):
        out = self.run_main(ABSENT)
        self.assertIn("pytorch_eager: n/a: torch not installed", out)
        sums = {r["step"]: r for r in self.rows("03")}
        self.assertEqual(set(sums), {"numpy", "pytorch_eager", "mlx"})
        numpy_row = sums["numpy"]
        self.assertEqual((numpy_row["lesson"], numpy_row["dtype"], numpy_row["shape"], numpy_row["gpu"]),
                         ("03", "f32", "n=100003", "test GPU"))
        self.assertTrue(numpy_row["name"].startswith("numpy.sum (CPU: "))
        self.assertGreater(float(numpy_row["ms_median"]), 0)
        self.assertLessEqual(float(numpy_row["ms_min"]), float(numpy_row["ms_median"]))
        self.assertLess(float(numpy_row["max_rel_err"]), 1e-6)
        self.assertAlmostEqual(float(numpy_row["pct_of_limit"]), 100 * float(numpy_row["gbps"]) / 2000, places=3)
        self.assertEqual((sums["mlx"]["name"], sums["mlx"]["ms_median"]), ("n/a: mlx not installed", ""))
        self.assertEqual(sums["pytorch_eager"]["name"], "n/a: torch not installed")
        softmax = self.rows("04")
        self.assertEqual(sorted((r["step"], r["dtype"]) for r in softmax),
                         sorted((s, d) for s in ("numpy", "pytorch_eager", "mlx") for d in ("f32", "f16")))
        for r in softmax:
            self.assertEqual(r["shape"], "MxK=37x1000")
            if r["step"] == "numpy":
                self.assertLess(float(r["max_rel_err"]), 1e-5 if r["dtype"] == "f32" else 1e-2)
                self.assertAlmostEqual(float(r["gbps"]), 2 * 37 * 1000 * (4 if r["dtype"] == "f32" else 2)
                                       / (float(r["ms_median"]) * 1e6), places=3)
                self.assertEqual(r["pct_of_limit"], "")  # lesson04.csv had no copy row: no limit

    def test_torch_without_cuda_and_mlx_through_its_api(self):
        out = self.run_main({**fake_torch_without_cuda(), **fake_mlx()})
        self.assertIn("n/a: torch sees no CUDA device", out)
        mlx = [r for r in self.rows("03") + self.rows("04") if r["step"] == "mlx"]
        self.assertEqual(len(mlx), 3)
        for r in mlx:
            self.assertIn("(MLX 0.0-fake)", r["name"])
            self.assertGreater(float(r["ms_median"]), 0)
            self.assertLess(float(r["max_rel_err"]), 1e-2)

    def test_mlx_without_a_gpu(self):
        modules = fake_mlx()

        def no_gpu(device):
            raise RuntimeError("no CUDA backend")
        modules["mlx.core"].set_default_device = no_gpu
        with mock.patch.dict(sys.modules, {**ABSENT, **modules}):
            steps = dict(frameworks.frameworks())
        self.assertEqual(steps["mlx"], "n/a: mlx has no GPU here (RuntimeError)")

    def test_only_the_lessons_whose_csv_exists(self):
        os.unlink(os.path.join(self.dir, "lesson04.csv"))
        self.assertIn("no lesson04.csv", self.run_main(ABSENT))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "lesson04.csv")))

    def test_appends_and_rejects_bad_sizes(self):
        self.run_main(ABSENT)
        self.run_main(ABSENT)
        self.assertEqual(len(self.rows("03")), 6)
        with redirect_stdout(io.StringIO()), mock.patch("sys.stderr", io.StringIO()):
            with self.assertRaises(SystemExit):
                frameworks.main([self.dir, "--n", "0"])

    def test_slow_calls_get_three_repetitions(self):
        calls = []
        with mock.patch.object(frameworks, "SLOW_MS", 0.0):
            frameworks.wall_ms(lambda: calls.append(1), lambda y: y, reps=30, warmup=1)
        self.assertEqual(len(calls), 1 + 3)

    def test_plots_and_the_ladder_skip_na_rows(self):
        self.run_main(ABSENT)
        path = os.path.join(self.dir, "lesson03.csv")
        rows = klplot.read_rows(path)
        self.assertEqual(sorted(r["step"] for r in rows), ["copy", "numpy"])
        s = summary.standing(rows + [dict(rows[-1], step="1", name="one")], "n=100003", "f32")
        self.assertEqual(s.failed, [])


if __name__ == "__main__":
    unittest.main()
