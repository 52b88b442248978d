"""readme_tables.py fills a README's marked table from a CSV and leaves the rest of the text alone."""
import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

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

    def test_across_shapes(self):
        import md_table
        row = lambda step, shape, ms: {"step": step, "name": "s" + step, "shape": shape, "ms_median": ms,  # noqa: E731
                                       "ms_min": ms, "ms_max": ms, "gbps": 1.0, "tflops": float("nan"),
                                       "pct_of_limit": 1.0, "max_rel_err": 0.0, "dtype": "f32"}
        rows = [row("4", "a", 1.0), row("4", "b", 1.5), row("7", "a", 2.0), row("7", "b", 1.0)]
        out = md_table.across(rows, ["a", "b"])
        self.assertIn("| 4 | s4 | 1 ms | 1.5 ms (1.50 ×) |", out)
        self.assertIn("| 7 | s7 | 2 ms | 1 ms (0.50 ×) |", out)


class CheckMode(unittest.TestCase):
    """--check changes nothing, names a stale table and fails; a freshly generated README passes."""
    STALE = ("# Lesson\n\n<!-- table plots/tests/sample/lesson01.csv n=67108864 -->\nstale\n<!-- /table -->\n"
             "text\n<!-- table plots/tests/sample/lesson02.csv n=67108864 -->\n<!-- /table -->\n")

    def setUp(self):
        with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
            f.write(self.STALE)
        self.path = f.name

    def tearDown(self):
        os.unlink(self.path)

    def check(self):
        out = io.StringIO()
        with redirect_stdout(out):
            code = readme_tables.main([self.path], check=True)
        return code, out.getvalue()

    def test_stale_table_fails_and_is_left_alone(self):
        code, out = self.check()
        self.assertEqual(code, 1)
        self.assertIn(f"{self.path}:3: <!-- table plots/tests/sample/lesson01.csv n=67108864 -->", out)
        self.assertIn(f"{self.path}:7: <!-- table plots/tests/sample/lesson02.csv n=67108864 -->", out)
        self.assertIn("-stale", out)
        with open(self.path) as f:
            self.assertEqual(f.read(), self.STALE)

    def test_fresh_table_passes(self):
        with redirect_stdout(io.StringIO()):
            readme_tables.main([self.path])
        code, out = self.check()
        self.assertEqual((code, out), (0, ""))

    def test_one_changed_number_fails(self):
        with redirect_stdout(io.StringIO()):
            readme_tables.main([self.path])
        with open(self.path) as f:
            text = f.read()
        with open(self.path, "w") as f:
            f.write(text.replace("| 4 | block_atomic | 0.095 |", "| 4 | block_atomic | 0.094 |"))
        code, out = self.check()
        self.assertEqual(code, 1)
        self.assertIn("lesson01.csv", out)
        self.assertNotIn("lesson02.csv", out)


class Ladder(unittest.TestCase):
    """The root README's ladder: one row per lessonNN.csv, each lesson's best step at its default shape
    and dtype beside step 1, the library and PyTorch there, as summary.py picks them."""
    TEXT = "# Course\n\nbefore\n<!-- ladder plots/tests/sample -->\n| 01 | typed by hand |\n<!-- /ladder -->\nafter\n"

    def setUp(self):
        with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
            f.write(self.TEXT)
        self.path = f.name

    def tearDown(self):
        os.unlink(self.path)

    def fill(self):
        with redirect_stdout(io.StringIO()):
            readme_tables.main([self.path])
        with open(self.path) as f:
            return f.read()

    def check(self):
        out = io.StringIO()
        with redirect_stdout(out):
            code = readme_tables.main([self.path], check=True)
        return code, out.getvalue()

    def rows(self):
        text = self.fill()
        body = text[text.index("<!-- ladder"):text.index("<!-- /ladder -->")].splitlines()[1:]
        return {line.split("](")[0].lstrip("| ["): line for line in body if line.startswith("| [")}

    def test_one_row_per_lesson_between_markers(self):
        text = self.fill()
        self.assertNotIn("typed by hand", text)
        self.assertTrue(text.startswith("# Course\n\nbefore\n<!-- ladder plots/tests/sample -->\n| lesson |"))
        self.assertTrue(text.endswith("|\n<!-- /ladder -->\nafter\n"))
        self.assertEqual([k[:2] for k in self.rows()], ["01", "02", "03", "04", "05", "06", "07", "08", "09", "10"])

    def test_best_step_step1_library_pytorch(self):
        row = self.rows()["01 naive reductions"]
        self.assertIn("(lessons/01_naive_reduction/README.md)", row)
        self.assertIn("| `n=67108864` f32 | 4 `block_atomic`; FAILED: atomic_per_element | 0.095 | 2825 GB/s | "
                      "94.2% | 13000 | 0.093 (`cub`) | 0.98 | 0.1 (`torch.sum`) | 1.1 |", row)

    def test_default_dtype_and_missing_rows(self):
        """Lesson 05 compares f32 with f32 (its default) and has no library row: "–"; lesson 07 runs f16
        and names its fastest SDPA backend (it has no plain `pytorch` row); lesson 06 shows TFLOP/s."""
        rows = self.rows()
        self.assertIn("| `RxVxK=4096x50257x10` f32 | 4 `warp_select` | 0.0974 | 8460 GB/s | 282.0% | 34 | – | – | "
                      "3.57 (`torch.topk(softmax)`) | 37 |", rows["05 fused softmax + top-K"])
        self.assertTrue(rows["07 the WMMA attention tile, grown into a flash-attention forward"].endswith(
            "| `B=65536` f16 | 4 `tile_registers` | 0.04544 | 2954 GB/s | 100.5% | 2.5 | "
            "0.4337 (`cublas_softmax_cublas`) | 9.5 | 0.6895 (`sdpa EFFICIENT_ATTENTION`) | 15 |"))
        self.assertIn("| 2.525 (`sdpa CUDNN_ATTENTION`) |", rows["09 Hopper attention: TMA, wgmma and warp specialisation"])
        self.assertIn("| 46.9 TFLOP/s |", rows["06 tiled SGEMM with double buffering and a fused epilogue"])

    def test_agrees_with_summary(self):
        """The ladder and summary.py name the same best step and ratios for every lesson."""
        import summary
        for lesson, csv_path in summary.lessons(os.path.join(HERE, "sample")):
            line = summary.summarize(lesson, readme_tables.rows_of(f"plots/tests/sample/{lesson}.csv"),
                                     summary.default_shape(lesson))
            row = next(v for k, v in self.rows().items() if k.startswith(lesson[len("lesson"):] + " "))
            step, name = line.split("best step ")[1].split()[:2]
            self.assertIn(f"| {step} `{name}`", row, lesson)
            for ratio in (p.split("x ")[0] for p in line.split(", ") if "x step 1" in p or "x library" in p
                          or "x PyTorch" in p):
                self.assertIn(f"| {ratio} |", row, lesson)

    def test_check_names_a_stale_ladder(self):
        code, out = self.check()
        self.assertEqual(code, 1)
        self.assertIn(f"{self.path}:4: <!-- ladder plots/tests/sample --> differs from the committed CSV", out)
        self.assertIn("-| 01 | typed by hand |", out)
        with open(self.path) as f:
            self.assertEqual(f.read(), self.TEXT)

    def test_check_passes_fresh_and_fails_one_changed_number(self):
        text = self.fill()
        self.assertEqual(self.check(), (0, ""))
        with open(self.path, "w") as f:
            f.write(text.replace("| 0.0974 | 8460 GB/s |", "| 0.0973 | 8460 GB/s |"))
        code, out = self.check()
        self.assertEqual(code, 1)
        self.assertIn("<!-- ladder plots/tests/sample -->", out)

    def test_check_covers_tables_and_ladder_in_order(self):
        with open(self.path, "w") as f:
            f.write("<!-- table plots/tests/sample/lesson01.csv n=67108864 -->\nstale\n<!-- /table -->\n" + self.TEXT)
        code, out = self.check()
        self.assertEqual(code, 1)
        lines = [line for line in out.splitlines() if "differs" in line]
        self.assertEqual(len(lines), 2)
        self.assertIn(":1: <!-- table", lines[0])
        self.assertIn(":7: <!-- ladder", lines[1])


class Values(unittest.TestCase):
    """A number quoted in prose: <!-- value CSV STEP SHAPE [dtype=D] FIELD [fmt=F] -->N<!-- /value -->."""
    CSV01 = "plots/tests/sample/lesson01.csv"
    CSV05 = "plots/tests/sample/lesson05.csv"

    def setUp(self):
        with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
            self.path = f.name

    def tearDown(self):
        os.unlink(self.path)

    def marker(self, args, number="?"):
        return f"<!-- value {args} -->{number}<!-- /value -->"

    def write(self, text):
        with open(self.path, "w") as f:
            f.write(text)

    def fill(self, text):
        self.write(text)
        with redirect_stdout(io.StringIO()):
            readme_tables.main([self.path])
        with open(self.path) as f:
            return f.read()

    def value(self, args):
        out = self.fill("x " + self.marker(args) + " y\n")
        return out[out.index("-->") + 3:out.index("<!-- /value -->")]

    def check(self):
        out = io.StringIO()
        with redirect_stdout(out):
            code = readme_tables.main([self.path], check=True)
        return code, out.getvalue()

    def test_fills_between_markers_and_leaves_the_text(self):
        gbps = self.marker(f"{self.CSV01} 4 n=67108864 gbps")
        pct = self.marker(f"{self.CSV01} 4 n=67108864 pct_of_limit", "12")
        text = f"# L\n\nStep 4 reads at {gbps} GB/s ({pct} %\nof copy).\n"
        out = self.fill(text)
        self.assertEqual(out, text.replace("-->?<", "-->2825<").replace("-->12<", "-->94<"))

    def test_default_and_given_formats(self):
        self.assertEqual(self.value(f"{self.CSV01} 4 n=67108864 ms_median"), "0.09500")  # 4 significant digits
        self.assertEqual(self.value(f"{self.CSV01} 4 n=67108864 ms_median fmt=.3f"), "0.095")
        self.assertEqual(self.value(f"{self.CSV01} 4 n=67108864 pct_of_limit fmt=.1f"), "94.2")
        self.assertEqual(self.value(f"{self.CSV01} copy bytes=1073741824 gbps fmt=2sig"), "3000")
        self.assertEqual(self.value(f"{self.CSV01} 1 n=67108864 ms_median fmt=3sig"), "1200")

    def test_ratios(self):
        """x_REF = REF's median ms / this step's, at the same shape and dtype; 2 significant digits."""
        self.assertEqual(self.value(f"{self.CSV01} 4 n=67108864 x_step1"), "13000")  # 1200 / 0.095, not 1.3e+04
        self.assertEqual(self.value(f"{self.CSV01} 4 n=67108864 x_step3"), "1.2")  # 0.11 / 0.095
        self.assertEqual(self.value(f"{self.CSV01} 4 n=67108864 x_lib"), "0.98")
        self.assertEqual(self.value(f"{self.CSV01} 4 n=67108864 x_pytorch"), "1.1")
        self.assertEqual(self.value(f"{self.CSV05} 4 RxVxK=4096x50257x10 dtype=f16 x_step1"), "34")  # f16's step 1
        self.assertEqual(self.value(f"{self.CSV05} 4 RxVxK=4096x50257x10 dtype=f16 x_pytorch_topk fmt=.1f"), "26.8")

    def test_significant(self):
        self.assertEqual([readme_tables.significant(v, n) for v, n in
                          ((2943.63, 3), (0.068256, 2), (9.96, 2), (11.955, 3), (26000.4, 2), (0.099936, 3))],
                         ["2940", "0.068", "10", "12.0", "26000", "0.0999"])

    def test_stale_value_fails_names_line_and_is_left_alone(self):
        text = self.fill("a\nb " + self.marker(f"{self.CSV01} 4 n=67108864 pct_of_limit") + " %\n")
        self.assertEqual(self.check(), (0, ""))
        stale = text.replace("-->94<", "-->93<")
        self.write(stale)
        code, out = self.check()
        self.assertEqual(code, 1)
        self.assertIn(f"{self.path}:2: <!-- value {self.CSV01} 4 n=67108864 pct_of_limit --> differs from the "
                      "committed CSV\n    -93\n    +94\n", out)
        with open(self.path) as f:
            self.assertEqual(f.read(), stale)

    def errors(self, args, line_start="x "):
        self.write("# L\n" + line_start + self.marker(args) + "\n")
        with redirect_stdout(io.StringIO()), self.assertRaises(SystemExit) as e:
            readme_tables.main([self.path], check=True)
        self.assertIn(f"{self.path}:2: <!-- value {args} -->: ", str(e.exception.code))
        return str(e.exception.code)

    def test_unknown_row_is_an_error(self):
        self.assertIn(f"{self.CSV01} has no row of step 9 at n=67108864 (steps there: 1, 2, 3, 4, lib, pytorch)",
                      self.errors(f"{self.CSV01} 9 n=67108864 ms_median"))
        self.assertIn("no row of step 4 at n=5 (no row at that shape)", self.errors(f"{self.CSV01} 4 n=5 ms_median"))
        self.assertIn("no row of step lib at RxVxK=4096x50257x10 dtype=f32",
                      self.errors(f"{self.CSV05} 4 RxVxK=4096x50257x10 dtype=f32 x_lib"))

    def test_ambiguous_failed_and_unknown_field_are_errors(self):
        self.assertIn("give dtype=", self.errors(f"{self.CSV05} 4 RxVxK=4096x50257x10 ms_median"))
        self.assertIn("FAILED", self.errors(f"{self.CSV01} 2 n=67108864 ms_median"))
        self.assertIn("unknown field speed", self.errors(f"{self.CSV01} 4 n=67108864 speed"))
        self.assertIn("has no tflops", self.errors(f"{self.CSV01} 4 n=67108864 tflops"))
        self.assertIn("must not begin a line", self.errors(f"{self.CSV01} 4 n=67108864 gbps", line_start=""))


class Ranges(Values):
    """A range quoted in prose: <!-- range CSV STEPS SHAPES [dtype=D] FIELD [fmt=F] -->LO–HI<!-- /range -->."""
    def marker(self, args, number="?"):
        return f"<!-- range {args} -->{number}<!-- /range -->"

    def value(self, args):
        out = self.fill("x " + self.marker(args) + " y\n")
        return out[out.index("-->") + 3:out.index("<!-- /range -->")]

    def test_fills_between_markers_and_leaves_the_text(self):
        text = f"# L\n\nSteps 3 to CUB reach {self.marker(f'{self.CSV01} 3,4,lib n=67108864 pct_of_limit')} %.\n"
        self.assertEqual(self.fill(text), text.replace("-->?<", "-->81–96<"))

    def test_lists_wildcards_and_prefixes(self):
        self.assertEqual(self.value(f"{self.CSV01} 3 n=67108864,n=268435456 gbps"), "2440–2684")
        self.assertEqual(self.value(f"{self.CSV01} 3,lib n=2* gbps"), "2684–2902")  # prefix: n=268435456 only
        self.assertEqual(self.value(f"{self.CSV01} lib * pct_of_limit fmt=.2f"), "0.05–96.70")
        self.assertEqual(self.value(f"{self.CSV01} * n=1024 ms_median"), "0.003000–0.004000")
        self.assertEqual(self.value(f"{self.CSV05} 7 RxVxK=4096x32000x* dtype=f32 pct_of_limit"), "78–87")

    def test_one_number_where_both_ends_format_alike(self):
        self.assertEqual(self.value(f"{self.CSV01} copy * gbps"), "3000")
        self.assertEqual(self.value(f"{self.CSV01} 4,lib n=67108864 ms_median fmt=.1f"), "0.1")
        self.assertEqual(self.value(f"{self.CSV01} 4,lib n=67108864 x_step1"), "13000")  # ratio at each row's shape

    def test_stale_value_fails_names_line_and_is_left_alone(self):
        text = self.fill("a\nb " + self.marker(f"{self.CSV01} 3,4 n=67108864 pct_of_limit") + " %\n")
        self.assertEqual(self.check(), (0, ""))
        stale = text.replace("-->81–94<", "-->80–94<")
        self.assertNotEqual(stale, text)
        self.write(stale)
        code, out = self.check()
        self.assertEqual(code, 1)
        self.assertIn(f"{self.path}:2: <!-- range {self.CSV01} 3,4 n=67108864 pct_of_limit --> differs from the "
                      "committed CSV\n    -80–94\n    +81–94\n", out)
        with open(self.path) as f:
            self.assertEqual(f.read(), stale)

    def test_default_and_given_formats(self):
        self.assertEqual(self.value(f"{self.CSV01} 3,4 n=67108864 ms_median"), "0.09500–0.1100")
        self.assertEqual(self.value(f"{self.CSV01} 3,4 n=67108864 pct_of_limit fmt=.1f"), "81.3–94.2")

    def test_ratios(self):
        self.assertEqual(self.value(f"{self.CSV01} 3,4 n=67108864 x_lib"), "0.85–0.98")

    def errors(self, args, line_start="x "):
        self.write("# L\n" + line_start + self.marker(args) + "\n")
        with redirect_stdout(io.StringIO()), self.assertRaises(SystemExit) as e:
            readme_tables.main([self.path], check=True)
        self.assertIn(f"{self.path}:2: <!-- range {args} -->: ", str(e.exception.code))
        return str(e.exception.code)

    def test_unknown_row_is_an_error(self):
        self.assertIn(f"{self.CSV01} has no row of steps 9 at n=67108864",
                      self.errors(f"{self.CSV01} 9 n=67108864 ms_median"))
        self.assertIn("has no row of step 9 among steps 3,9", self.errors(f"{self.CSV01} 3,9 n=67108864 gbps"))
        self.assertIn("has no row at n=5 among", self.errors(f"{self.CSV01} 3 n=67108864,n=5 gbps"))
        self.assertIn("has no row at n=5* among", self.errors(f"{self.CSV01} 3 n=6*,n=5* gbps"))
        self.assertIn("no row of step lib at RxVxK=4096x50257x10 dtype=f32",
                      self.errors(f"{self.CSV05} 4 RxVxK=4096x50257x10 dtype=f32 x_lib"))

    def test_ambiguous_failed_and_unknown_field_are_errors(self):
        self.assertIn("give dtype=", self.errors(f"{self.CSV05} 4 RxVxK=4096x50257x10 ms_median"))
        self.assertIn("FAILED", self.errors(f"{self.CSV01} 2,3 n=67108864 ms_median"))
        self.assertIn("unknown field speed", self.errors(f"{self.CSV01} 3,4 n=67108864 speed"))
        self.assertIn("has no tflops", self.errors(f"{self.CSV01} 3,4 n=67108864 tflops"))
        self.assertIn("must not begin a line", self.errors(f"{self.CSV01} 3,4 n=67108864 gbps", line_start=""))

    def test_unclosed_marker_is_an_error(self):
        self.write("# L\nx <!-- range plots/tests/sample/lesson01.csv 3 * gbps -->2440\n<!-- /range -->\n")
        with redirect_stdout(io.StringIO()), self.assertRaises(SystemExit) as e:
            readme_tables.main([self.path], check=True)
        self.assertIn(f"{self.path}:2: a range marker without its number and <!-- /range --> on the same line",
                      str(e.exception.code))

    test_significant = None


class Sweep(unittest.TestCase):
    """A sweep table: one row per shape, ordered by label=DIM; per dtype, each named step's rate and `best`,
    the fastest numbered step that is not a column (sample/reruns.csv: a default run, then a sweep)."""
    CSV = "plots/tests/sample/reruns.csv"

    def setUp(self):
        with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
            self.path = f.name

    def tearDown(self):
        os.unlink(self.path)

    def fill(self, opts):
        with open(self.path, "w") as f:
            f.write(f"# L\n\n<!-- table {self.CSV} {opts} -->\nstale\n<!-- /table -->\nafter\n")
        with redirect_stdout(io.StringIO()):
            readme_tables.main([self.path])
        with open(self.path) as f:
            return f.read()

    def test_steps_as_columns_shapes_as_rows(self):
        out = self.fill("MxK=* dtype=f32,f16 sweep=3,best,pytorch label=K")
        self.assertIn("-->\n| K | f32 dispatch GB/s | f32 best GB/s | f32 torch.op GB/s | f16 dispatch GB/s | "
                      "f16 best GB/s | f16 torch.op GB/s |\n|---|---:|---:|---:|---:|---:|---:|\n"
                      "| 2 | 68.97 | 1: 66.67 | 181.8 | – | – | – |\n"  # step 2 FAILED: not the best
                      "| 4 | 166.7 | 2: 160 | 125 | 125 | 2: 133.3 | – |\n"  # the sweep's rows, not the default run's
                      "| 16 | 125 | 1: 133.3 | 200 | FAILED | 2: 200 | – |\n<!-- /table -->\nafter\n", out)
        self.assertEqual(self.check(), (0, ""))

    def test_named_column_and_best_over_a_reference(self):
        self.CSV = "plots/tests/sample/lesson06.csv"
        out = self.fill("MxNxK=4096x4096x4096 sweep=6,lib/cublas,best:lib/cublas")
        self.assertRegex(out, r"\| shape \| f32 warp_tiled TFLOP/s \| f32 cublas TFLOP/s \| f32 best ÷ cublas \|\n"
                              r"\|---\|---:\|---:\|---:\|\n\| MxNxK=4096x4096x4096 \| [0-9.]+ \| [0-9.]+ \| \d: [0-9.]+× \|")

    def test_shapes_in_csv_order_without_label_and_prefixes(self):
        out = self.fill("MxK=8*,MxK=2* dtype=f16 sweep=1,best")
        self.assertIn("| shape | f16 first GB/s | f16 best GB/s |\n|---|---:|---:|\n| MxK=8x4 | 66.67 | 2: 133.3 |\n"
                      "| MxK=2x16 | 100 | 2: 200 |\n<!-- /table -->", out)

    def check(self):
        out = io.StringIO()
        with redirect_stdout(out):
            code = readme_tables.main([self.path], check=True)
        return code, out.getvalue()

    def errors(self, csv, opts):
        with open(self.path, "w") as f:
            f.write(f"# L\n<!-- table {csv} {opts} -->\n<!-- /table -->\n")
        with redirect_stdout(io.StringIO()), self.assertRaises(SystemExit) as e:
            readme_tables.main([self.path], check=True)
        self.assertIn(f"{self.path}:2: <!-- table {csv} {opts} -->: ", str(e.exception.code))
        return str(e.exception.code)

    def test_errors(self):
        self.assertIn("MxK=8x4 has no dimension N", self.errors(self.CSV, "MxK=* dtype=f32 sweep=3 label=N"))
        self.assertIn("has no f32 row at n=*", self.errors(self.CSV, "n=* dtype=f32 sweep=3"))
        self.assertIn("step lib has rows named cublas, cublas+epilogue[bias n gelu_tanh]: a sweep column is one row a "
                      "shape (name one: lib/NAME)",
                      self.errors("plots/tests/sample/lesson06.csv", "MxNxK=* sweep=lib"))


class RowsNamesLimits(unittest.TestCase):
    """rows=first (the first run's row) and rows=all (every run's rows, ranges only), LABEL/NAME where rows
    share a label, and the limit fields limit_ms, limit_gbps, limit_tflops and over_limit."""
    CSV = "plots/tests/sample/reruns.csv"
    CSV06 = "plots/tests/sample/lesson06.csv"

    def setUp(self):
        with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
            self.path = f.name

    def tearDown(self):
        os.unlink(self.path)

    def quote(self, kind, args):
        with open(self.path, "w") as f:
            f.write(f"x <!-- {kind} {args} -->?<!-- /{kind} --> y\n")
        with redirect_stdout(io.StringIO()):
            readme_tables.main([self.path])
        with open(self.path) as f:
            out = f.read()
        return out[out.index("-->") + 3:out.index(f"<!-- /{kind} -->")]

    def error(self, kind, args):
        with open(self.path, "w") as f:
            f.write(f"# L\nx <!-- {kind} {args} -->?<!-- /{kind} -->\n")
        with redirect_stdout(io.StringIO()), self.assertRaises(SystemExit) as e:
            readme_tables.main([self.path], check=True)
        self.assertIn(f"{self.path}:2: <!-- {kind} {args} -->: ", str(e.exception.code))
        return str(e.exception.code)

    def test_first_and_latest_rows(self):
        self.assertEqual(self.quote("value", f"{self.CSV} 1 MxK=8x4 dtype=f32 gbps"), "66.67")  # the sweep's rerun
        self.assertEqual(self.quote("value", f"{self.CSV} 1 MxK=8x4 dtype=f32 rows=first gbps"), "100.0")
        self.assertEqual(self.quote("value", f"{self.CSV} copy bytes=1073741824 rows=first gbps"), "2990")
        self.assertEqual(self.quote("value", f"{self.CSV} 2 MxK=8x4 dtype=f32 x_step1"), "2.4")  # 3 / 1.25
        self.assertEqual(self.quote("value", f"{self.CSV} 2 MxK=8x4 dtype=f32 rows=first x_step1"), "2.0")  # 2 / 1
        self.assertEqual(self.quote("range", f"{self.CSV} 1,2 MxK=8x4 dtype=f32 rows=first gbps"), "100.0–200.0")

    def test_all_rows(self):
        self.assertEqual(self.quote("range", f"{self.CSV} copy * gbps"), "3010")  # the latest copy only
        self.assertEqual(self.quote("range", f"{self.CSV} copy * rows=all gbps"), "2950–3010")
        self.assertEqual(self.quote("range", f"{self.CSV} 1 MxK=8x4 dtype=f32 rows=all gbps"), "66.67–100.0")
        self.assertIn("rows=all is for a range marker", self.error("value", f"{self.CSV} copy * rows=all gbps"))
        self.assertIn("not a ratio (x_step1)", self.error("range", f"{self.CSV} 2 MxK=8x4 rows=all x_step1"))
        self.assertIn("FAILED in a run", self.error("range", f"{self.CSV} 2 * dtype=f32 rows=all gbps"))
        self.assertIn("rows=some: one of last, first, all", self.error("range", f"{self.CSV} copy * rows=some gbps"))

    def test_label_and_name(self):
        self.assertEqual(self.quote("value", f"{self.CSV} lib/libA MxK=8x4 ms_median"), "0.5000")
        self.assertEqual(self.quote("value", f"{self.CSV} lib/libB MxK=8x4 ms_median"), "0.8000")  # before "["
        self.assertEqual(self.quote("value", f"{self.CSV} 2 MxK=8x4 dtype=f32 rows=first x_lib/libB"), "0.80")
        self.assertEqual(self.quote("range", f"{self.CSV} lib/libA,lib/libB MxK=8x4 ms_median"), "0.5000–0.8000")
        # lesson06's two lib rows, cublas and cublas+epilogue[bias n gelu_tanh], against step 7's 0.00129034 ms
        self.assertEqual(self.quote("value", f"{self.CSV06} 7 MxNxK=256x256x256 x_lib/cublas fmt=3sig"), "0.908")
        self.assertEqual(self.quote("value", f"{self.CSV06} 7 MxNxK=256x256x256 x_lib/cublas+epilogue fmt=3sig"),
                         "0.958")
        self.assertIn("2 rows of step lib at MxK=8x4 (libA f32, libB[epilogue x] f32): name one: lib/NAME",
                      self.error("value", f"{self.CSV} lib MxK=8x4 ms_median"))
        self.assertIn("name one: lib/NAME", self.error("range", f"{self.CSV} lib MxK=8x4 ms_median"))
        self.assertIn("has no row of step lib/libC", self.error("value", f"{self.CSV} lib/libC MxK=8x4 ms_median"))

    def test_limits(self):
        """pct_of_limit = 100 · floor / time: the floor (limit_ms), the limit (limit_gbps, limit_tflops) and
        how many times the floor a row takes (over_limit) follow from a row's own columns."""
        self.assertEqual(self.quote("value", f"{self.CSV} 1 MxK=8x4 dtype=f32 rows=first limit_ms"), "0.200")
        self.assertEqual(self.quote("value", f"{self.CSV} 1 MxK=8x4 dtype=f32 rows=first limit_gbps"), "1000")
        self.assertEqual(self.quote("value", f"{self.CSV} 1 MxK=8x4 dtype=f32 rows=first over_limit"), "10")
        self.assertEqual(self.quote("value", f"{self.CSV} 1 MxK=8x4 dtype=f32 over_limit"), "15")  # 100 / 6.667
        self.assertEqual(self.quote("value", "plots/tests/sample/lesson01.csv 4 n=67108864 limit_ms fmt=.4f"),
                         "0.0895")  # 0.095 ms at 94.2 %
        self.assertEqual(self.quote("value", f"{self.CSV06} lib/cublas MxNxK=256x256x256 limit_tflops"), "67.0")
        self.assertIn("has no limit_tflops", self.error("value", f"{self.CSV} 1 MxK=8x4 dtype=f32 limit_tflops"))


class Standing(unittest.TestCase):
    """summary.standing, which summary.py and the ladder share."""
    @staticmethod
    def row(step, ms, dtype="f32", shape="n=1", name=None):
        return {"step": step, "name": name or "s" + step, "dtype": dtype, "shape": shape, "ms_median": ms,
                "ms_min": ms, "ms_max": ms, "gbps": 1.0, "tflops": float("nan"), "pct_of_limit": 1.0,
                "max_rel_err": 0.0}

    def test_best_of_passing_numbered_steps(self):
        import summary
        nan = float("nan")
        rows = [self.row("1", 4.0), self.row("2", 1.0), self.row("3", nan), self.row("lib", 0.5),
                self.row("pytorch", nan), self.row("copy", 0.1), self.row("2", 0.2, dtype="f16"),
                self.row("2", 0.3, shape="n=2")]
        s = summary.standing(rows, "n=1", "f32")
        self.assertEqual((s.best["step"], s.first["ms_median"], s.lib["ms_median"], s.pytorch, s.failed, s.problem),
                         ("2", 4.0, 0.5, None, ["s3", "spytorch"], None))

    def test_pytorch_row_else_fastest_backend(self):
        """The `pytorch` row is PyTorch's equivalent of the problem; without it, the fastest `pytorch_*`
        backend that passed; a `pytorch_*` row beside a `pytorch` row (another problem) is not taken."""
        import summary
        nan = float("nan")
        backends = [self.row("1", 1.0), self.row("pytorch_flash", 3.0), self.row("pytorch_cudnn", 2.0),
                    self.row("pytorch_math", nan), self.row("pytorch_cudnn", 0.5, shape="n=2")]
        self.assertEqual(summary.standing(backends, "n=1", "f32").pytorch["step"], "pytorch_cudnn")
        both = [self.row("1", 1.0), self.row("pytorch", 3.0), self.row("pytorch_topk", 2.0)]
        self.assertEqual(summary.standing(both, "n=1", "f32").pytorch["step"], "pytorch")
        self.assertIsNone(summary.standing([self.row("1", 1.0), self.row("pytorch_math", nan)], "n=1", "f32").pytorch)

    def test_no_rows_or_no_passing_step(self):
        import summary
        self.assertEqual(summary.standing([self.row("1", 1.0)], "n=1", "f16").problem, "no f16 rows at n=1")
        s = summary.standing([self.row("1", float("nan")), self.row("lib", 1.0)], "n=1", "f32")
        self.assertEqual((s.best, s.problem), (None, "no step passed its check at n=1 f32"))


if __name__ == "__main__":
    unittest.main()
