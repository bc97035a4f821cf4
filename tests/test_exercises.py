"""Every code snippet a reader can copy out of the book runs as printed: each fenced ```python
block (not an executed ``{code-cell}``) in the chapters, the book's front pages and the README, in a
fresh namespace, so it needs nothing from the chapter's cells, and its assertions hold.  The
exercise solutions are among them."""
import re

import pytest

from tempo.core import paths

SOLUTION = re.compile(r"^:::\{admonition\} Solution\n(.*?)^:::$", re.S | re.M)
CODE = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
#: every page a reader copies from: chapters, the book's front pages, the README
PAGES = ("notebooks/[0-9][0-9]_*.md", "book/*.md", "README.md")


def pages():
    return sorted(p for pattern in PAGES for p in paths.ROOT.glob(pattern))


def solutions():
    out = []
    for nb in sorted(paths.NOTEBOOKS.glob("[0-9][0-9]_*.md")):
        for i, block in enumerate(SOLUTION.findall(nb.read_text()), 1):
            for j, code in enumerate(CODE.findall(block), 1):
                out.append(pytest.param(code, id=f"{nb.stem}-solution{i}-{j}"))
    return out


def snippets():
    out = []
    for page in pages():
        for i, code in enumerate(CODE.findall(page.read_text()), 1):
            out.append(pytest.param(code, id=f"{page.relative_to(paths.ROOT)}-{i}"))
    return out


def test_every_chapter_has_exercise_code():
    """Every chapter page, each lecture of a chapter in several (04_1, 04_2, ...) included."""
    ids = [p.id for p in solutions()]
    chapters = sorted(nb.stem for nb in paths.NOTEBOOKS.glob("0[1-8]_*.md"))
    assert {c[:2] for c in chapters} == {f"0{i}" for i in range(1, 9)} and len(chapters) >= 8
    for ch in chapters:
        assert any(i.startswith(ch) for i in ids), f"{ch} has no exercise solution with code"


def test_snippets_are_found_on_every_page_that_has_them():
    ids = [p.id for p in snippets()]
    for page in ("README.md", "book/intro.md", "notebooks/01_balance_time.md", "notebooks/03_solver.md"):
        assert any(i.startswith(page) for i in ids), f"{page}: no python snippet found"
    assert len(ids) >= len(solutions())


def test_no_inline_call_a_reader_would_copy_is_left_untested():
    """A complete call written inline in the prose (`tempo.solve(batch, model, "tempo")...`) is a
    snippet a reader copies too: it belongs in a fenced block (run here) or an executed cell.
    Elided forms (`tempo.solve(..., "milp")`) name an API, they are not runnable."""
    inline = re.compile(r"`(tempo\.solve\([^`]*\)[^`]*)`")
    found = [(p.name, m) for p in pages() for m in inline.findall(p.read_text()) if "..." not in m]
    assert not found, f"inline tempo.solve(...) calls outside a tested block: {found}"


@pytest.mark.parametrize("code", snippets())
def test_snippet_runs(code):
    exec(compile(code, "<snippet>", "exec"), {"__name__": "__snippet__"})
