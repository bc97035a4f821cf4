"""The paper's own reported numbers (``data/paper/``) and the claims ledger.

The paper's numbers are facts we compare against, never results: notebooks compute "this
artifact" numbers with tempo and put them beside these.

* :func:`table` reads ``data/paper/tableNN_*.csv``; :func:`text_number` the numbers quoted in
  the text (Figs. 1b, 5, 6, 12, the solver study, the roofline check).
* :func:`claims` reads ``claims.yaml``; :mod:`tempo.claims` computes every claim from this
  build's experiment results and builds the ledger.
"""
from __future__ import annotations

import pandas as pd

from . import paths

KINDS = {"model": "model-space (CPU)", "gpu": "one GPU", "cluster": "multi-GPU cluster"}


def table(number: int) -> pd.DataFrame:
    """Paper Table ``number`` (1-11) as a DataFrame."""
    hits = sorted(paths.PAPER.glob(f"table{number:02d}_*.csv"))
    if not hits:
        raise ValueError(f"no paper table {number} under {paths.PAPER}")
    return pd.read_csv(hits[0])


def text_number(figure: str, quantity: str) -> float:
    """A number the paper quotes in its text, e.g. ``text_number("fig1b", "tempo_makespan")``."""
    df = pd.read_csv(paths.PAPER / "text_numbers.csv")
    hit = df[(df.figure == figure) & (df.quantity == quantity)]
    if hit.empty:
        raise ValueError(f"no paper number {figure}/{quantity} in text_numbers.csv")
    return float(hit.value.iloc[0])


def claims() -> pd.DataFrame:
    """Every quantitative claim of the paper (``claims.yaml``, validated), one row each."""
    from .claims import claim_rows

    return pd.DataFrame(claim_rows())


def claim(claim_id: str) -> dict:
    """One claim of ``claims.yaml`` as a dict (``paper``, ``unit``, ``claim``, ...)."""
    from .claims import claim_rows

    for r in claim_rows():
        if r["id"] == claim_id:
            return r
    raise ValueError(f"unknown claim {claim_id!r}")


def side_by_side(paper_df: pd.DataFrame, ours_df: pd.DataFrame, on: list[str], value: str,
                 relative: bool = False) -> pd.DataFrame:
    """Join a paper table and our table on ``on`` and show ``value`` as
    paper | this artifact | difference (absolute, or relative when ``relative``)."""
    m = paper_df[on + [value]].merge(ours_df[on + [value]], on=on, how="outer", suffixes=(" (paper)", " (this artifact)"))
    p, o = m[f"{value} (paper)"], m[f"{value} (this artifact)"]
    m["difference"] = (o - p) / p if relative else o - p
    return m


#: Columns of every ``data/paper/figNN_*.csv``: one row per number the paper states about the
#: figure (``value``, or a range ``lo``-``hi``, or a one-sided bound in ``hi`` alone), with the
#: sentence and line of ``tempo-paper.txt`` it comes from in ``source``.
FIGURE_COLUMNS = ["figure", "panel", "model", "setting", "policy", "metric", "value", "lo", "hi", "unit", "source"]


def figure(number: int) -> pd.DataFrame:
    """The numbers the paper states for Figure ``number`` (``data/paper/figNN_*.csv``), for
    figures whose series the paper does not publish (Figs. 7-11, 13): only what its text and
    captions state, one row per number, never a value read off a plot."""
    hits = sorted(paths.PAPER.glob(f"fig{number:02d}_*.csv"))
    if not hits:
        raise ValueError(f"no paper figure {number} under {paths.PAPER} (figNN_*.csv)")
    df = pd.read_csv(hits[0], dtype={"panel": str, "policy": str})
    missing = set(FIGURE_COLUMNS) - set(df.columns)
    if missing:
        raise ValueError(f"{hits[0].name} lacks columns {sorted(missing)}")
    df["panel"] = df["panel"].fillna("").astype(str)
    df["policy"] = df["policy"].fillna("").astype(str)
    return df


def glue_numbers(numbers: dict) -> dict:
    """Glue paper numbers into the book: ``{name: value}`` -> ``myst_nb.glue(name, value)``
    (not displayed), so Markdown prose writes ``{glue:text}`name``` (or ``name:.1f``) and no
    paper number is typed into a notebook.  Values must be numbers (read from ``data/paper/``
    by :func:`claim`, :func:`text_number`, :func:`table` or :func:`figure`).  Returns the dict."""
    try:
        from myst_nb import glue
    except ImportError as exc:  # pragma: no cover - the book's environment has it
        raise ImportError("glue_numbers needs myst_nb (the book's environment, requirements.txt)") from exc
    for name, value in numbers.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"glue name must be an identifier, got {name!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"glue value for {name!r} must be a number, got {value!r}")
        glue(name, value, display=False)
    return numbers
