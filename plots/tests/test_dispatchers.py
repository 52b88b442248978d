"""The dispatcher check (plots/check_dispatchers.py): on made-up rows, and on every committed CSV."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import check_dispatchers as cd  # noqa: E402


def row(step, name, ms, shape="R=1", dtype="f32", gpu="G", median=None):
    """A CSV row whose fastest repetition took ms (its median: `median`, else ms)."""
    return {"step": step, "name": name, "ms_min": str(ms), "ms_median": str(median or ms), "shape": shape,
            "dtype": dtype, "gpu": gpu}


class DispatcherCheck(unittest.TestCase):
    def test_within_three_percent_passes(self):
        rows = [row("1", "a", 1.0), row("2", "b", 0.50), row("3", "dispatch", 0.515)]
        self.assertEqual(cd.slow_cells(rows), [])

    def test_slower_than_a_step_fails(self):
        rows = [row("1", "a", 1.0), row("2", "b", 0.50), row("3", "dispatch", 0.52)]
        self.assertEqual(cd.slow_cells(rows), [("G", "f32", "R=1", 0.52, "2", 0.50)])

    def test_fastest_repetitions_compared_not_medians(self):
        # the same kernel in two rows: the clock dropped during the dispatch row (median 4 % up)
        rows = [row("1", "a", 1.0), row("2", "b", 0.50, median=0.51), row("3", "dispatch", 0.505, median=0.53)]
        self.assertEqual(cd.slow_cells(rows), [])
        # a wrong pick is slower in its fastest repetition too
        rows = [row("1", "a", 0.60, median=0.61), row("2", "b", 0.50, median=0.51), row("3", "dispatch", 0.60)]
        self.assertEqual(cd.slow_cells(rows), [("G", "f32", "R=1", 0.60, "2", 0.50)])

    def test_differences_below_the_timer_resolution_pass(self):
        # a 5 us kernel measured twice: 0.16 us apart is 3.2 %, below the events' 0.5 us resolution
        rows = [row("1", "a", 0.010), row("2", "b", 0.00496), row("3", "dispatch", 0.00512)]
        self.assertEqual(cd.slow_cells(rows), [])
        # a wrong pick at that size is microseconds slower
        rows = [row("1", "a", 0.010), row("2", "b", 0.00496), row("3", "dispatch", 0.0060)]
        self.assertEqual(cd.slow_cells(rows), [("G", "f32", "R=1", 0.0060, "2", 0.00496)])

    def test_cells_and_gpus_apart_and_libraries_ignored(self):
        rows = [row("1", "a", 1.0), row("2", "dispatch", 1.0), row("lib", "cub", 0.1),
                row("1", "a", 0.5, shape="R=2"), row("2", "dispatch", 1.0, gpu="H")]
        self.assertEqual(cd.slow_cells(rows), [])

    def test_latest_run_of_a_cell_counts(self):
        rows = [row("1", "a", 1.0), row("2", "dispatch", 2.0), row("2", "dispatch", 1.0)]
        self.assertEqual(cd.slow_cells(rows), [])

    def test_known_cells_reported_not_counted_and_stale_entries_fail(self):
        import csv
        import tempfile
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        with tempfile.NamedTemporaryFile("w", suffix=".csv", dir=root, delete=False, newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(row("1", "a", 1.0)))
            w.writeheader()
            for r in [row("1", "a", 0.50), row("2", "dispatch", 0.60), row("1", "a", 0.50, shape="R=2"),
                      row("2", "dispatch", 0.50, shape="R=2")]:
                w.writerow(r)
        try:
            rel = os.path.relpath(f.name, root)
            self.assertEqual(cd.main(["x", f.name], known={}), 1)  # R=1 is slow
            self.assertEqual(cd.main(["x", f.name], known={(rel, "f32", "R=1"): "why"}), 0)
            # R=2 is not slow: its entry is stale
            self.assertEqual(cd.main(["x", f.name], known={(rel, "f32", "R=1"): "why", (rel, "f32", "R=2"): "why"}), 1)
        finally:
            os.unlink(f.name)

    def test_every_committed_csv(self):
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        paths = cd.committed_csvs(root)
        self.assertTrue(paths)
        self.assertEqual(cd.main(["check_dispatchers.py"] + paths), 0)


if __name__ == "__main__":
    unittest.main()
