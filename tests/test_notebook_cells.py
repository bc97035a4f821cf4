"""The book's chapters compute nothing inline: a code cell calls one function (of the chapter's
module in ``tempo/book/chapters/``, ``tempo.book.figures``, ``claims.view``, an experiment's
``run``) and displays what it returns.  This test parses every MyST code cell of every notebook
with ``ast`` and counts the cells that contain *logic* by the rule below; at most
:data:`MAX_LOGIC_CELLS` may in the whole book (the chapter layer, tempo/book/chapters/, holds the logic the pages call).

A cell has logic when its code contains any of:

* a loop (``for``, ``while``, ``async for``) or a comprehension / generator expression;
* an ``if`` statement, a conditional expression (``x if c else y``) or a ``match``;
* a ``lambda``, a ``def`` or a ``class``;
* a call of a pandas reshaping or reduction method (attribute calls named in
  :data:`RESHAPE`, e.g. ``df.groupby(...)``, ``pd.concat(...)``, ``s.max()``);
* an assignment into a subscript (``df.loc[i, "x"] = v``, ``df["y"] = ...``, also ``+=``);
* a boolean mask in a subscript (``df[df.x > 1]``, ``df.loc[df.a & df.b]``).

The ``parameters``-tagged first cell is skipped.  MyST option lines (``:tags: [...]``, a
``---`` YAML header) and IPython magics (``%...``, ``!...``) are stripped before parsing.
Code in ``python`` fences of the prose (exercise solutions) is not a code cell; those run in
``tests/test_exercises.py``.
"""
from __future__ import annotations

import ast
import re

import pytest

from tempo.core import paths

MAX_LOGIC_CELLS = 10

#: pandas methods that reshape a frame or reduce it: a cell calling one computes its own table.
RESHAPE = frozenset({
    # reshaping
    "pivot", "pivot_table", "melt", "stack", "unstack", "explode", "transpose", "crosstab", "wide_to_long",
    "groupby", "resample", "rolling", "expanding",
    "merge", "join", "concat", "combine_first",
    "agg", "aggregate", "apply", "applymap", "map", "transform", "pipe",
    "query", "assign", "where", "mask", "filter", "isin",
    "sort_values", "sort_index", "nlargest", "nsmallest", "drop_duplicates", "dropna", "fillna",
    "reset_index", "set_index", "reindex", "rename", "drop",
    # reductions
    "sum", "mean", "median", "min", "max", "quantile", "std", "var", "count", "nunique", "value_counts",
    "idxmax", "idxmin", "describe", "cumsum", "cumprod", "diff", "pct_change", "any", "all",
})

FENCE = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```\s*$", re.S | re.M)


def code_cells(text: str):
    """(line number of the cell's first code line, options, code) of each MyST code cell."""
    for m in FENCE.finditer(text):
        body = m.group(1)
        start = text.count("\n", 0, m.start(1)) + 1
        lines = body.split("\n")
        opts, i = {}, 0
        if lines and lines[0].strip() == "---":           # a YAML option block
            j = lines.index("---", 1) if "---" in lines[1:] else 0
            for ln in lines[1:j]:
                k, _, v = ln.partition(":")
                opts[k.strip()] = v.strip()
            i = j + 1
        while i < len(lines) and re.match(r"^:[\w-]+:", lines[i]):   # `:tags: [...]` lines
            k, _, v = lines[i][1:].partition(":")
            opts[k.strip()] = v.strip()
            i += 1
        code = "\n".join("pass" if ln.lstrip().startswith(("%", "!")) else ln for ln in lines[i:])
        yield start + i, opts, code


def _is_mask(node: ast.AST) -> bool:
    return isinstance(node, (ast.Compare, ast.BoolOp)) or (
        isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor))) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert))


def logic(code: str) -> list[str]:
    """What makes ``code`` a cell with logic (empty: a plain call and display)."""
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            found.append("loop")
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            found.append("comprehension")
        elif isinstance(node, (ast.If, ast.IfExp, ast.Match)):
            found.append("conditional")
        elif isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.append("lambda/def")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RESHAPE:
            found.append(f".{node.func.attr}()")
        elif isinstance(node, (ast.Assign, ast.AugAssign)) and any(
                isinstance(t, ast.Subscript) for t in (node.targets if isinstance(node, ast.Assign) else [node.target])):
            found.append("subscript assignment")
        elif isinstance(node, ast.Subscript) and _is_mask(node.slice):
            found.append("boolean mask")
    return found


def logic_cells():
    """``(file:line, reasons)`` of every code cell with logic in the book."""
    out = []
    for nb in sorted(paths.NOTEBOOKS.glob("[0-9][0-9]_*.md")):
        for line, opts, code in code_cells(nb.read_text()):
            if "parameters" in opts.get("tags", ""):
                continue
            why = logic(code)
            if why:
                out.append((f"{nb.relative_to(paths.ROOT)}:{line}", sorted(set(why))))
    return out


def test_the_rule_sees_logic():
    assert set(logic("df.groupby('a').x.mean()")) == {".mean()", ".groupby()"}
    assert logic("x = 40 if profile == 'smoke' else 120") == ["conditional"]
    assert logic("[f(v) for v in xs]") == ["comprehension"]
    assert logic("df.loc[1, 'a'] = 2") == ["subscript assignment"]
    assert logic("df[df.a > 1]") == ["boolean mask"]
    assert logic("sorted(xs, key=lambda v: -v)") == ["lambda/def"]
    assert logic("chapter.table(df).round(2)\nfigures.chart(df)") == []
    assert logic("display(ch.summary(run('x', cfg, profile)))") == []


def test_cells_are_parsed():
    text = "a\n```{code-cell} ipython3\n:tags: [remove-input]\n%matplotlib inline\nx = 1\n```\n"
    assert list(code_cells(text)) == [(4, {"tags": "[remove-input]"}, "pass\nx = 1\n")]
    text = "```{code-cell} ipython3\n---\ntags: [parameters]\n---\nprofile = 'full'\n```\n"
    assert list(code_cells(text))[0][1] == {"tags": "[parameters]"}
    cells = [c for nb in sorted(paths.NOTEBOOKS.glob("[0-9][0-9]_*.md")) for c in code_cells(nb.read_text())]
    assert len(cells) > 100


def test_at_most_ten_cells_with_logic():
    bad = logic_cells()
    report = "\n".join(f"  {where}: {', '.join(why)}" for where, why in bad)
    print(f"{len(bad)} code cells with logic:\n{report}")
    assert len(bad) <= MAX_LOGIC_CELLS, (
        f"{len(bad)} notebook code cells compute inline (at most {MAX_LOGIC_CELLS}); move the logic into "
        f"the chapter's module in tempo/book/chapters/:\n{report}")


if __name__ == "__main__":
    pytest.main([__file__, "-q", "-s"])
