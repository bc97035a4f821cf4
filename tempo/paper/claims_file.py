"""The paper's quantitative claims, ``data/paper/claims.yaml``: one row per claim (id, section,
the claim in our words, the paper's number as printed, unit, kind, chapter, what it needs),
read once and validated.  :mod:`tempo.book.claims` computes our value of each."""
from __future__ import annotations

from functools import lru_cache

import pandas as pd

from ..core import paths

#: a claim's ``kind``: what the paper measured it on
KINDS = {"model": "model-space (CPU)", "gpu": "one GPU", "cluster": "multi-GPU cluster"}
#: a claim's ``bound`` in claims.yaml, and the kinds of a stated tolerance exception (``tol_kind``)
BOUNDS = {None, "upper", "lower", "tight"}
TOL_KINDS = {"abs", "rel", "factor"}


#: the most bytes claims.yaml may hold (it holds about 30 KB)
MAX_BYTES = 4 * 2**20
_TEXT = {"type": "string", "minLength": 1}
_NUMBER = {"type": "number"}
#: the fields a reader uses, with their types (a row may carry more)
SCHEMA = {
    "type": "object", "required": ["claims"],
    "properties": {"claims": {"type": "array", "items": {
        "type": "object", "required": ["id", "section", "claim", "paper", "unit", "kind", "chapter"],
        "properties": {"id": _TEXT, "section": {"type": ["string", "number"]}, "claim": _TEXT,
                       "paper": {"oneOf": [_NUMBER, {"type": "array", "items": _NUMBER, "minItems": 2, "maxItems": 2}]},
                       "unit": {"type": "string"}, "kind": _TEXT, "chapter": _TEXT,
                       "needs": {"type": ["string", "null"]}, "bound": {"type": ["string", "null"]},
                       "limit": _NUMBER, "spread": _NUMBER, "tol": _NUMBER, "tol_kind": _TEXT,
                       "tol_why": {"type": "string"}}}}}}


@lru_cache(maxsize=None)
def _yaml() -> tuple:
    """The rows of ``claims.yaml`` (read once), each with ``paper_text``: its number as printed."""
    from ..core.io import check_schema, loads_yaml, read_regular

    # a regular file of bounded size, depth and alias expansion, then the fields' types
    text = read_regular(paths.PAPER / "claims.yaml", MAX_BYTES, "claims.yaml", follow=True)
    rows = check_schema(loads_yaml(text, "claims.yaml"), SCHEMA, "claims.yaml")["claims"]
    raw = loads_yaml(text, "claims.yaml", base=True)["claims"]  # the paper's numbers as printed
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
        if r.get("kind") not in KINDS:
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


def claim_row(claim_id: str) -> dict:
    """One claim of ``claims.yaml`` as a dict (``paper``, ``unit``, ``claim``, ...)."""
    for r in claim_rows():
        if r["id"] == claim_id:
            return r
    raise ValueError(f"unknown claim {claim_id!r}")


def claim_range(claim_id: str) -> dict:
    """``{"p_<id>_lo": low, "p_<id>_hi": high}`` of a claim whose paper value is a range, for
    :func:`tempo.book.paper.glue_numbers` (prose writes ``{glue:text}`p_<id>_lo```)."""
    p = claim_row(claim_id)["paper"]
    if not isinstance(p, (list, tuple)) or len(p) != 2:
        raise ValueError(f"claim {claim_id!r} is not a range in claims.yaml (paper: {p!r})")
    return {f"p_{claim_id}_lo": p[0], f"p_{claim_id}_hi": p[1]}
