"""Every exercise solution in the book's chapters that carries code runs as printed (in a fresh
namespace, so it needs nothing from the chapter's cells) and its assertions hold."""
import re

import pytest

from tempo.core import paths

SOLUTION = re.compile(r"^:::\{admonition\} Solution\n(.*?)^:::$", re.S | re.M)
CODE = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


def solutions():
    out = []
    for nb in sorted(paths.NOTEBOOKS.glob("[0-9][0-9]_*.md")):
        for i, block in enumerate(SOLUTION.findall(nb.read_text()), 1):
            for j, code in enumerate(CODE.findall(block), 1):
                out.append(pytest.param(code, id=f"{nb.stem}-solution{i}-{j}"))
    return out


def test_chapters_01_to_03_have_exercise_code():
    ids = [p.id for p in solutions()]
    for ch in ("01_balance_time", "02_theory", "03_solver"):
        assert any(i.startswith(ch) for i in ids), f"{ch} has no exercise solution with code"


@pytest.mark.parametrize("code", solutions())
def test_solution_runs(code):
    exec(compile(code, "<solution>", "exec"), {"__name__": "__exercise__"})
