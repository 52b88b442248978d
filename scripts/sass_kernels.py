#!/usr/bin/env python3
"""Kernel-by-kernel comparison of two sets of cuobjdump dumps (the helper of sass_diff.sh).

    sass_kernels.py [--map FILE] [--base-label L] [--head-label L] BASE_DIR HEAD_DIR DIFF_DIR

Each DIR holds, per executable X, X.sass.gz (cuobjdump -sass) and X.res (cuobjdump -res-usage).
Prints one line per kernel and the totals, writes the unified diff of each differing kernel
into DIFF_DIR, and exits 0 when all kernels match and are identical, 1 otherwise.

A kernel is keyed by its demangled name. The same kernel usually sits in several executables
(lessonNN and lessonNN_test) with the same code: those copies form one "variant", reported once
with the executables listed. Variants of BASE and HEAD pair up when they are identical, else
when they share an executable, else in order; a variant left over is ONLY-BASE / ONLY-HEAD.
"""
import argparse
import difflib
import gzip
import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

RESOURCES = ("REG", "SHARED", "STACK", "LOCAL")  # what -res-usage says that the SASS may not show
FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]+\*/\s*(.*?)\s*/\*\s*(0x[0-9a-f]+)\s*\*/\s*$")
ENCODING = re.compile(r"^\s*/\*\s*(0x[0-9a-f]+)\s*\*/\s*$")
RES_FUNCTION = re.compile(r"^\s*Function\s+(\S+):\s*$")
RES_FIELD = re.compile(r"([A-Z_]+(?:\[\d+\])?):(\d+)")


def split_sass(text):
    """cuobjdump -sass -> {mangled: [instruction lines]}. Only instructions are kept (headers,
    file names and .headerflags are dropped), one line each: the text, then its encoding words."""
    kernels, current = {}, None
    for line in text.splitlines():
        if m := FUNCTION.match(line):
            current = kernels.setdefault(m.group(1), [])
            if current:  # the same kernel in a second cubin of the executable: keep both, apart
                current.append("# --- next copy ---")
        elif current is not None and (m := INSTRUCTION.match(line)):
            current.append(f"{m.group(1):<60} # {m.group(2)}")
        elif current is not None and (m := ENCODING.match(line)) and current:
            current[-1] += f" {m.group(1)}"
    return kernels


def split_res(text):
    """cuobjdump -res-usage -> {mangled: {"REG": 32, ...}}."""
    usage, current = {}, None
    for line in text.splitlines():
        if m := RES_FUNCTION.match(line):
            current = m.group(1)
        elif current and (fields := dict(RES_FIELD.findall(line))):
            usage[current] = {k: int(fields.get(k, 0)) for k in RESOURCES}
            current = None
    return usage


def demangle(names):
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    out = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True, check=True)
    return dict(zip(names, out.stdout.splitlines()))


class Variant:
    def __init__(self, sass, res):
        self.sass, self.res, self.exes = sass, res, []
        self.key = hashlib.sha1(("\n".join(sass) + repr(res)).encode()).hexdigest()


def load_side(folder):
    """{demangled name: [Variant]} over every executable dumped in folder."""
    raw = []
    for res_file in sorted(Path(folder).glob("*.res")):
        exe = res_file.stem
        res = split_res(res_file.read_text())
        with gzip.open(res_file.with_suffix(".sass.gz"), "rt") as f:
            kernels = split_sass(f.read())
        for mangled, sass in kernels.items():
            raw.append((exe, mangled, sass, res.get(mangled, {})))
    names = demangle(sorted({r[1] for r in raw}))
    side = {}
    for exe, mangled, sass, res in raw:
        variants = side.setdefault(names[mangled], [])
        v = Variant(sass, res)
        same = next((w for w in variants if w.key == v.key), None)
        if same is None:
            variants.append(v)
            same = v
        same.exes.append(exe)
    return side


def bad_map(line):
    print(f"sass_kernels: bad --map line (want OLD<TAB>NEW or s/REGEX/REPL/): {line}", file=sys.stderr)
    sys.exit(2)


def read_map(path):
    """Lines 'OLD<TAB>NEW' (exact names) and 's/REGEX/REPL/' (applied to BASE names)."""
    exact, rules = {}, []
    for line in Path(path).read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if "\t" in line:
            old, new = line.split("\t", 1)
            exact[old.strip()] = new.strip()
        elif len(line) > 2 and line[0] == "s":
            parts = line[2:].split(line[1])
            if len(parts) < 2:
                bad_map(line)
            rules.append((re.compile(parts[0]), parts[1]))
        else:
            bad_map(line)
    return exact, rules


def match_names(base, head, mapping):
    """[(base name or None, head name or None)]: exact names first, then the map."""
    pairs = [(n, n) for n in base if n in head]
    left_b = [n for n in base if n not in head]
    left_h = set(head) - set(base)
    exact, rules = mapping
    for name in left_b:
        new = exact.get(name, name)
        for regex, repl in rules:
            new = regex.sub(repl, new)
        if new in left_h:
            left_h.discard(new)
            pairs.append((name, new))
        else:
            pairs.append((name, None))
    return pairs + [(None, n) for n in sorted(left_h)]


def pair_variants(vb, vh):
    """[(base Variant or None, head Variant or None)] for one kernel name."""
    pairs, left_h = [], list(vh)
    left_b = []
    for b in vb:
        h = next((h for h in left_h if h.key == b.key), None)
        if h:
            left_h.remove(h)
            pairs.append((b, h))
        else:
            left_b.append(b)
    for b in left_b:  # a changed variant: compare with the HEAD variant of the same executable
        h = next((h for h in vh if set(h.exes) & set(b.exes)), None) or (left_h[0] if left_h else None)
        if h in left_h:
            left_h.remove(h)
        pairs.append((b, h))
    for h in left_h:
        b = next((b for b in vb if set(b.exes) & set(h.exes)), None)
        pairs.append((b, h))
    return pairs


def resource_change(b, h):
    return ", ".join(f"{k} {b.res.get(k)}->{h.res.get(k)}" for k in RESOURCES if b.res.get(k) != h.res.get(k))


def compare(name_b, b, name_h, h, diff_dir, labels):
    """One row of the table: (status, name, executables, detail)."""
    name = name_b if name_b == name_h else f"{name_b}  =>  {name_h}" if name_b and name_h else name_b or name_h
    if h is None:
        return "ONLY-BASE", name, b.exes, ""
    if b is None:
        return "ONLY-HEAD", name, h.exes, ""
    both = [e for e in b.exes if e in h.exes]  # where this pair was compared
    exes = both or [*b.exes, "=>", *h.exes]
    res = resource_change(b, h)
    if b.sass == h.sass:
        return ("RESOURCES", name, exes, res) if res else ("IDENTICAL", name, exes, "")
    diff = list(difflib.unified_diff(b.sass, h.sass, f"{labels[0]}: {name_b}", f"{labels[1]}: {name_h}", lineterm=""))
    plus = sum(1 for d in diff[2:] if d.startswith("+"))
    minus = sum(1 for d in diff[2:] if d.startswith("-"))
    bare = re.sub(r"^void ", "", (name_h or name_b).split("(")[0])  # "void ns::k<4>(int)" -> "ns::k<4>"
    stem = re.sub(r"[^A-Za-z0-9_]+", "_", bare)[:60].strip("_")
    path = Path(diff_dir) / f"{stem}.{hashlib.sha1((name + b.key + h.key).encode()).hexdigest()[:8]}.diff"
    path.parent.mkdir(parents=True, exist_ok=True)
    header = [f"# executables: {' '.join(exes)}", f"# resources: {res or 'unchanged'}"]
    path.write_text("\n".join(header + diff) + "\n")
    detail = f"+{plus} -{minus} lines" + (f"; {res}" if res else "") + f"; {path}"
    return "DIFFERENT", name, exes, detail


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--map")
    ap.add_argument("--base-label", default="BASE")
    ap.add_argument("--head-label", default="HEAD")
    ap.add_argument("base_dir")
    ap.add_argument("head_dir")
    ap.add_argument("diff_dir")
    args = ap.parse_args()
    base, head = load_side(args.base_dir), load_side(args.head_dir)
    mapping = read_map(args.map) if args.map else ({}, [])
    rows = []
    for name_b, name_h in match_names(base, head, mapping):
        for b, h in pair_variants(base.get(name_b, []), head.get(name_h, [])):
            rows.append(compare(name_b, b, name_h, h, args.diff_dir, (args.base_label, args.head_label)))
    order = ["DIFFERENT", "RESOURCES", "ONLY-BASE", "ONLY-HEAD", "IDENTICAL"]
    rows.sort(key=lambda r: (order.index(r[0]), r[1]))
    print(f"BASE = {args.base_label}, HEAD = {args.head_label}")
    exes_b, exes_h = ({p.stem for p in Path(d).glob("*.res")} for d in (args.base_dir, args.head_dir))
    for label, only in (("BASE", exes_b - exes_h), ("HEAD", exes_h - exes_b)):
        if only:
            print(f"executables only in {label}: {' '.join(sorted(only))}")
    for status, name, exes, detail in rows:
        print(f"{status:<10} {name}  [{' '.join(exes)}]" + (f"  {detail}" if detail else ""))
    counts = {s: sum(1 for r in rows if r[0] == s) for s in order}
    print("total: " + ", ".join(f"{counts[s]} {s.lower()}" for s in order) + f" ({len(rows)} kernels)")
    if not rows:
        print("no kernels found: nothing was compared")
    return 0 if rows and counts["IDENTICAL"] == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
