"""A table as plain text that fits a terminal: every column but the last at its natural width
(capped), the last one wrapped into the width that remains.  The ``ledger`` command prints
with it, so no line is wider than the terminal."""
from __future__ import annotations

import shutil
import textwrap

import pandas as pd


def terminal_width(default: int = 100) -> int:
    """The terminal's width in characters (``COLUMNS`` or the tty), ``default`` when unknown."""
    return shutil.get_terminal_size((default, 24)).columns


def wrap_table(df: pd.DataFrame, width: int | None = None, cap: int = 28, min_last: int = 20, gap: int = 2,
               caps: dict | None = None) -> str:
    """``df`` as text no wider than ``width`` (default: the terminal's) when the fixed columns
    allow it (their widths plus ``min_last``): each column but the last is as wide as its widest
    cell or header, at most ``caps[column]`` or else ``cap`` characters (longer cells are cut
    with "..."); the last column wraps in what is left (at least ``min_last``), its continuation
    lines under its first."""
    if width is None:
        width = terminal_width()
    if not isinstance(width, int) or width < 20:
        raise ValueError(f"width must be an integer >= 20, got {width!r}")
    if df.shape[1] == 0:
        raise ValueError("df has no columns")
    cols = [str(c) for c in df.columns]
    cells = [[("" if pd.isna(v) else str(v)) if not isinstance(v, float) else f"{v:g}" for v in row]
             for row in df.itertuples(index=False)]

    def cut(s: str, w: int) -> str:
        return s if len(s) <= w else s[: max(w - 3, 1)] + "..."

    caps = {str(k): v for k, v in (caps or {}).items()}
    widths = [min(caps.get(cols[j], cap), max([len(cols[j])] + [len(r[j]) for r in cells])) for j in range(len(cols) - 1)]
    lead = sum(widths) + gap * len(widths)
    last = max(min_last, width - lead)
    sep = " " * gap

    def line(values):
        head = sep.join(cut(v, w).ljust(w) for v, w in zip(values[:-1], widths))
        body = textwrap.wrap(values[-1], last) or [""]
        out = [(head + sep if widths else "") + body[0]]
        out += [" " * lead + more for more in body[1:]]
        return [o.rstrip() for o in out]

    lines = line(cols)
    for r in cells:
        lines += line(r)
    return "\n".join(lines)
