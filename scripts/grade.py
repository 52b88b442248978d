#!/usr/bin/env python3
"""Grades the exercises: one verdict per exercise (scripts/grade.sh is the command to run).

  grade.py [NN | NN.k ...] [--solutions] [--build-dir DIR] [--no-build] [--cpu-only]
  grade.py --submissions DIR [--csv FILE] [--unsafe] [NN | NN.k ...]

An exercise passes when its check finds no wrong case, its output at the timed size is right, and it
runs at least 80 % of the solution's speed in the same process (exercises/NN_name/test.cu and
common/grade.cuh decide; this script runs them and reads their verdicts from the grading channel of
common/grade_channel.hpp, which the graded code cannot forge). Verdicts: PASS with the speed against
the solution; FAIL with the first failing case, what was expected, and a hint from
exercises/NN_name/exercises.json, and, when it is right but too slow and Nsight Compute can read the
GPU's counters, the three profiler quantities that differ most from the solution's; NOT GRADED: no GPU (or: needs sm_90a, for lessons 08 and 09 on
another GPU). Parts that need no GPU (test cases outside the "gpu" suite) are graded on the CPU.

A class (--submissions): each student's files are checked (scripts/grade_lint.py), copied into a
fresh folder (only the file names exercises.json lists), built and run in a sandbox (bubblewrap:
the repository read-only, only that student's build folder writable, no network, CPU-time, memory
and wall-clock limits, the GPU device nodes passed through). Without bubblewrap it refuses, unless
--unsafe. The students' builds run side by side (KL_GRADE_JOBS at a time, default the CPU count);
their tests run one at a time, in order, so that no timing shares the GPU or the CPUs with another.
Each verdict is appended to the CSV as it is made.

Time limits in seconds (the process group is killed past them), from the environment:
KL_GRADE_TIMEOUT_CONFIGURE (300), KL_GRADE_TIMEOUT_BUILD (900, each lesson), KL_GRADE_TIMEOUT_CPU
(120, an exercise's CPU part), KL_GRADE_TIMEOUT_GPU (600, its GPU part).
Build folders: --build-dir, else $KL_BUILD_ROOT/release; a class's in $KL_GRADE_BUILD_ROOT, else
$KL_BUILD_ROOT/grade; KL_BUILD_ROOT defaults to build/ in the repository.
Exit status: 1 if any exercise failed, else 77 if any could not be graded for want of a GPU, else 0;
2 for a command line or a setting that cannot work (one line on stderr).
"""
import argparse
import csv
import glob
import json
import multiprocessing
import os
import re
import resource
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grade_lint  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "plots"))
import profile_table  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BAR = 0.8
GiB = 1 << 30


def timeout(name, default):
    value = os.environ.get(f"KL_GRADE_TIMEOUT_{name}", str(default))
    if not re.fullmatch(r"[1-9]\d{0,5}", value):
        refuse(f"KL_GRADE_TIMEOUT_{name}={value!r} is not a number of seconds")
    return int(value)


def build_jobs():
    """KL_GRADE_JOBS: how many students' builds run side by side (default the CPU count)."""
    value = os.environ.get("KL_GRADE_JOBS") or str(os.cpu_count() or 2)
    if not re.fullmatch(r"[1-9]\d{0,3}", value):
        refuse(f"KL_GRADE_JOBS={value!r} is not a number of builds (1 or more)")
    return int(value)


def load_exercises():
    """Every exercise of every lesson, in ladder order, from exercises/NN_name/exercises.json."""
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "exercises", "[0-9][0-9]_*", "exercises.json"))):
        lesson = os.path.basename(os.path.dirname(path))
        with open(path) as f:
            for ex in json.load(f):
                ex["lesson"] = lesson
                out.append(ex)
    return out


def refuse(why):
    """Bad input: one line on stderr, exit 2 (as every command of the repository does)."""
    print(f"grade: {why}".replace("\n", " "), file=sys.stderr)
    sys.exit(2)


class Parser(argparse.ArgumentParser):
    """argparse with its errors on one line, as refuse() gives them."""

    def error(self, message):
        refuse(f"{message} (see --help)")


def select(exercises, wanted):
    """The exercises named by NN (a lesson) or NN.k (one exercise); all of them when none is named."""
    if not wanted:
        return exercises
    chosen = []
    for w in wanted:
        if not re.fullmatch(r"\d\d(\.\d+)?", w):
            refuse(f"'{w}' is not an exercise: give NN (a lesson, e.g. 01) or NN.k (e.g. 01.2)")
        hits = [e for e in exercises if e["id"] == w or e["id"].split(".")[0] == w]
        if not hits:
            ids = ", ".join(e["id"] for e in exercises)
            refuse(f"no exercise {w} (there are {ids})")
        chosen += [e for e in hits if e not in chosen]
    return chosen


# ---- running things: sandbox, limits, time-outs --------------------------------------------------

class Sandbox:
    """How a command of one student runs: inside bubblewrap (the file system read-only but for
    `writable`, a private /tmp, no network, its own user, PID and IPC namespaces, /dev with only the
    basic nodes and the NVIDIA ones), or, with --unsafe or for a student's own tree, as it is. Both
    with a CPU-time limit, a data-memory limit (data_bytes, None for none) and a time-out that kills
    the whole process group."""

    def __init__(self, writable, enabled, cpu_s, data_bytes):
        self.writable, self.enabled, self.cpu_s, self.data_bytes = writable, enabled, cpu_s, data_bytes

    def wrap(self, cmd):
        if not self.enabled:
            return cmd
        w = ["bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--uid", "65534", "--gid", "65534",
             "--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        for node in sorted(glob.glob("/dev/nvidia*")):
            w += ["--dev-bind", node, node]
        if os.path.isdir("/dev/dri"):
            w += ["--dev-bind", "/dev/dri", "/dev/dri"]
        # The repository, where it lies under /tmp (a CI clone in mktemp -d), again after /tmp's tmpfs.
        if os.path.commonpath([ROOT, "/tmp"]) == "/tmp":
            w += ["--ro-bind", ROOT, ROOT]
        for path in self.writable:
            w += ["--bind", path, path]
        return w + ["--chdir", self.writable[0] if self.writable else "/", "--"] + cmd

    def limits(self):
        resource.setrlimit(resource.RLIMIT_CPU, (self.cpu_s, self.cpu_s))
        if self.data_bytes:
            resource.setrlimit(resource.RLIMIT_DATA, (self.data_bytes, self.data_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (4 * GiB, 4 * GiB))


def child_env(extra=None):
    """A plain environment: what the toolchain and the GPU need, nothing of the grader's
    (KL_SANITIZE in particular: timing is never skipped in a graded run)."""
    keep = ("PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDNN_ROOT",
            "CUDAARCHS", "TERM")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["HOME"] = "/tmp"
    env.update(extra or {})
    return env


class Result:
    def __init__(self, returncode, out, timed_out, channel=""):
        self.returncode, self.out, self.timed_out, self.channel = returncode, out, timed_out, channel


def run(cmd, box, limit_s, channel=False, env=None):
    """Runs cmd (in the sandbox box) with stdout and stderr together, killed with its whole process
    group after limit_s. With channel: a fresh nonce on one pipe and a pipe for the verdict lines
    (KL_GRADE_CHANNEL="R W"); Result.channel is what came back on it."""
    pass_fds, extra, nonce_w = (), dict(env or {}), None
    if channel:
        nonce_r, nonce_w = os.pipe()
        res_r, res_w = os.pipe()
        pass_fds = (nonce_r, res_w)
        extra["KL_GRADE_CHANNEL"] = f"{nonce_r} {res_w}"
        nonce = secrets.token_hex(16)
    proc = subprocess.Popen(box.wrap(cmd), cwd=ROOT, env=child_env(extra), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, pass_fds=pass_fds,
                            start_new_session=True, preexec_fn=box.limits)
    got = []
    if channel:
        os.close(nonce_r)
        os.close(res_w)
        try:
            os.write(nonce_w, (nonce + "\n").encode())
        except OSError:
            pass
        os.close(nonce_w)
        reader = threading.Thread(target=lambda: got.append(_read_all(res_r)), daemon=True)
        reader.start()
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # a process that left the group (setsid) holds stdout open
            proc.stdout.close()
            proc.wait()
            out = b"(the output was lost: a process that left the time limit's process group held it)"
    text = out.decode("utf-8", "replace")
    lines = ""
    if channel:
        reader.join(5)
        raw = got[0] if got else b""
        lines = raw.decode("utf-8", "replace")
        lines = "\n".join(_after_nonce(line, nonce) for line in lines.splitlines())
    return Result(proc.returncode, text, timed_out, lines)


def _read_all(fd):
    chunks = []
    while True:
        b = os.read(fd, 65536)
        if not b:
            break
        chunks.append(b)
        if sum(map(len, chunks)) > (1 << 20):  # a flood is not a verdict
            chunks.append(b"\n")
            break
    os.close(fd)
    return b"".join(chunks)


def _after_nonce(line, nonce):
    """A channel line without its nonce, or marked as forged when it does not start with it."""
    return line[len(nonce) + 1:] if line.startswith(nonce + " ") else "FORGED " + line[:200]


def sandbox_works():
    """None when bubblewrap can make a sandbox here, else why not (one line)."""
    if not shutil.which("bwrap"):
        return "bubblewrap (bwrap) is not installed (apt-get install bubblewrap)"
    probe = Sandbox([], True, 10, 1 * GiB)
    try:
        r = subprocess.run(probe.wrap(["true"]), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bwrap could not run: {e}"
    if r.returncode != 0:
        why = (r.stderr.strip().splitlines() or ["no message"])[-1]
        return f"bwrap cannot make a sandbox here ({why}; user namespaces may be off)"
    return None


# ---- building ------------------------------------------------------------------------------------

def nvcc_on_path():
    if not shutil.which("nvcc") and os.path.isdir("/usr/local/cuda/bin"):
        os.environ["PATH"] = "/usr/local/cuda/bin:" + os.environ["PATH"]


def configure(build_dir, box, exercises_dir=None):
    """None, or why build_dir could not be configured (one line)."""
    nvcc_on_path()
    cfg = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release"]
    if exercises_dir:
        cfg.append(f"-DKL_EXERCISES_DIR={exercises_dir}")
    limit = timeout("CONFIGURE", 300)
    r = run(cfg, box, limit)
    if r.timed_out:
        return f"cmake did not configure {build_dir} in {limit} s"
    if r.returncode != 0:
        return f"cmake could not configure {build_dir}: {first_error(r.out) or 'exit %d' % r.returncode}"
    return None


def first_error(log):
    """The compiler's first error line, without the build folder's path."""
    for line in log.splitlines():
        if re.search(r"\berror\b", line, re.I):
            return re.sub(r"\S*/(?=[^/\s]+:\d+)", "", line.strip())[:300]
    return None


def build(build_dir, lessons, kind, box, jobs=None):
    """Builds the <kind>NN_test of each lesson, one lesson at a time, so that a compiler error is
    told for its own lesson, with `jobs` compiler processes (default the CPU count); returns
    {lesson: why it did not build}."""
    errors = {}
    limit = timeout("BUILD", 900)
    jobs = str(jobs or os.cpu_count() or 2)
    for lesson in lessons:
        target = f"{kind}{lesson[:2]}_test"
        exe = binary(build_dir, lesson, kind)
        if os.path.exists(exe):  # a stale binary must never be graded
            os.remove(exe)
        print(f"grade: building {target} in {os.path.relpath(build_dir, ROOT)} ...", file=sys.stderr)
        r = run(["cmake", "--build", build_dir, "-j", jobs, "--target", target], box, limit)
        if r.timed_out:
            errors[lesson] = f"the build took over {limit} s"
        elif not os.path.exists(exe):
            errors[lesson] = first_error(r.out) or "the build failed"
    return errors


def binary(build_dir, lesson, kind):
    return os.path.join(build_dir, "lessons", lesson, f"{kind}{lesson[:2]}_test")


# ---- reading a test's verdict --------------------------------------------------------------------

def first_doctest_error(text):
    """The first failed assertion of a doctest run, on one line, without the file path."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "ERROR:" in line or "FATAL ERROR" in line:
            parts = [line.split("ERROR:", 1)[-1].strip()]
            for more in lines[i + 1:i + 4]:
                if not more.startswith("  "):
                    break
                parts.append(more.strip())
            return " ".join(parts)
    return None


def read_channel(text, ex_id, impl="exercise"):
    """What one run told on the grading channel: {"end": rc or None, "nogpu": bool, "check", "speed",
    "skip": text or None}, or a string saying why it cannot be believed (a forged line, a line twice,
    two answers to one question). impl: whose verdicts count, "exercise" (exerciseNN_test, the files
    graded) or "solution" (solutionNN_test, under --solutions)."""
    seen, out = set(), {"end": None, "nogpu": False, "check": None, "speed": None, "skip": None}
    lines = [line for line in text.splitlines() if line]
    for n, line in enumerate(lines):
        if line.startswith("FORGED "):
            return "a line on the grading channel that the grader did not write"
        if line in seen:
            return f"the line '{line[:80]}' came twice on the grading channel"
        seen.add(line)
        if line == "nogpu":
            out["nogpu"] = True
            continue
        m = re.fullmatch(r"end (-?\d+)", line)
        if m:
            if out["end"] is not None or n != len(lines) - 1:
                return "the grading channel goes on after its end"
            out["end"] = int(m.group(1))
            continue
        m = re.fullmatch(r"(\S+) (\S+) (check|speed|skip) (.*)", line)
        if not m:
            return f"an unknown line on the grading channel: '{line[:80]}'"
        if m.group(1) != ex_id or m.group(2) != impl:
            continue  # another exercise's or a wrong variant's line
        if out[m.group(3)] is not None:
            return f"two {m.group(3)} verdicts for {ex_id} on the grading channel"
        out[m.group(3)] = m.group(4)
    return out


def grade_one(ex, exe, box, cpu_only, impl="exercise"):
    """{verdict: PASS | FAIL | NOT GRADED, detail, ratio, ms, solution_ms, hint}."""
    out = {"verdict": None, "detail": "", "ratio": "", "ms": "", "solution_ms": "", "hint": ""}
    hints = ex.get("hints", {})
    pattern = f"-tc=exercise {ex['id']}*"

    def fail(detail, hint="check"):
        out.update(verdict="FAIL", detail=detail, hint=hints.get(hint, ""))
        return out

    limit = timeout("CPU", 120)
    cpu = run([exe, pattern], box, limit, channel=True)
    if cpu.timed_out:
        return fail(f"CPU part: still running after {limit} s (a loop that never ends?)")
    told = read_channel(cpu.channel, ex["id"], impl)
    if isinstance(told, str):
        return fail(f"CPU part: {told}")
    if told["end"] is None:
        return fail(f"CPU part: the test stopped before its end (exit {cpu.returncode})")
    if cpu.returncode != 0 or told["end"] != 0:
        err = first_doctest_error(cpu.out) or f"the CPU test exited with {cpu.returncode}"
        return fail(f"CPU part: {err}")
    has_cpu = re.search(r"test cases:\s*[1-9]", cpu.out) is not None
    passes = " (its CPU part passes)" if has_cpu else ""
    if cpu_only:
        out.update(verdict="NOT GRADED", detail="no GPU" + passes)
        return out
    limit = timeout("GPU", 600)
    gpu = run([exe, "--gpu", pattern], box, limit, channel=True)
    if gpu.timed_out:
        return fail(f"still running after {limit} s (a kernel that never ends?)")
    told = read_channel(gpu.channel, ex["id"], impl)
    if isinstance(told, str):
        return fail(told)
    if told["nogpu"] and gpu.returncode == 77:
        out.update(verdict="NOT GRADED", detail="no GPU" + passes)
        return out
    if told["end"] is None:
        err = first_doctest_error(gpu.out) or gpu.out.strip()[-300:]
        return fail(f"the test stopped before its end (exit {gpu.returncode}): {err}")
    if told["skip"] is not None and told["check"] is None:
        out.update(verdict="NOT GRADED", detail=told["skip"] + passes)
        return out
    if told["check"] is None:
        err = first_doctest_error(gpu.out) or gpu.out.strip()[-300:]
        return fail(f"the test stopped before a verdict: {err}")
    if told["check"].startswith("FAIL"):
        return fail(told["check"][4:].strip())
    m = re.fullmatch(r"([\d.]+|nan|inf) ([\d.]+|nan|inf) ([\d.]+|nan|inf)", told["speed"] or "")
    if not m:
        return fail(f"right on every case, but its speed was not measured ({told['speed'] or 'no speed line'})",
                    "speed")
    ratio, ms, sol = (float(g) for g in m.groups())
    out.update(ratio=f"{ratio:.2f}", ms=f"{ms:.4f}", solution_ms=f"{sol:.4f}")
    times = f"{ms:.4g} ms against the solution's {sol:.4g} ms"
    if not ratio >= BAR:
        fail(f"right, but {ratio:.2f}x the solution's speed ({times}); the bar is {BAR:.2f}x", "speed")
        out["diagnosis"] = diagnose(ex, exe, box)
        return out
    if gpu.returncode != 0 or told["end"] != 0:
        return fail(first_doctest_error(gpu.out) or f"exit {gpu.returncode}")
    out.update(verdict="PASS", detail=f"{ratio:.2f}x the solution's speed ({times})")
    return out


def diagnose(ex, exe, box):
    """Why a right but slow submission is slow, as the hardware saw it: its kernels and the solution's,
    each run once under Nsight Compute at the timed size (KL_GRADE_PROFILE, common/grade.cuh), and the
    three quantities that differ most (plots/profile_table.py). Lines to print after the verdict; one
    line saying why when the profiler cannot run (no ncu, or no permission to read the counters)."""
    ncu = shutil.which("ncu") or next((p for p in ("/usr/local/cuda/bin/ncu",) if os.access(p, os.X_OK)), None)
    if not ncu:
        return ["diagnosis skipped: no ncu (Nsight Compute, in the CUDA Toolkit's bin/) on the PATH"]
    metrics = profile_table.ncu_metrics(ncu)
    if not metrics:
        return ["diagnosis skipped: ncu --query-metrics lists none of scripts/ncu_metrics.txt (no GPU it knows?)"]
    sides = {}
    for side in ("mine", "solution"):
        cmd = [ncu, "--profile-from-start", "off", "--clock-control", "none", "--csv", "--page", "raw",
               "--print-units", "base", "--metrics", metrics, exe, "--gpu", f"-tc=exercise {ex['id']}*"]
        r = run(cmd, box, timeout("GPU", 600), env={"KL_GRADE_PROFILE": side})
        if "ERR_NVGPUCTRPERM" in r.out:
            return ["diagnosis skipped: ncu may not read the GPU's counters here (ERR_NVGPUCTRPERM; as root, or "
                    "with the driver option NVreg_RestrictProfilingToAdminUsers=0, it can)"]
        launches = profile_table.parse_raw(r.out)[4]
        if r.timed_out or not launches:
            return [f"diagnosis skipped: ncu profiled no kernel of the {'submission' if side == 'mine' else side}"
                    f" (exit {r.returncode}{', timed out' if r.timed_out else ''})"]
        sides[side] = profile_table.combined([profile_table.kernel_row("", "", "", "", "", m) for m in launches])
    lines = profile_table.differences(sides["mine"], sides["solution"])[:3]
    return ["the profiler (ncu, at the timed size), yours vs the solution's:"] + [f"  {line}" for line in lines]


def has_gpu():
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def print_verdict(ex, v):
    head = f"{ex['id']}  {ex['title']:<34} "
    word = v["verdict"] + (":" if v["verdict"] == "NOT GRADED" else "")
    print(f"{head}{word} {v['detail']}".rstrip(), flush=True)
    if v["verdict"] == "FAIL" and v.get("hint"):
        print(f"{'':{len(head)}}hint: {v['hint']}", flush=True)
    for line in v.get("diagnosis", []):
        print(f"{'':{len(head)}}{line}", flush=True)


def verdict_fail(detail):
    return {"verdict": "FAIL", "detail": detail, "ratio": "", "ms": "", "solution_ms": "", "hint": ""}


def build_tree(exercises, build_dir, kind, exercises_dir, box, refused=None, jobs=None):
    """Configures and builds the tests of the lessons that have an exercise not refused; returns
    {lesson: why it was not built}."""
    refused = refused or {}
    lessons = sorted({e["lesson"] for e in exercises if e["id"] not in refused})  # nothing to build for the rest
    if not lessons:
        return {}
    why = configure(build_dir, box, exercises_dir)
    if why:
        return {lesson: f"not built: {why}" for lesson in lessons}
    failed = build(build_dir, lessons, kind, box, jobs)
    return {lesson: f"does not compile: {e}" for lesson, e in failed.items()}


def grade_tree(exercises, build_dir, kind, exercises_dir, no_build, gpu, box, refused=None, on_verdict=None,
               errors=None):
    """Builds (unless no_build, or errors: what an earlier build_tree returned) and grades; refused:
    {exercise id: why its file was turned down}."""
    refused = refused or {}
    if errors is None:
        errors = {} if no_build else build_tree(exercises, build_dir, kind, exercises_dir, box, refused)
    verdicts = []
    for ex in exercises:
        exe = binary(build_dir, ex["lesson"], kind)
        if ex["id"] in refused:
            v = verdict_fail(f"refused: {refused[ex['id']]}")
        elif ex["lesson"] in errors:
            v = verdict_fail(errors[ex["lesson"]])
        elif not os.path.exists(exe):
            refuse(f"{os.path.relpath(exe, ROOT)} is not built (run without --no-build)")
        else:
            v = grade_one(ex, exe, box, cpu_only=not gpu, impl=kind)
        print_verdict(ex, v)
        if on_verdict:
            on_verdict(ex, v)
        verdicts.append(v)
    return verdicts


def status(verdicts):
    if any(v["verdict"] == "FAIL" for v in verdicts):
        return 1
    if any(v["verdict"] == "NOT GRADED" for v in verdicts):
        return 77
    return 0


# ---- a class -------------------------------------------------------------------------------------

def csv_cell(value):
    """A cell a spreadsheet shows as text: control characters dropped, and a leading = + - @ (which
    would make it a formula) escaped with a quote."""
    text = re.sub(r"[\x00-\x1f\x7f]", "", str(value))
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def check_csv_path(path):
    """Refuses a CSV path that cannot take the verdicts, before anything is graded."""
    shown = path
    if os.path.lexists(path):
        st = os.stat(path) if os.path.exists(path) else None
        if st is None or not stat.S_ISREG(st.st_mode):
            refuse(f"--csv {shown}: not a regular file (a folder, a pipe or a device cannot hold the verdicts)")
        if not os.access(path, os.W_OK):
            refuse(f"--csv {shown}: not writable")
        return
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        refuse(f"--csv {shown}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        refuse(f"--csv {shown}: cannot create a file in {parent}")


def safe_name(name, taken):
    """A folder name the build can take: letters, digits, _ . - only, not starting with . or -, and
    not one already given to another student."""
    base = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    base = re.sub(r"^[.-]", "_", base)[:80] or "_"
    safe, n = base, 2
    while safe in taken:
        safe, n = f"{base}-{n}", n + 1
    taken.add(safe)
    return safe


def fresh_copy(folder, dest, exercises):
    """Copies into dest/NN_name/ only the files exercises.json lists, each from the student's folder
    when handed in (a regular file, not a link) and accepted by grade_lint, else from the skeleton.
    Returns {exercise id: why the student's file was refused}."""
    if os.path.isdir(dest):
        shutil.rmtree(dest)
    refused = {}
    for lesson in sorted({e["lesson"] for e in exercises}):
        os.makedirs(os.path.join(dest, lesson))
        for ex in load_exercises():
            if ex["lesson"] != lesson:
                continue
            name = ex["file"]
            src = os.path.join(folder, lesson, name)
            skeleton = os.path.join(ROOT, "exercises", lesson, name)
            use = skeleton
            inside = os.path.realpath(src).startswith(os.path.realpath(folder) + os.sep)
            if os.path.lexists(src) and (os.path.islink(src) or not inside):
                refused[ex["id"]] = f"{lesson}/{name} is a link, not a file of the submission"
            elif os.path.isfile(src):
                try:
                    with open(src, encoding="utf-8", errors="replace") as f:
                        why = grade_lint.refusal(f.read())
                except OSError as e:
                    why = f"cannot read {lesson}/{name}: {e.strerror}"
                if why:
                    refused[ex["id"]] = why
                else:
                    use = src
            shutil.copyfile(use, os.path.join(dest, lesson, name))
    return refused


def grade_class(args, exercises, gpu):
    top = os.path.abspath(args.submissions)
    if not os.path.isdir(top):
        refuse(f"--submissions {args.submissions}: not a folder")
    why = sandbox_works()
    if why and not args.unsafe:
        refuse(f"cannot isolate the students' code: {why}; give --unsafe to grade without a sandbox")
    csv_path = os.path.abspath(args.csv or os.path.join(top, "grades.csv"))
    check_csv_path(csv_path)
    entries = sorted(os.listdir(top))
    dotted = [d for d in entries if d.startswith(".") and os.path.isdir(os.path.join(top, d))]
    links = [d for d in entries if not d.startswith(".") and os.path.islink(os.path.join(top, d))]
    students = [d for d in entries if not d.startswith(".") and d not in links
                and os.path.isdir(os.path.join(top, d)) and os.path.join(top, d) != csv_path]
    if not students:
        refuse(f"--submissions {args.submissions}: no sub-folders (one per student)")
    build_root = os.path.abspath(os.environ.get("KL_GRADE_BUILD_ROOT") or os.path.join(build_base(), "grade"))
    if why:
        print(f"grade: --unsafe: {why}; the students' code runs unconfined, as this user", file=sys.stderr)
    for d in dotted:
        print(f"grade: skipping {d!r}: a folder whose name starts with '.' is not a student's", file=sys.stderr)
    for d in links:
        print(f"grade: skipping {d!r}: a link, not a folder of the submissions", file=sys.stderr)
    if not gpu:
        print(f"grade: {'--cpu-only' if args.cpu_only else 'no NVIDIA GPU here'}: only the parts that need no GPU "
              "are graded", file=sys.stderr)
    os.makedirs(build_root, exist_ok=True)
    taken, subs = set(), []
    for name in students:
        folder = os.path.join(top, name)
        if os.path.isdir(os.path.join(folder, "exercises")):  # a copy of the whole repository
            folder = os.path.join(folder, "exercises")
        safe = safe_name(name, taken)
        student_dir = os.path.join(build_root, safe)
        os.makedirs(student_dir, exist_ok=True)
        src = os.path.join(student_dir, "src")
        refused = fresh_copy(folder, src, exercises)
        box = Sandbox([student_dir], why is None, cpu_s=3600, data_bytes=24 * GiB)
        subs.append((name, safe, os.path.join(student_dir, "build"), src, refused, box))
    errors = [None] * len(subs) if args.no_build else build_class(exercises, subs)
    worst = 0
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "exercise", "verdict", "speed_vs_solution", "ms", "solution_ms", "detail"])
        f.flush()
        for (name, safe, build_dir, src, refused, box), built in zip(subs, errors):
            print(f"\n== {safe}" + ("" if safe == name else f"  (folder {name!r})"), flush=True)

            def on_verdict(ex, v, name=name):
                w.writerow([csv_cell(c) for c in (name, ex["id"], v["verdict"], v["ratio"], v["ms"],
                                                  v["solution_ms"], v["detail"])])
                f.flush()

            verdicts = grade_tree(exercises, build_dir, "exercise", src, args.no_build, gpu, box, refused, on_verdict,
                                  built)
            s = status(verdicts)
            worst = s if s == 1 or worst == 0 else worst
    print(f"\ngrade: {len(students)} submissions, verdicts in {csv_path}")
    return worst


def _build_student(job):
    exercises, build_dir, src, refused, box, jobs = job
    return build_tree(exercises, build_dir, "exercise", src, box, refused, jobs)


def build_class(exercises, subs):
    """Every student's build_tree, KL_GRADE_JOBS (default the CPU count) at a time, each build with its
    share of the CPUs; returns their errors in the students' order. Forked worker processes: the
    sandbox's limits are set between fork and exec, which a process with threads must not do."""
    cpus = os.cpu_count() or 2
    workers = max(1, min(len(subs), build_jobs()))
    jobs = [(exercises, build_dir, src, refused, box, max(1, cpus // workers))
            for _, _, build_dir, src, refused, box in subs]
    nvcc_on_path()
    if workers == 1:
        return [_build_student(j) for j in jobs]
    print(f"grade: building {len(subs)} submissions, {workers} at a time", file=sys.stderr, flush=True)
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return pool.map(_build_student, jobs, chunksize=1)


def build_base():
    return os.environ.get("KL_BUILD_ROOT") or os.path.join(ROOT, "build")


def main():
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("exercises", nargs="*", help="NN (a lesson's exercises) or NN.k (one exercise); default all")
    ap.add_argument("--solutions", action="store_true", help="grade solutions/ instead of exercises/")
    ap.add_argument("--submissions", metavar="DIR",
                    help="grade every sub-folder of DIR: a student's copy of exercises/ (NN_name/ folders)")
    ap.add_argument("--csv", metavar="FILE", help="with --submissions: the verdicts' CSV (default DIR/grades.csv)")
    ap.add_argument("--unsafe", action="store_true",
                    help="with --submissions: grade without a sandbox when bubblewrap cannot make one")
    ap.add_argument("--build-dir", help="the build folder (default $KL_BUILD_ROOT/release, or build/release)")
    ap.add_argument("--no-build", action="store_true", help="grade what build-dir holds, without building")
    ap.add_argument("--cpu-only", action="store_true", help="grade only the parts that need no GPU, as without one")
    args = ap.parse_args()
    if args.csv and not args.submissions:
        refuse("--csv goes with --submissions")
    if args.unsafe and not args.submissions:
        refuse("--unsafe goes with --submissions")
    for name in ("CONFIGURE", "BUILD", "CPU", "GPU"):
        timeout(name, 1)
    build_jobs()
    exercises = select(load_exercises(), args.exercises)
    gpu = not args.cpu_only and has_gpu()
    if args.submissions:
        return grade_class(args, exercises, gpu)
    if not gpu:
        why = "--cpu-only" if args.cpu_only else "no NVIDIA GPU here"
        print(f"grade: {why}: only the parts that need no GPU are graded", file=sys.stderr)
    kind = "solution" if args.solutions else "exercise"
    build_dir = os.path.abspath(args.build_dir or os.path.join(build_base(), "release"))
    box = Sandbox([], False, cpu_s=3600, data_bytes=None)  # a student's own tree: time limits only
    return status(grade_tree(exercises, build_dir, kind, None, args.no_build, gpu, box))


if __name__ == "__main__":
    sys.exit(main())
