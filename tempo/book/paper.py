"""The paper's own reported numbers (``data/paper/``) and the claims ledger.

The paper's numbers are facts we compare against, never results: notebooks compute "this
artifact" numbers with tempo and put them beside these.

* :func:`table` reads ``data/paper/tableNN_*.csv``; :func:`text_number` the numbers quoted in
  the text (Figs. 1b, 5, 6, 12, the solver study, the roofline check).
* :func:`claim_rows` reads and validates ``claims.yaml`` (:func:`claims` as a table, :func:`claim`
  one row); :mod:`tempo.book.claims` computes every claim from this build's experiment results
  and builds the ledger.  This module imports nothing of the book above it.
"""
from __future__ import annotations

from functools import lru_cache

import pandas as pd

from ..core import paths

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


# ------------------------------------------------------------------ claims.yaml
#: a claim's ``bound`` in claims.yaml, and the kinds of a stated tolerance exception (``tol_kind``)
BOUNDS = {None, "upper", "lower", "tight"}
TOL_KINDS = {"abs", "rel", "factor"}


@lru_cache(maxsize=None)
def _yaml() -> tuple:
    """The rows of ``claims.yaml`` (read once), each with ``paper_text``: its number as printed."""
    import yaml

    text = (paths.PAPER / "claims.yaml").read_text()
    rows = yaml.safe_load(text)["claims"]
    raw = yaml.load(text, Loader=yaml.BaseLoader)["claims"]  # the paper's numbers as printed
    out = []
    for r, s in zip(rows, raw):
        out.append({**r, "paper_text": s["paper"]})
    return tuple(out)


def claim_rows() -> list[dict]:
    """Every claim of ``claims.yaml`` as a dict, validated (kinds, needs, bounds, exceptions)."""
    rows = [dict(r) for r in _yaml()]
    ids = [r["id"] for r in rows]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError(f"duplicate claim ids in claims.yaml: {dup}")
    for r in rows:
        where = f"claims.yaml: claim {r['id']!r}"
        if r.get("kind") not in ("model", "gpu", "cluster"):
            raise ValueError(f"{where}: kind must be model, gpu or cluster, got {r.get('kind')!r}")
        if r.get("needs") not in (None, "trace", "gpu", "cluster"):
            raise ValueError(f"{where}: needs must be trace, gpu or cluster, got {r['needs']!r}")
        if r.get("bound") not in BOUNDS:
            raise ValueError(f"{where}: bound must be upper, lower or tight, got {r['bound']!r}")
        if r.get("bound") == "tight" and "limit" not in r:
            raise ValueError(f"{where}: bound 'tight' needs a 'limit' (the bound the paper's value is close to)")
        p = r["paper"]
        if isinstance(p, list):
            if len(p) != 2 or not p[0] <= p[1]:
                raise ValueError(f"{where}: a range must be [low, high], got {p}")
            if r.get("bound"):
                raise ValueError(f"{where}: a range cannot carry a bound")
        if "tol" in r:
            if not r.get("tol_why"):
                raise ValueError(f"{where}: a tolerance exception (tol) needs a written tol_why")
            if r.get("tol_kind", "abs") not in TOL_KINDS:
                raise ValueError(f"{where}: tol_kind must be one of {sorted(TOL_KINDS)}, got {r['tol_kind']!r}")
        r["needs"] = r.get("needs") or (r["kind"] if r["kind"] in ("gpu", "cluster") else None)
    return rows


def precision(text) -> float:
    """Half a unit of the last digit the paper prints: ``"0.880"`` -> 0.0005, ``"156"`` -> 0.5."""
    s = str(text).strip().lstrip("+-")
    if "e" in s.lower():
        raise ValueError(f"paper value {text!r}: write it without an exponent")
    decimals = len(s.split(".")[1]) if "." in s else 0
    return 0.5 * 10.0 ** (-decimals)


def claims() -> pd.DataFrame:
    """Every quantitative claim of the paper (``claims.yaml``, validated), one row each."""
    return pd.DataFrame(claim_rows())


def claim(claim_id: str) -> dict:
    """One claim of ``claims.yaml`` as a dict (``paper``, ``unit``, ``claim``, ...)."""
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
    """Glue paper numbers into the book: ``{name: value}`` -> :func:`glue` (not displayed), so
    Markdown prose writes ``{glue:text}`name``` (or ``name:.1f``) and no paper number is typed
    into a notebook.  Values must be numbers (read from ``data/paper/`` by :func:`claim`,
    :func:`text_number`, :func:`table` or :func:`figure`).  Returns the dict."""
    for name, value in numbers.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"glue name must be an identifier, got {name!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"glue value for {name!r} must be a number, got {value!r}")
    glue(**numbers)
    return numbers


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
        df = pd.read_csv(hits[0], dtype=str)
        row = df[df.iloc[:, 0] == parts[1]]
        if row.empty or parts[2] not in df.columns:
            raise ValueError(f"key {key!r}: {hits[0].name} has no row {parts[1]!r} with column {parts[2]!r}")
        return str(row[parts[2]].iloc[0])
    if len(parts) == 2:
        df = pd.read_csv(paths.PAPER / "text_numbers.csv", dtype=str)
        hit = df[(df.figure == parts[0]) & (df.quantity == parts[1])]
        if hit.empty:
            raise ValueError(f"key {key!r}: no paper number {parts[0]}/{parts[1]} in text_numbers.csv")
        return str(hit.value.iloc[0])
    if len(parts) == 1:
        p = claim(key).get("paper_text")
        return "-".join(p) if isinstance(p, list) else str(p)
    raise ValueError(f"key must be a claim id, 'figure/quantity' or 'tableNN/row/column', got {key!r}")


def glue_values(**values) -> dict:
    """What :func:`glue` glues for ``values``: paper keys (str) resolved by :func:`number`,
    numbers as floats."""
    import numbers

    out = {}
    for name, v in values.items():
        if isinstance(v, str):
            out[name] = number(v)
        elif isinstance(v, numbers.Real) and not isinstance(v, bool):
            out[name] = float(v)
        else:
            raise ValueError(f"glue {name}=: a paper key (str) or a number, got {v!r}")
    return out


def glue(**values) -> None:
    """Glue values for a chapter's prose (MyST-NB's ``{glue:text}`name```): a string is taken as
    a :func:`number` key and glued as the paper prints it; a number (this build's result) is
    glued as is, so the prose formats it (``{glue:text}`name:.2f```).  Returns nothing, so a
    cell that only glues shows nothing; :func:`glue_values` is what it would glue."""
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


def claim_range(claim_id: str) -> dict:
    """``{"p_<id>_lo": low, "p_<id>_hi": high}`` of a claim whose paper value is a range, for
    :func:`glue_numbers` (prose writes ``{glue:text}`p_<id>_lo```)."""
    p = claim(claim_id)["paper"]
    if not isinstance(p, (list, tuple)) or len(p) != 2:
        raise ValueError(f"claim {claim_id!r} is not a range in claims.yaml (paper: {p!r})")
    return {f"p_{claim_id}_lo": p[0], f"p_{claim_id}_hi": p[1]}
