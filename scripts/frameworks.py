"""frameworks.py RESULTS_DIR [--n N] [--rows M] [--cols K] [--reps R]: lesson 03's sum and lesson 04's
softmax as a Python user calls them in three frameworks, timed the same way for all three, and
appended to RESULTS_DIR/lesson03.csv and lesson04.csv (where they exist) in the shared schema:

  step numpy          NumPy on the CPU (numpy.sum; softmax written with numpy.exp, max and sum)
  step pytorch_eager  PyTorch on the GPU, one eager call (torch.sum, torch.softmax)
  step mlx            MLX on the GPU through its CUDA backend (mlx.core.sum, mlx.core.softmax)

Each time is the wall clock of one call from Python until its result is ready (numpy returns it;
torch.cuda.synchronize(); mlx.core.eval), inputs already in the framework's memory, the median of 30
calls after warm-up (3 for calls slower than 200 ms, as the lessons do). That is what a user waits
for: the kernel plus the framework's dispatch from Python. The `pytorch` row of
scripts/torch_baselines.py is the other view, the GPU's work alone (CUDA events, graph replay).
Each result is checked against float64 first. A framework that is missing, or has no GPU, gets a row
whose name says why (`n/a: mlx not installed`) and no time; the plots and tables skip such rows.

The defaults are the lessons' default sizes: n = 2^26 floats; M x K = 16384 x 4096 in f32 and f16."""
import argparse
import os
import platform
import statistics
import sys
import time

import numpy as np

from lesson_csv import HEADER, append, copy_gbps  # noqa: F401 (HEADER: the tests read it here)

SLOW_MS = 200.0


def cpu_name():
    """The host CPU's model name, for the NumPy rows' name (commas become ';' for the CSV)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip().replace(",", ";")
    except OSError:
        pass
    return (platform.processor() or platform.machine() or "unknown CPU").replace(",", ";")


def wall_ms(call, ready, reps=30, warmup=2):
    """Median, min, max in ms of call() followed by ready(result): the wall clock of one call from Python
    until its result exists. reps falls to 3 when the first timed call exceeds SLOW_MS."""
    for _ in range(warmup):
        ready(call())
    samples = []
    while len(samples) < reps:
        t0 = time.perf_counter()
        ready(call())
        samples.append((time.perf_counter() - t0) * 1e3)
        if len(samples) == 1 and samples[0] > SLOW_MS:
            reps = min(reps, 3)
    return statistics.median(samples), min(samples), max(samples)






def row(lesson, step, name, dtype, shape, timing, nbytes, err, limit, gpu):
    """One CSV row; timing None gives the row of a framework that could not run (name says why)."""
    if timing is None:
        return [lesson, step, name, dtype, shape, "", "", "", "", "", "", "", gpu]
    med, lo, hi = timing
    gbps = nbytes / (med * 1e-3) / 1e9
    pct = 100 * gbps / limit if limit == limit else float("nan")
    return [lesson, step, name, dtype, shape, f"{med:.6g}", f"{lo:.6g}", f"{hi:.6g}", f"{gbps:.6g}", "",
            f"{pct:.6g}" if pct == pct else "", f"{err:.6g}", gpu]


# --- the frameworks: each returns (sum, softmax) callables, or a reason it cannot run -------------

class NumPy:
    step = "numpy"

    def __init__(self):
        self.where = f"CPU: {cpu_name()}"

    def array(self, a):
        return a

    def sum(self, x):
        return lambda: np.sum(x)

    def softmax(self, x):
        def call():  # what a NumPy user writes: arithmetic in f32, stored in the input's dtype
            xf = x.astype(np.float32, copy=False)
            e = np.exp(xf - xf.max(axis=1, keepdims=True))
            e /= e.sum(axis=1, keepdims=True)
            return e.astype(x.dtype, copy=False)
        return call

    def ready(self, y):
        return y

    def host(self, y):
        return np.asarray(y)


class Torch:
    step = "pytorch_eager"

    def __init__(self):
        try:
            import torch
        except ImportError:
            raise Unavailable("n/a: torch not installed")
        if not torch.cuda.is_available():
            raise Unavailable("n/a: torch sees no CUDA device")
        self.torch, self.where = torch, f"PyTorch {torch.__version__}"

    def array(self, a):
        return self.torch.from_numpy(a).cuda()

    def sum(self, x):
        return lambda: self.torch.sum(x)

    def softmax(self, x):
        return lambda: self.torch.softmax(x, dim=-1)

    def ready(self, y):
        self.torch.cuda.synchronize()
        return y

    def host(self, y):
        return y.cpu().numpy()


class MLX:
    step = "mlx"

    def __init__(self):
        try:
            import mlx.core as mx
        except ImportError:
            raise Unavailable("n/a: mlx not installed")
        try:
            mx.set_default_device(mx.gpu)
            mx.eval(mx.sum(mx.array(np.ones(4, np.float32))))
        except Exception as e:  # no CUDA backend (mlx-cuda-13 missing) or no GPU
            raise Unavailable(f"n/a: mlx has no GPU here ({type(e).__name__})")
        self.mx, self.where = mx, f"MLX {getattr(mx, '__version__', '?')}"

    def array(self, a):
        x = self.mx.array(a)
        self.mx.eval(x)
        return x

    def sum(self, x):
        return lambda: self.mx.sum(x)

    def softmax(self, x):
        return lambda: self.mx.softmax(x, axis=-1)

    def ready(self, y):
        self.mx.eval(y)
        return y

    def host(self, y):
        return np.array(y)


class Unavailable(Exception):
    pass


def frameworks():
    """(step, framework or the reason it is unavailable) for NumPy, PyTorch and MLX."""
    out = []
    for cls in (NumPy, Torch, MLX):
        try:
            out.append((cls.step, cls()))
        except Unavailable as e:
            out.append((cls.step, str(e)))
    return out


def gpu_name():
    try:
        import torch
        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0).replace(",", ";")
    except ImportError:
        pass
    return "unknown GPU"


# --- the two problems ---------------------------------------------------------------------------

def sum_rows(out_dir, gpu, n, reps, fws, rng):
    """Lesson 03's problem: the sum of n floats in [-1, 1). Bytes: 4·n read."""
    path = os.path.join(out_dir, "lesson03.csv")
    limit, shape = copy_gbps(path), f"n={n}"
    host = (rng.random(n, dtype=np.float32) * 2 - 1).astype(np.float32)
    ref = float(np.sum(host, dtype=np.float64))
    scale = float(np.sum(np.abs(host), dtype=np.float64)) or 1.0
    rows = []
    for step, fw in fws:
        if isinstance(fw, str):
            rows.append(row("03", step, fw, "f32", shape, None, 0, 0, limit, gpu))
            continue
        x = fw.array(host)
        name = {"numpy": "numpy.sum", "pytorch_eager": "torch.sum eager", "mlx": "mlx.core.sum"}[step]
        err = abs(float(fw.host(fw.ready(fw.sum(x)()))) - ref) / scale
        timing = wall_ms(fw.sum(x), fw.ready, reps)
        rows.append(row("03", step, f"{name} ({fw.where})", "f32", shape, timing, 4 * n, err, limit, gpu))
        print(f"{name} n={n}: {timing[0]:.4f} ms, error {err:.2e} ({fw.where})")
        del x
    append(path, rows)
    return rows


def softmax_rows(out_dir, gpu, m, k, reps, fws, rng):
    """Lesson 04's problem: the row softmax of an [M, K] matrix, f32 and f16. Bytes: M·K read + written."""
    path = os.path.join(out_dir, "lesson04.csv")
    limit, shape = copy_gbps(path), f"MxK={m}x{k}"
    rows = []
    for dtype, name_t, size in ((np.float32, "f32", 4), (np.float16, "f16", 2)):
        host = (rng.standard_normal((m, k), dtype=np.float32) * 4).astype(dtype)
        xd = host.astype(np.float64)
        ref = np.exp(xd - xd.max(axis=1, keepdims=True))
        ref /= ref.sum(axis=1, keepdims=True)
        floor = 2.0 ** -14 if dtype == np.float16 else 1e-26  # as torch_baselines.py: where the type's spacing ends
        for step, fw in fws:
            if isinstance(fw, str):
                rows.append(row("04", step, fw, name_t, shape, None, 0, 0, limit, gpu))
                continue
            x = fw.array(host)
            name = {"numpy": "numpy softmax", "pytorch_eager": "torch.softmax eager", "mlx": "mlx.core.softmax"}[step]
            y = fw.host(fw.ready(fw.softmax(x)())).astype(np.float64)
            err = float((np.abs(y - ref) / (np.abs(ref) + floor)).max())
            del y
            timing = wall_ms(fw.softmax(x), fw.ready, reps)
            rows.append(row("04", step, f"{name} ({fw.where})", name_t, shape, timing, 2 * m * k * size, err, limit, gpu))
            print(f"{name} {name_t} M={m} K={k}: {timing[0]:.4f} ms, max rel error {err:.2e} ({fw.where})")
            del x
    append(path, rows)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results_dir")
    ap.add_argument("--n", type=int, default=1 << 26, help="lesson 03's size (default 2^26)")
    ap.add_argument("--rows", type=int, default=16384, help="lesson 04's M (default 16384)")
    ap.add_argument("--cols", type=int, default=4096, help="lesson 04's K (default 4096)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--gpu", default=None, help="the CSV's gpu column (default: torch's device name)")
    a = ap.parse_args(argv)
    if a.n < 1 or a.rows < 1 or a.cols < 1 or a.reps < 1:
        ap.error("sizes and --reps must be positive")
    gpu = a.gpu or gpu_name()
    fws = frameworks()
    rng = np.random.default_rng(2026)
    print(f"NumPy {np.__version__}; " + "; ".join(f"{s}: {fw if isinstance(fw, str) else fw.where}" for s, fw in fws))
    # Like torch_baselines.py, append only to the lessons' CSVs that exist: rows of a lesson that was not
    # run would stand alone in a new file.
    for lesson, run in (("03", lambda: sum_rows(a.results_dir, gpu, a.n, a.reps, fws, rng)),
                        ("04", lambda: softmax_rows(a.results_dir, gpu, a.rows, a.cols, a.reps, fws, rng))):
        if os.path.exists(os.path.join(a.results_dir, f"lesson{lesson}.csv")):
            run()
        else:
            print(f"frameworks: no lesson{lesson}.csv in {a.results_dir}: lesson {lesson}'s rows skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
