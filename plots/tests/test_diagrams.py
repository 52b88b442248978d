"""diagrams.py: every figure renders to PNG, and the index formulas it draws are the kernels' own."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import diagrams  # noqa: E402


class Diagrams(unittest.TestCase):
    def test_every_figure_is_a_png(self):
        root = tempfile.mkdtemp()
        paths = diagrams.main(root)
        self.assertEqual(len(paths), len(diagrams.FIGURES))
        for path in paths:
            with open(path, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", path)
            self.assertGreater(os.path.getsize(path), 10000, path)

    def test_the_committed_figures_exist_and_are_linked(self):
        for lesson, name, _ in diagrams.FIGURES:
            self.assertTrue(os.path.exists(os.path.join(diagrams.ROOT, "lessons", lesson, "figures", name)), name)
        readme = open(os.path.join(diagrams.ROOT, "lessons", "06_tiled_gemm", "README.md")).read()
        self.assertIn("figures/tiling.png", readme)

    def test_step6_threads_cover_the_block_once(self):
        cells = [cell for warp in range(16) for lane in range(32) for cell in diagrams.thread_cells(warp, lane)]
        self.assertEqual(len(cells), 128 * 256)
        self.assertEqual(set(cells), {(r, c) for r in range(128) for c in range(256)})
        self.assertEqual(len(diagrams.thread_cells(0, 9)), 64)

    def test_mma_accumulator_is_the_next_a_fragment(self):
        """Packing C of two 16 x 8 tiles to f16 gives A of 16 x 16 with no exchange between lanes:
        A[r][c] is held by the lane that holds C[r][c % 8] of tile c / 8, in register c-reg + 4·tile."""
        for r in range(16):
            for c in range(16):
                lane_a, reg_a = diagrams.a_owner(r, c)
                lane_c, reg_c = diagrams.c_owner(r, c % 8)
                self.assertEqual((lane_a, reg_a), (lane_c, reg_c + 4 * (c // 8)))
        # every lane holds 4 accumulators of a 16 x 8 tile
        owners = [diagrams.c_owner(r, c)[0] for r in range(16) for c in range(8)]
        self.assertEqual(sorted(owners), sorted(list(range(32)) * 4))

    def test_swizzle_is_a_permutation_and_spreads_columns(self):
        for r in range(8):
            self.assertEqual(sorted(diagrams.swizzled_chunk(r, c) for c in range(8)), list(range(8)))
        for c in range(8):
            self.assertEqual(sorted(diagrams.swizzled_chunk(r, c) for r in range(8)), list(range(8)))

    def test_descriptor_fields_fill_64_bits(self):
        bits = sorted(b for first, width, _ in diagrams.DESCRIPTOR_FIELDS for b in range(first, first + width))
        self.assertEqual(bits, list(range(64)))


if __name__ == "__main__":
    unittest.main()
