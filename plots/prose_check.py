"""prose_check.py [FILE.md ...]: the checks a reader's trust needs that the tables' generator cannot
give. With no argument it checks the course's text: README.md, GLOSSARY.md, CONTRIBUTING.md,
exercises/README.md and every lessons/*/README.md and lessons/*/NOTES.md. Each problem is printed as
FILE:LINE: what; the exit code is 1 when there is any, else 0.

What it checks, outside fenced code blocks and inline code:
- empty heading: a heading followed by nothing, or directly by a heading of the same or a higher level;
- a paragraph that starts mid-sentence: its first character is a lower-case letter;
- a NOTES.md that sends the reader to NOTES.md (itself) rather than to another lesson's notes;
- tracker talk: "the issue", "the target quotes", "session", "ticket #N", "the review";
- every relative link and image resolves to a file of the repository, and every #anchor to a heading
  of that file (GitHub's rule: lower case, punctuation dropped, spaces to hyphens);
- every term of TERMS (the lessons' technical words) has an entry in GLOSSARY.md: a heading, or a term
  set in bold inside an entry;
- a lesson README's core, the lines before its first "## Appendix" heading, is at most CORE_LINES long.
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORE_LINES = 300

# The technical words of the lessons that a student may not know; each needs a glossary entry.
TERMS = [
    "thread", "warp", "lane", "block", "grid", "thread-block cluster", "SM", "compute capability",
    "dispatcher", "register", "global memory", "HBM", "L2", "coalescing", "vector load", "bandwidth",
    "latency", "Little's law", "ILP", "occupancy", "shared memory", "bank conflict", "wavefront", "swizzle",
    "cp.async", "TMA", "mbarrier", "FMA", "SFU", "bf16", "tensor core", "WMMA", "mma.sync", "ldmatrix",
    "warpgroup", "wgmma", "TMA multicast", "persistent kernel", "power limit", "atomic", "warp shuffle", "reduction tree", "grid-stride loop", "online softmax",
    "top-K", "bitonic sort", "split-K", "warp specialisation", "setmaxnreg", "epilogue", "GELU",
    "Kahan summation", "memory fence", "quad", "roofline", "TFLOP/s", "L2 flush", "CUDA graph",
    "issue slot", "long scoreboard", "short scoreboard", "MIO throttle", "PTX", "SASS", "JIT",
    "Nsight Compute", "compute-sanitizer", "all-reduce", "reduce-scatter", "all-gather", "ring all-reduce",
    "NVLink", "peer access", "bus bandwidth", "NCCL",
]

TRACKER_TALK = [
    (re.compile(r"\bthe issue\b(?! (?:slot|rate|queue|width|of the|stage))", re.I), "tracker talk: 'the issue'"),
    (re.compile(r"\bthe target quotes\b", re.I), "tracker talk: 'the target quotes'"),
    (re.compile(r"\bsessions?\b", re.I), "tracker talk: 'session'"),
    (re.compile(r"\b(?:ticket|issue) #\d+", re.I), "tracker talk: a ticket number"),
    (re.compile(r"\bthe review\b", re.I), "tracker talk: 'the review'"),
]

HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^()\s]+(?:\([^()]*\))?[^()\s]*)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
MARKER = re.compile(r"<!--.*?-->")


def default_files():
    names = ["README.md", "GLOSSARY.md", "CONTRIBUTING.md", "exercises/README.md"]
    names += sorted(glob.glob("lessons/*/README.md", root_dir=ROOT)) + sorted(glob.glob("lessons/*/NOTES.md", root_dir=ROOT))
    return [os.path.join(ROOT, n) for n in names if os.path.exists(os.path.join(ROOT, n))]


def prose_lines(text):
    """(line number, line) for each line outside fenced code blocks, with inline code and comments
    (generator markers) blanked, so that neither is read as prose."""
    out, fenced = [], False
    for i, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line) or fenced:
            fenced = fenced != bool(FENCE.match(line))
            out.append((i, None))  # None: code, neither prose nor blank
            continue
        if line.startswith("    ") and not line.lstrip().startswith(("-", "*", "|")):
            out.append((i, None))  # an indented code block
            continue
        out.append((i, MARKER.sub("", line)))
    return out


# Names that are written in lower case at the start of a sentence too.
LOWER_CASE_NAMES = {"ncu", "nvcc", "nsys", "ptxas", "cmake", "ctest", "pip"}


def starts_mid_sentence(paragraph):
    """True when a paragraph's first word is an ordinary lower-case word: not a name written in lower
    case (cuDNN, cuBLAS, f16, mma.sync, ncu), which may begin a sentence."""
    word = re.match(r"[^\s,;:()]+", paragraph).group(0)
    if not re.match(r"[a-z]", word) or word in LOWER_CASE_NAMES:
        return False
    return not re.search(r"[A-Z0-9._]", word)


def strip_code(line):
    return re.sub(r"`[^`]*`", "`code`", line)


def slug(heading):
    """GitHub's anchor for a heading: link text kept, lower case, punctuation dropped, spaces to hyphens."""
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    h = h.replace("`", "").strip().lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path, cache={}):
    """The anchors of a Markdown file's headings, with GitHub's -1, -2 suffixes for repeats."""
    if path not in cache:
        seen, result = {}, set()
        with open(path, encoding="utf-8") as f:
            for _, line in prose_lines(f.read()):
                m = HEADING.match(line or "")
                if m:
                    s = slug(m.group(2))
                    n = seen.get(s, 0)
                    result.add(s if n == 0 else f"{s}-{n}")
                    seen[s] = n + 1
        cache[path] = result
    return cache[path]


def glossary_entries(path):
    """The lower-cased names a glossary defines: its headings and the terms set in bold in its entries."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    names = [m.group(2) for m in (HEADING.match(l) for l in text.split("\n")) if m]
    body = text.split("\n## ", 1)[-1]  # the entries, not the index at the top
    names += re.findall(r"\*\*([^*]+)\*\*", body)
    return [n.lower() for n in names]


def missing_terms(glossary, terms=TERMS):
    entries = glossary_entries(glossary)
    return [t for t in terms if not any(t.lower() in e for e in entries)]


def check_text(path, text, root=ROOT):
    """The problems of one Markdown file: (line, message)."""
    problems = []
    lines = prose_lines(text)
    is_notes = os.path.basename(path) == "NOTES.md"
    # empty headings
    for k, (i, line) in enumerate(lines):
        m = HEADING.match(line or "")
        if not m:
            continue
        level = len(m.group(1))
        nxt = next(((j, l) for j, l in lines[k + 1:] if l is None or l.strip()), None)
        if nxt is None:
            problems.append((i, f"empty heading: '{m.group(2)}' has nothing under it"))
            continue
        n = HEADING.match(nxt[1] or "")
        if n and len(n.group(1)) <= level:
            problems.append((i, f"empty heading: '{m.group(2)}' is followed directly by '{n.group(2)}'"))
    # paragraphs that start mid-sentence (a sentence may go on after a code block or a formula)
    prev_blank, after_code = True, False
    for i, line in lines:
        if line is None:
            prev_blank, after_code = False, True
            continue
        stripped = line.strip()
        if not stripped:
            prev_blank = True
            continue
        if prev_blank and not after_code and not HEADING.match(line) and starts_mid_sentence(stripped):
            problems.append((i, f"a paragraph starts mid-sentence: '{stripped[:50]}'"))
        prev_blank, after_code = False, False
    # self-reference, tracker talk, links
    for i, line in lines:
        if not line:
            continue
        prose = strip_code(line)
        if is_notes and re.search(r"(?<![/\w])NOTES\.md", prose):
            problems.append((i, "NOTES.md refers to NOTES.md, that is to itself"))
        for pattern, message in TRACKER_TALK:
            if pattern.search(prose):
                problems.append((i, message))
        for m in LINK.finditer(prose):
            target = m.group(2)
            if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(dest):
                problems.append((i, f"broken link: {target} ({os.path.relpath(dest, root)} does not exist)"))
                continue
            if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                problems.append((i, f"broken anchor: {target} (no such heading in {os.path.relpath(dest, root)})"))
    # the one-sitting core of a lesson README
    parent = os.path.basename(os.path.dirname(os.path.abspath(path)))
    if os.path.basename(path) == "README.md" and re.match(r"\d\d_", parent):
        core = next((i - 1 for i, l in lines if l and re.match(r"##\s+Appendix", l)), len(text.rstrip("\n").split("\n")))
        if core > CORE_LINES:
            problems.append((1, f"the lesson's core is {core} lines (at most {CORE_LINES} before '## Appendix')"))
    return problems


def main(paths, root=ROOT, glossary=None):
    count = 0
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line, message in check_text(path, f.read(), root):
                print(f"{os.path.relpath(path, root)}:{line}: {message}")
                count += 1
    glossary = glossary or os.path.join(root, "GLOSSARY.md")
    for term in missing_terms(glossary):
        print(f"{os.path.relpath(glossary, root)}: no entry for '{term}' (prose_check.TERMS)")
        count += 1
    print(f"prose_check: {len(paths)} files, {count} problems")
    return 1 if count else 0


if __name__ == "__main__":
    sys.exit(main([os.path.abspath(p) for p in sys.argv[1:]] or default_files()))
