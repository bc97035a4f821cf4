"""The text a reader sees on a built page, without code, math and charts: what the raw-LaTeX
check reads.  Parses the page's HTML (no browser needed)."""
from __future__ import annotations

import re
from html.parser import HTMLParser

#: elements whose text is not prose: code, scripts, typeset math, charts (their static SVG copy)
SKIP_TAGS = {"script", "style", "pre", "code", "svg", "mjx-container", "kbd", "samp", "textarea"}
SKIP_CLASSES = {"math", "tempo-chart-static", "highlight"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"}

#: a TeX command (backslash and letters) or a dollar sign left in prose
RAW_LATEX = re.compile(r"\\[A-Za-z]+|\$")
#: a shell variable in a command a note quotes (`$C --csv ...`, `wc-b$B.csv`): not math
SHELL_VAR = re.compile(r"\$[A-Z][A-Z0-9_]*(?=[\"./;)]|\s+(?:--|&&|\|)|$)")


class _Prose(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[bool] = []   # per open element: does it start a skipped region
        self.skip = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            return
        classes = set((dict(attrs).get("class") or "").split())
        skipped = tag in SKIP_TAGS or bool(classes & SKIP_CLASSES)
        self.stack.append(skipped)
        self.skip += skipped

    def handle_endtag(self, tag):
        if tag in VOID or not self.stack:
            return
        self.skip -= self.stack.pop()

    def handle_data(self, data):
        if not self.skip:
            self.parts.append(data)


def prose(html: str) -> str:
    """The visible prose of a page: its text outside code, math, scripts and charts."""
    p = _Prose()
    p.feed(html)
    return " ".join(p.parts)


def raw_latex(html: str, context: int = 40) -> list[str]:
    """Each place where the page's prose shows raw LaTeX (a ``$`` or a ``\\command``), with
    ``context`` characters either side; empty when there is none."""
    text = SHELL_VAR.sub("", re.sub(r"\s+", " ", prose(html)))
    return [text[max(0, m.start() - context):m.end() + context] for m in RAW_LATEX.finditer(text)]
