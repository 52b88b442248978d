"""What a student's exercise file may contain before it is compiled into the grader's test.

The test includes each graded file inside `namespace graded { ... }`, in the same translation unit as
the checks and the race (exercises/NN_name/test.cu). A file could therefore rewrite the grader: a
macro that redefines CHECK or verdict, a `}` that leaves the namespace and includes the solution, an
object whose constructor runs before main and prints a verdict. refusal() turns such a file down
before it is built, with one line saying why; the grade is then a FAIL, and the skeleton takes the
file's place so that the lesson's other exercise is still graded.

Allowed: functions, kernels, types, templates, `using`, `constexpr` constants and device variables;
`#pragma once`, `#pragma unroll`, and `#include` of the repository's common/ and lessons/ headers and
of a short list of standard and CUDA headers. Refused: every other preprocessor directive, digraphs,
backslashes outside literals, attributes, inline assembly, namespaces, file-scope variables that are
not constant (static initialisers), `extern` other than `extern __shared__`, unbalanced braces, and
the names through which code reaches the grader, the environment, files or the process (grade,
doctest, getenv, setenv, exit, write, fopen, system, ...).
"""
import re

MAX_BYTES = 200_000

INCLUDE_OK = [
    re.compile(r'"common/[a-z0-9_]+\.(cuh|hpp|h)"'),
    re.compile(r'"lessons/\d\d_[a-z0-9_]+/[a-z0-9_]+\.(cuh|hpp|h)"'),
    re.compile(r"<(cstddef|cstdint|cmath|cfloat|climits|cstdio|algorithm|array|limits|type_traits|utility|"
               r"cuda_fp16\.h|cuda_bf16\.h|cuda_runtime\.h|mma\.h|cuda_pipeline\.h|cooperative_groups\.h|"
               r"cuda/barrier|cuda/pipeline|cuda/ptx)>"),
]

# Names that reach the grader, the environment, files, other processes or the end of the process.
BANNED = set("""
grade doctest channel main
exit _Exit quick_exit abort atexit at_quick_exit terminate set_terminate signal sigaction raise kill
fork vfork clone system popen execl execle execlp execv execve execvp execvpe posix_spawn syscall
dlopen dlsym getenv secure_getenv setenv putenv unsetenv clearenv environ __environ
read write pread pwrite readv writev dprintf dup dup2 dup3 fcntl ioctl close
fopen freopen fdopen open openat creat fstream ofstream ifstream filebuf remove rename unlink
mmap mprotect ptrace process_vm_writev process_vm_readv longjmp setjmp
__attribute__ __declspec _Pragma asm __asm __asm__ namespace
""".split())

PP_OK = re.compile(r"#\s*(pragma\s+once|pragma\s+unroll(\s*\(?\s*\d*\s*\)?)?|include\s*(\S+))\s*$")


def _strip(text, keep_literals=False):
    """The text with comments replaced by a space and string/char literals by "" unless kept (line
    breaks kept); None and a reason when a literal is not closed or is a raw string."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            out.append(" ")
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                return None, "a comment that is not closed"
            out.append(" " + "\n" * text.count("\n", i, j))
            i = j + 2
        elif c in "\"'":
            if c == '"' and out and re.search(r"R$", "".join(out[-1:])):
                return None, "a raw string literal"
            j = i + 1
            while j < n and text[j] != c:
                if text[j] == "\n":
                    return None, "a literal that is not closed on its line"
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                return None, "a literal that is not closed"
            out.append(text[i:j + 1] if keep_literals else c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out), None


def _top_level_segments(tokens):
    """The file-scope declarations: token lists, a brace block at file scope shown as '{}'. A
    segment ends at ';' or at a block not followed by ';' (a function body)."""
    segs, cur, depth, i = [], [], 0, 0
    while i < len(tokens):
        t = tokens[i]
        if t == "{":
            depth, j = 1, i + 1
            while j < len(tokens) and depth:
                depth += {"{": 1, "}": -1}.get(tokens[j], 0)
                j += 1
            cur.append("{}")
            i = j
            if i < len(tokens) and tokens[i] == ";":
                continue
            segs.append(cur)
            cur = []
            continue
        cur.append(t)
        if t == ";":
            segs.append(cur)
            cur = []
        i += 1
    if cur:
        segs.append(cur)
    return segs


def _declaration_ok(seg):
    """A file-scope declaration that runs no code before main."""
    s = list(seg)
    if s and s[0] == "template":  # template <...> ...: skip the parameter list
        depth, k = 0, 1
        while k < len(s):
            depth += {"<": 1, ">": -1}.get(s[k], 0)
            k += 1
            if depth == 0:
                break
        s = s[k:]
    if not s:
        return True
    if s[-1] == "{}":  # a function body: a parameter list, and no '=' outside it (a lambda called at once)
        depth, assigns = 0, False
        for t in s:
            depth += {"(": 1, ")": -1}.get(t, 0)
            assigns |= t == "=" and depth == 0
        return "(" in s and not assigns
    first = s[0]
    if first in ("using", "typedef", "static_assert", "constexpr", "__device__", "__constant__", "__global__", ";"):
        return True
    if first in ("struct", "class", "union", "enum"):
        return s[-2:] == ["{}", ";"] or "{}" not in s and "=" not in s and "(" not in s
    return False


def refusal(text):
    """None when the file may be graded, else one line saying what it holds that grading refuses."""
    if len(text.encode("utf-8", "replace")) > MAX_BYTES:
        return f"the file is over {MAX_BYTES // 1000} kB"
    text = text.replace("\r\n", "\n")
    if re.search(r"\\\n", text):
        return "a backslash at the end of a line (a line continuation)"
    with_literals, why = _strip(text, keep_literals=True)
    if with_literals is None:
        return why
    code, _ = _strip(text)
    code_lines = code.split("\n")
    for lineno, line in enumerate(with_literals.split("\n"), 1):
        stripped = line.strip()
        if not stripped.startswith("#"):
            continue
        m = PP_OK.fullmatch(stripped)
        if not m:
            return f"line {lineno}: the directive '{stripped[:40]}' (only #pragma once, #pragma unroll and #include)"
        inc = m.group(3)
        if inc and not any(p.fullmatch(inc) for p in INCLUDE_OK):
            return f"line {lineno}: #include {inc} (only common/ and lessons/ headers and standard ones)"
        code_lines[lineno - 1] = ""
    code = "\n".join(code_lines)
    if any(ord(ch) > 127 for ch in code):
        return "a character outside ASCII outside comments and literals"
    for bad in ("%:", "<%", "%>", "\\", "[[", "#"):
        if bad in code:
            return f"'{bad}' outside a directive, comment or literal"
    tokens = re.findall(r"[A-Za-z_][A-Za-z0-9_]*|\d[\w.]*|\S", code)
    for k, t in enumerate(tokens):
        if t in BANNED or t.startswith("__builtin") or t.startswith("DOCTEST"):
            if t == "namespace" and k > 0 and tokens[k - 1] == "using":
                continue
            return f"the name '{t}' (grading refuses code that reaches the grader, the environment, files or the process)"
        if t == "extern" and tokens[k + 1:k + 2] != ["__shared__"]:
            return "'extern' other than extern __shared__"
    depth = 0
    for t in tokens:
        depth += {"{": 1, "}": -1}.get(t, 0)
        if depth < 0:
            return "a '}' that closes more than the file opened (it would leave the grader's namespace)"
    if depth != 0:
        return "a '{' that is never closed"
    for seg in _top_level_segments(tokens):
        if not _declaration_ok(seg):
            words = " ".join(seg)
            return (f"a file-scope declaration that is not a function, type, constexpr or device variable: "
                    f"'{words[:60]}' (objects built before main are not allowed)")
    return None
