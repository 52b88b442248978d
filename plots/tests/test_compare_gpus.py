"""compare_gpus.py prints a student's numbers beside the committed GPU's, step by step, for the rows
both runs measured."""
import io
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import compare_gpus  # noqa: E402

HEADER = "lesson,step,name,dtype,shape,ms_median,ms_min,ms_max,gbps,tflops,pct_of_limit,max_rel_err,gpu\n"
H100 = HEADER + """01,1,one_thread,f32,n=67108864,2400,2400,2400,0.11,,0.004,1e-08,NVIDIA H100 80GB HBM3
01,2,atomic_per_element,f32,n=67108864,118,118,118,2.3,,0.08,1e-08,NVIDIA H100 80GB HBM3
01,4,block_atomic,f32,n=67108864,0.12,0.12,0.12,2237,,76,2e-08,NVIDIA H100 80GB HBM3
01,lib,cub,f32,n=67108864,0.09,0.09,0.09,2983,,100,1e-08,NVIDIA H100 80GB HBM3
01,copy,device-to-device copy,u8,bytes=1073741824,0.36,0.36,0.36,2959,,100,,NVIDIA H100 80GB HBM3
01,4,block_atomic,f32,n=67108864,0.1,0.1,0.1,2684,,91,2e-08,NVIDIA H100 80GB HBM3
"""
RTX = HEADER + """01,1,one_thread,f32,n=67108864,1200,1200,1200,0.22,,0.02,1e-08,NVIDIA GeForce RTX 4090
01,2,atomic_per_element,f32,n=67108864,,,,,,,0.5,NVIDIA GeForce RTX 4090
01,4,block_atomic,f32,n=67108864,0.3,0.3,0.3,895,,89,2e-08,NVIDIA GeForce RTX 4090
01,lib,cub,f32,n=67108864,0.27,0.27,0.27,994,,99,1e-08,NVIDIA GeForce RTX 4090
01,copy,device-to-device copy,u8,bytes=1073741824,1.07,1.07,1.07,1003,,100,,NVIDIA GeForce RTX 4090
01,3,grid_stride,f32,n=1024,0.004,0.004,0.004,1,,0.1,1e-08,NVIDIA GeForce RTX 4090
"""


class CompareGpus(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp()
        self.mine, self.ref = os.path.join(self.root, "rtx_4090"), os.path.join(self.root, "h100")
        for folder, files in ((self.mine, {"lesson01.csv": RTX, "lesson02.csv": RTX.replace("01,", "02,")}),
                              (self.ref, {"lesson01.csv": H100})):
            os.makedirs(folder)
            for name, text in files.items():
                with open(os.path.join(folder, name), "w") as f:
                    f.write(text)

    def tearDown(self):
        shutil.rmtree(self.root)

    def run_main(self):
        out = io.StringIO()
        with redirect_stdout(out):
            compare_gpus.main(self.mine, self.ref)
        return out.getvalue()

    def line(self, out, step):
        return next(l for l in out.splitlines() if l.split()[:1] == [step])  # noqa: E741

    def test_gpus_and_copy_bandwidths(self):
        out = self.run_main()
        self.assertIn("01: yours NVIDIA GeForce RTX 4090 (copy 1003 GB/s), h100 NVIDIA H100 80GB HBM3 (copy 2959 GB/s)",
                      out)

    def test_step_by_step_ms_and_ratio(self):
        out = self.run_main()
        # the copies (1003 against 2959 GB/s) predict 2959 / 1003 = 2.95 times the time for a memory-bound step
        self.assertEqual(self.line(out, "1").split(),
                         ["1", "one_thread", "f32", "n=67108864", "1200", "2400", "0.5", "0.169", "neither"])
        # the H100 file holds step 4 twice (a run and a sweep): its best median counts
        self.assertEqual(self.line(out, "4").split(),
                         ["4", "block_atomic", "f32", "n=67108864", "0.3", "0.1", "3", "1.02", "bandwidth"])
        self.assertEqual(self.line(out, "lib").split()[-5:], ["0.27", "0.09", "3", "1.02", "bandwidth"])
        self.assertEqual(self.line(out, "2").split()[-4:], ["FAILED", "118", "–", "–"])

    def test_what_a_ratio_follows(self):
        self.assertEqual(compare_gpus.follows_what(0.72, 0.715), "bandwidth")
        self.assertEqual(compare_gpus.follows_what(1.02, 0.715), "same")
        self.assertEqual(compare_gpus.follows_what(0.85, 0.715), "partly")
        self.assertEqual(compare_gpus.follows_what(1.3, 0.715), "neither")

    def test_unmatched_rows_and_lessons_are_named(self):
        out = self.run_main()
        self.assertNotIn("grid_stride", out)
        self.assertIn("(1 rows of yours have no h100 row to compare with)", out)
        self.assertIn("lesson02: ", out)
        self.assertIn("has no lesson02.csv", out)

    def test_command_line(self):
        script = os.path.join(os.path.dirname(HERE), "compare_gpus.py")
        ok = subprocess.run([sys.executable, script, self.mine, self.ref], capture_output=True, text=True)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("yours/h100", ok.stdout)
        bad = subprocess.run([sys.executable, script, self.mine], capture_output=True, text=True)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("usage: compare_gpus.py YOUR_DIR REF_DIR", bad.stderr)


if __name__ == "__main__":
    unittest.main()
