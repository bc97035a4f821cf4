"""The paper's numbers as it prints them (``data/paper/``): its tables (``tableNN_*.csv``), what
it states about figures whose series it does not publish (``figNN_*.csv``) and the numbers
quoted in its text (``text_numbers.csv``)."""
from __future__ import annotations

import pandas as pd

from ..core import paths
from ..core.io import read_csv
from .claims_file import claim_row

#: the most bytes a paper table may hold (the largest holds 3 KB)
MAX_BYTES = 16 * 2**20


def table(number: int) -> pd.DataFrame:
    """Paper Table ``number`` (1-11) as a DataFrame."""
    hits = sorted(paths.PAPER.glob(f"table{number:02d}_*.csv"))
    if not hits:
        raise ValueError(f"no paper table {number} under {paths.PAPER}")
    return read_csv(hits[0], MAX_BYTES)


def text_number(figure: str, quantity: str) -> float:
    """A number the paper quotes in its text, e.g. ``text_number("fig1b", "tempo_makespan")``."""
    df = read_csv(paths.PAPER / "text_numbers.csv", MAX_BYTES)
    hit = df[(df.figure == figure) & (df.quantity == quantity)]
    if hit.empty:
        raise ValueError(f"no paper number {figure}/{quantity} in text_numbers.csv")
    return float(hit.value.iloc[0])


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
    df = read_csv(hits[0], MAX_BYTES, dtype={"panel": str, "policy": str})
    missing = set(FIGURE_COLUMNS) - set(df.columns)
    if missing:
        raise ValueError(f"{hits[0].name} lacks columns {sorted(missing)}")
    df["panel"] = df["panel"].fillna("").astype(str)
    df["policy"] = df["policy"].fillna("").astype(str)
    return df


def number(key: str) -> str:
    """One paper number as the paper prints it (a string, so its precision survives), for the
    book's prose: a claim id of ``claims.yaml`` (``"thm2_eps_median"``; a range prints as
    ``"low-high"``), ``"figure/quantity"`` of ``text_numbers.csv`` (``"theorem2/eps_median"``),
    or ``"tableNN/row/column"`` of a paper table, the row matched on the table's first column
    (``"table8/seed only/B512"``)."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"key must be a claim id, 'figure/quantity' or 'tableNN/row/column', got {key!r}")
    parts = key.split("/")
    if len(parts) == 3 and parts[0].startswith("table") and parts[0][5:].isdigit():
        hits = sorted(paths.PAPER.glob(f"table{int(parts[0][5:]):02d}_*.csv"))
        if not hits:
            raise ValueError(f"key {key!r}: no paper table {parts[0]} under {paths.PAPER}")
        df = read_csv(hits[0], MAX_BYTES, dtype=str)
        row = df[df.iloc[:, 0] == parts[1]]
        if row.empty or parts[2] not in df.columns:
            raise ValueError(f"key {key!r}: {hits[0].name} has no row {parts[1]!r} with column {parts[2]!r}")
        return str(row[parts[2]].iloc[0])
    if len(parts) == 2:
        df = read_csv(paths.PAPER / "text_numbers.csv", MAX_BYTES, dtype=str)
        hit = df[(df.figure == parts[0]) & (df.quantity == parts[1])]
        if hit.empty:
            raise ValueError(f"key {key!r}: no paper number {parts[0]}/{parts[1]} in text_numbers.csv")
        return str(hit.value.iloc[0])
    if len(parts) == 1:
        p = claim_row(key).get("paper_text")
        return "-".join(p) if isinstance(p, list) else str(p)
    raise ValueError(f"key must be a claim id, 'figure/quantity' or 'tableNN/row/column', got {key!r}")
