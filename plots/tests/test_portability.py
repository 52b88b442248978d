"""plots/portability.py: each build's column says ran, FAILED or n/a with the run's reason."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import portability  # noqa: E402

HEADER = "lesson,step,name,dtype,shape,ms_median,ms_min,ms_max,gbps,tflops,pct_of_limit,max_rel_err,gpu\n"


class Portability(unittest.TestCase):
    def test_ran_failed_and_na(self):
        with tempfile.TemporaryDirectory() as root:
            for b in ("native", "p75"):
                os.makedirs(os.path.join(root, b))
            with open(os.path.join(root, "builds.txt"), "w") as f:
                f.write("native|sm_90\np75|compute_75\n")
            with open(os.path.join(root, "about.md"), "w") as f:
                f.write("# run\n")
            rows = {"native": ["07,1,a,f16,s,1,1,1,,1,1,0,G", "07,2,b,f16,s,1,1,1,,1,1,0,G"],
                    "p75": ["07,1,a,f16,s,1,1,1,,1,1,0,G", "07,copy,c,u8,s,1,1,1,1,,,,G"]}
            for b, lines in rows.items():
                with open(os.path.join(root, b, "lesson07.csv"), "w") as f:
                    f.write(HEADER + "\n".join(lines) + "\n")
            with open(os.path.join(root, "p75", "na.txt"), "w") as f:
                f.write("lesson07: 2 b: n/a: needs sm_80 (built for compute_75)\nlesson07: 3 e[bias n]: n/a: needs sm_80\n")
            with open(os.path.join(root, "native", "ctest.txt"), "w") as f:
                f.write("100% tests passed, 0 tests failed out of 9\n")
            out = portability.report(root)
        self.assertIn("| sm_90 | 100% tests passed, 0 tests failed out of 9 |", out)
        self.assertIn("| compute_75 | not run |", out)
        self.assertIn("| 1 a | ran, checked | ran, checked |", out)
        self.assertIn("| 2 b | ran, checked | n/a: needs sm_80 (built for compute_75) |", out)
        self.assertIn("| 3 e[bias n] | — | n/a: needs sm_80 |", out)
        self.assertNotIn("copy", out)


if __name__ == "__main__":
    unittest.main()
