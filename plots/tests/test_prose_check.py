"""prose_check.py: each check fires on a planted defect and stays quiet on sound text."""
import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import prose_check  # noqa: E402

GLOSSARY = """# Glossary

- index: [warp](#warp)

## Threads

### Warp
32 threads. ncu's stall reasons: **long scoreboard**, waiting for a load.

### Little's law
Bytes in flight.
"""

SOUND = """# Lesson 01 — a sum

Sum n floats with one [warp](../../GLOSSARY.md#warp) and [Little's law](../../GLOSSARY.md#littles-law).
See [step 1](#step-1--one-thread) and the [notes](NOTES.md).

### Step 1 — one thread

```
thread 0: s += x[0]
```

so the sentence goes on after a code block, which is fine.

cuDNN's name starts in lower case, and so do `code` and f16.

## Profiling with ncu

```
ncu --set full ./lesson01
```
"""


class ProseCheck(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp()
        self.lesson = os.path.join(self.root, "lessons", "01_sum")
        os.makedirs(self.lesson)
        self.write("GLOSSARY.md", GLOSSARY)
        self.write("lessons/01_sum/NOTES.md", "# Notes\n\nMeasured history.\n")

    def write(self, name, text):
        path = os.path.join(self.root, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def problems(self, text, name="lessons/01_sum/README.md"):
        path = self.write(name, text)
        prose_check.anchors.__defaults__[0].clear()
        return [m for _, m in prose_check.check_text(path, text, self.root)]

    def test_sound_text_passes(self):
        self.assertEqual(self.problems(SOUND), [])

    def test_empty_heading(self):
        found = self.problems(SOUND.replace("## Profiling with ncu\n", "## Empty\n\n## Profiling with ncu\n"))
        self.assertIn("empty heading: 'Empty' is followed directly by 'Profiling with ncu'", found)
        self.assertEqual(self.problems(SOUND.replace("## Profiling with ncu\n", "## Part\n\n### Profiling with ncu\n")), [])
        self.assertTrue(any("empty heading" in m for m in self.problems("# Title\n\ntext\n\n## Last\n")))

    def test_paragraph_starting_mid_sentence(self):
        found = self.problems(SOUND.replace("## Profiling", "global memory. While the rows fit in L2 the re-reads hit.\n\n## Profiling"))
        self.assertTrue(any("starts mid-sentence: 'global memory." in m for m in found), found)

    def test_notes_referring_to_itself(self):
        found = self.problems("# Notes\n\nThe ncu evidence is in NOTES.md.\n", name="lessons/01_sum/NOTES.md")
        self.assertIn("NOTES.md refers to NOTES.md, that is to itself", found)
        other = "# Notes\n\nSee [lesson 01's notes](../01_sum/NOTES.md).\n"
        self.assertEqual(self.problems(other, name="lessons/01_sum/NOTES.md"), [])

    def test_tracker_talk(self):
        for phrase in ("the shapes the issue asked for", "the target quotes 348", "measured in another session"):
            with self.subTest(phrase=phrase):
                found = self.problems(SOUND + f"\nThese are {phrase}.\n")
                self.assertTrue(any(m.startswith("tracker talk") for m in found), found)
        self.assertEqual(self.problems(SOUND + "\nThe issue slots are busy; the issue rate is 1.\n"), [])

    def test_broken_link_and_anchor(self):
        found = self.problems(SOUND + "\nSee [gone](NOPE.md) and [the warp](../../GLOSSARY.md#warps).\n")
        self.assertTrue(any(m.startswith("broken link: NOPE.md") for m in found), found)
        self.assertTrue(any(m.startswith("broken anchor: ../../GLOSSARY.md#warps") for m in found), found)
        found = self.problems(SOUND + "\n![figure](../../results/none.png) and [here](#no-such-heading).\n")
        self.assertEqual(sum(m.startswith("broken") for m in found), 2, found)

    def test_links_in_code_are_not_checked(self):
        self.assertEqual(self.problems(SOUND + "\n`[x](missing.md)`\n\n```\n[y](missing.md)\n```\n"), [])

    def test_glossary_terms(self):
        glossary = os.path.join(self.root, "GLOSSARY.md")
        self.assertEqual(prose_check.missing_terms(glossary, ["warp", "long scoreboard", "Little's law"]), [])
        self.assertEqual(prose_check.missing_terms(glossary, ["warp", "bank conflict"]), ["bank conflict"])

    def test_core_length(self):
        long = SOUND + "".join(f"\nLine {i}.\n" for i in range(200))
        self.assertTrue(any("the lesson's core is" in m for m in self.problems(long)))
        split = SOUND + "".join(f"\nLine {i}.\n" for i in range(100)) + "\n## Appendix: depth\n" + \
            "".join(f"\nMore {i}.\n" for i in range(200))
        self.assertEqual(self.problems(split), [])

    def test_slug(self):
        self.assertEqual(prose_check.slug("Step 5: why the online softmax loses at K = 4096"),
                         "step-5-why-the-online-softmax-loses-at-k--4096")
        self.assertEqual(prose_check.slug("### cp.async".lstrip("# ")), "cpasync")
        self.assertEqual(prose_check.slug("Step 2 — `wgmma` from shared memory"), "step-2--wgmma-from-shared-memory")

    def test_main_exit_code_and_the_course_passes(self):
        bad = self.write("lessons/01_sum/README.md", SOUND + "\n## Empty\n")
        with redirect_stdout(io.StringIO()) as out:
            self.assertEqual(prose_check.main([bad], root=self.root, glossary=os.path.join(self.root, "GLOSSARY.md")), 1)
        self.assertIn("lessons/01_sum/README.md:", out.getvalue())
        with redirect_stdout(io.StringIO()) as out:
            code = prose_check.main(prose_check.default_files())
        self.assertEqual(code, 0, out.getvalue())


if __name__ == "__main__":
    unittest.main()
