"""A CSV with rows of two GPUs: the plots and README tables use one GPU's rows (the GPU of the file's
folder, else the last row's), say so on stderr, and never mix the two in one figure or table."""
import io
import os
import shutil
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import klplot  # noqa: E402
import make_figures  # noqa: E402
import readme_tables  # noqa: E402

H100, RTX = "NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 4090"
HEADER = "lesson,step,name,dtype,shape,ms_median,ms_min,ms_max,gbps,tflops,pct_of_limit,max_rel_err,gpu\n"


def rows_of(gpu, ms):
    """Lesson 01 at n = 2^26: step 1, step 4, CUB and the copy, step 4 taking `ms`."""
    return (f"01,1,one_thread,f32,n=67108864,1200,1190,1210,0.2237,,0.007,1e-08,{gpu}\n"
            f"01,4,block_atomic,f32,n=67108864,{ms},{ms},{ms},{268.435456 / ms:.0f},,90,2e-08,{gpu}\n"
            f"01,lib,cub,f32,n=67108864,0.093,0.092,0.095,2886,,96.2,1e-08,{gpu}\n"
            f"01,copy,device-to-device copy,u8,bytes=1073741824,0.358,0.358,0.358,3000,,100,,{gpu}\n")


class TwoGpus(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.root)

    def write(self, folder, text):
        os.makedirs(os.path.join(self.root, folder), exist_ok=True)
        path = os.path.join(self.root, folder, "lesson01.csv")
        with open(path, "w") as f:
            f.write(text)
        return path

    def read(self, path, **kw):
        err = io.StringIO()
        with redirect_stderr(err):
            rows = klplot.read_rows(path, **kw)
        return rows, err.getvalue()

    def test_one_gpu_reads_every_row_quietly(self):
        rows, err = self.read(self.write("results/h100", HEADER + rows_of(H100, 0.1)))
        self.assertEqual(len(rows), 4)
        self.assertEqual(err, "")

    def test_folder_of_a_gpu_keeps_that_gpus_rows(self):
        # results/h100/ with an RTX run appended last: still the H100's rows, and a note says so.
        rows, err = self.read(self.write("results/h100", HEADER + rows_of(H100, 0.1) + rows_of(RTX, 0.3)))
        self.assertEqual({r["gpu"] for r in rows}, {H100})
        self.assertEqual(len(rows), 4)
        self.assertIn(f"using the 4 rows of {H100}", err)
        self.assertIn(f"leaving out 4 rows of {RTX}", err)

    def test_other_folder_keeps_the_last_rows_gpu(self):
        rows, err = self.read(self.write("mine", HEADER + rows_of(H100, 0.1) + rows_of(RTX, 0.3)))
        self.assertEqual({r["gpu"] for r in rows}, {RTX})
        self.assertIn(f"leaving out 4 rows of {H100}", err)

    def test_explicit_gpu(self):
        rows, _ = self.read(self.write("results/rtx_4090", HEADER + rows_of(H100, 0.1) + rows_of(RTX, 0.3)), gpu=H100)
        self.assertEqual({r["gpu"] for r in rows}, {H100})

    def test_figures_draw_only_the_chosen_gpus_rows(self):
        folder = os.path.dirname(self.write("results/h100", HEADER + rows_of(H100, 0.1) + rows_of(RTX, 0.3)))
        err = io.StringIO()
        with mock.patch.object(klplot, "bar_chart", wraps=klplot.bar_chart) as bar, redirect_stdout(io.StringIO()), \
                redirect_stderr(err):
            make_figures.main(folder)
        drawn = bar.call_args.args[0]
        self.assertEqual({r["gpu"] for r in drawn}, {H100})
        self.assertEqual([r["ms_median"] for r in drawn if r["step"] == "4"], [0.1])
        self.assertIn(f"leaving out 4 rows of {RTX}", err.getvalue())
        self.assertTrue(os.path.exists(os.path.join(folder, "lesson01.png")))

    def readme(self, csv_rel):
        text = f"<!-- table {csv_rel} n=67108864 -->\n<!-- /table -->\n"
        path = os.path.join(self.root, "README.md")
        with open(path, "w") as f:
            f.write(text)
        with mock.patch.object(readme_tables, "ROOT", self.root), redirect_stdout(io.StringIO()), \
                redirect_stderr(io.StringIO()):
            readme_tables.main([path])
        with open(path) as f:
            return f.read()

    def test_readme_table_selects_the_folders_gpu(self):
        self.write("results/h100", HEADER + rows_of(H100, 0.1) + rows_of(RTX, 0.3))
        out = self.readme("results/h100/lesson01.csv")
        self.assertIn("| 4 | block_atomic | 0.1 |", out)
        self.assertNotIn("0.3", out)

    def test_readme_table_refuses_another_gpus_rows_under_results_h100(self):
        self.write("results/h100", HEADER + rows_of(RTX, 0.3))  # an RTX run written over the H100's
        with self.assertRaises(SystemExit) as e:
            self.readme("results/h100/lesson01.csv")
        self.assertIn(f"holds rows of {RTX}, whose folder is results/rtx_4090/", str(e.exception.code))


if __name__ == "__main__":
    unittest.main()
