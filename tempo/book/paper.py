"""Glue for a chapter's prose (MyST-NB's ``{glue:text}`name```): the paper's numbers as it
prints them (:func:`tempo.paper.tables.number`) and this build's numbers, so no number is
typed into a notebook.  The paper's data itself is read by :mod:`tempo.paper`."""
from __future__ import annotations

from numbers import Real

from ..paper.tables import number


def glue_numbers(numbers: dict) -> dict:
    """Glue paper numbers into the book: ``{name: value}`` -> :func:`glue` (not displayed), so
    Markdown prose writes ``{glue:text}`name``` (or ``name:.1f``) and no paper number is typed
    into a notebook.  Values must be numbers (read from ``data/paper/`` by :mod:`tempo.paper`).
    Returns the dict."""
    for name, value in numbers.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"glue name must be an identifier, got {name!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"glue value for {name!r} must be a number, got {value!r}")
    glue(**numbers)
    return numbers


def glue_values(**values) -> dict:
    """What :func:`glue` glues for ``values``: paper keys (str) resolved by
    :func:`tempo.paper.tables.number`, numbers as floats."""
    out = {}
    for name, v in values.items():
        if isinstance(v, str):
            out[name] = number(v)
        elif isinstance(v, Real) and not isinstance(v, bool):
            out[name] = float(v)
        else:
            raise ValueError(f"glue {name}=: a paper key (str) or a number, got {v!r}")
    return out


def glue(**values) -> None:
    """Glue values for a chapter's prose (MyST-NB's ``{glue:text}`name```): a string is taken as
    a :func:`tempo.paper.tables.number` key and glued as the paper prints it; a number (this
    build's result) is glued as is, so the prose formats it (``{glue:text}`name:.2f```).  Returns
    nothing, so a cell that only glues shows nothing; :func:`glue_values` is what it would glue."""
    from myst_nb import glue as _glue

    for name, v in glue_values(**values).items():
        _glue(name, v, display=False)


def glue_text(**texts) -> None:
    """Glue strings as they are (a region label, a policy name) for ``{glue:text}`` in prose;
    :func:`glue` reads a string as a paper key instead."""
    from myst_nb import glue as _glue

    for name, t in texts.items():
        if not isinstance(t, str):
            raise ValueError(f"glue_text {name}=: a string, got {t!r}")
    for name, t in texts.items():
        _glue(name, t, display=False)
