"""Generated sentences (Markdown a chapter's cell displays) are not typeset, so they carry no
LaTeX: no ``$`` and no ``\\command`` outside inline code, in every executed notebook of any
profile built so far (``build/executed/<profile>/``)."""
import json
import re

import pytest

from tempo.core import paths

RAW = re.compile(r"\\[A-Za-z]+|\$")


def executed():
    found = sorted((paths.BUILD / "executed").glob("*/[0-9][0-9]_*.ipynb")) if (paths.BUILD / "executed").exists() else []
    return [p for p in found if not p.name.endswith(".partial.ipynb")]      # a run in progress or failed


def markdown_outputs(nb: dict):
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            md = out.get("data", {}).get("text/markdown")
            if md:
                yield "".join(md) if isinstance(md, list) else md


def raw_latex(markdown: str) -> list[str]:
    """Each ``$`` or ``\\command`` in ``markdown`` outside backtick code spans."""
    text = re.sub(r"`[^`]*`", "", markdown)
    return [text[max(0, m.start() - 30):m.end() + 30] for m in RAW.finditer(text)]


def test_raw_latex_is_found():
    assert raw_latex("all with $b/\\beta$ between") and not raw_latex("b/β ≈ 55.7, `make x $(Y)`")


@pytest.mark.skipif(not executed(), reason="no executed notebooks under build/executed (run make notebook)")
@pytest.mark.parametrize("nb", executed(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_generated_markdown_has_no_latex(nb):
    found = [hit for md in markdown_outputs(json.loads(nb.read_text())) for hit in raw_latex(md)]
    assert not found, f"{nb.name}: raw LaTeX in generated text: {found[:5]}"
