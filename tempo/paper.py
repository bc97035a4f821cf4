"""The paper's own reported numbers (``data/paper/``) and the claims ledger.

The paper's numbers are facts we compare against, never results: notebooks compute "this
artifact" numbers with tempo and put them beside these.

* :func:`table` reads ``data/paper/tableNN_*.csv``; :func:`text_number` the numbers quoted in
  the text (Figs. 1b, 5, 6, 12, the solver study, the roofline check).
* :func:`claims` reads ``claims.yaml``; a notebook that checks a claim calls
  :func:`record_claim`, which writes ``build/results/<profile>/claims/<id>.json``.
* :func:`ledger` merges the two into the table the "Claims ledger" chapter shows.
"""
from __future__ import annotations

import json
import math
import shutil
from functools import lru_cache

import pandas as pd

from . import paths
from .cache import atomic_write_csv, atomic_write_text

STATUSES = ["reproduced", "deviates", "not yet implemented", "needs hardware not present"]
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


@lru_cache(maxsize=None)
def _claims_raw() -> tuple:
    import yaml

    with open(paths.PAPER / "claims.yaml") as f:
        data = yaml.safe_load(f)
    return tuple(data["claims"])


def claims() -> pd.DataFrame:
    """Every quantitative claim of the paper (``claims.yaml``), one row each."""
    df = pd.DataFrame(list(_claims_raw()))
    if df.id.duplicated().any():
        raise ValueError(f"duplicate claim ids: {df.id[df.id.duplicated()].tolist()}")
    bad = set(df.kind) - set(KINDS)
    if bad:
        raise ValueError(f"unknown claim kinds {bad}; expected {list(KINDS)}")
    return df


def claim(claim_id: str) -> dict:
    df = claims()
    hit = df[df.id == claim_id]
    if hit.empty:
        raise ValueError(f"unknown claim {claim_id!r}")
    return hit.iloc[0].to_dict()


def within(claim_row: dict, ours: float) -> bool:
    """Is ``ours`` within the claim's tolerance of the paper's value?  Claims with
    ``bound: upper`` ("at most", e.g. a worst-case ratio) are reproduced by any value up to
    the paper's plus the tolerance; ``bound: lower`` the mirror image."""
    paper, tol = float(claim_row["paper"]), float(claim_row["tol"])
    if ours is None or (isinstance(ours, float) and math.isnan(ours)):
        return False
    slack = tol * abs(paper) if claim_row["tol_kind"] == "rel" else tol
    bound = claim_row.get("bound") or "value"
    if isinstance(bound, float):  # NaN from a DataFrame row without the field
        bound = "value"
    if bound == "upper":   # the paper states "at most": ours may be anywhere below
        return ours <= paper + slack + 1e-12
    if bound == "lower":   # "at least"
        return ours >= paper - slack - 1e-12
    return abs(ours - paper) <= slack + 1e-12


def _claims_dir(profile: str):
    d = paths.results_dir(profile) / "claims"
    d.mkdir(parents=True, exist_ok=True)
    return d


def record_claim(claim_id: str, ours: float, profile: str, note: str = "", source: str = "") -> dict:
    """Record this artifact's number for a claim; returns the ledger row for it.

    ``note`` explains a deviation or how the number was obtained (e.g. "measured on H200,
    data/measured/h200/..."); ``source`` names the notebook or experiment.
    """
    row = claim(claim_id)
    ours = float(ours)
    status = "reproduced" if within(row, ours) else "deviates"
    rec = {"id": claim_id, "ours": ours, "status": status, "note": note, "source": source}
    atomic_write_text(_claims_dir(profile) / f"{claim_id}.json", json.dumps(rec))
    return {**row, **rec}


def clear_claims(profile: str) -> None:
    shutil.rmtree(_claims_dir(profile), ignore_errors=True)


def ledger(profile: str, hardware: set[str] | None = None) -> pd.DataFrame:
    """One row per claim: id, section, claim, paper, ours, status, note (and kind, chapter).

    A claim without a recorded number is "needs hardware not present" when its kind is a
    GPU or cluster kind absent from ``hardware`` (default: none present), else "not yet
    implemented".  The ledger is also written to ``build/results/<profile>/claims.csv``.
    """
    hardware = set() if hardware is None else set(hardware)
    df = claims()
    recs = {}
    for p in _claims_dir(profile).glob("*.json"):
        r = json.loads(p.read_text())
        recs[r["id"]] = r
    ours, status, note, source = [], [], [], []
    for _, c in df.iterrows():
        r = recs.get(c.id)
        if r is not None:
            ours.append(r["ours"])
            status.append(r["status"])
            note.append(r.get("note", ""))
            source.append(r.get("source", ""))
        else:
            ours.append(float("nan"))
            requires = c.get("requires") if isinstance(c.get("requires"), str) else ""
            if c.kind != "model" and c.kind not in hardware:
                status.append("needs hardware not present")
                note.append(f"needs {requires}" if requires else
                            f"needs {KINDS[c.kind]}: run `make notebook NB={c.chapter} PROFILE=gpu` there")
            else:
                status.append("not yet implemented")
                note.append(f"planned in {c.chapter}")
            source.append("")
    df = df.assign(ours=ours, status=status, note=note, source=source)
    out = df[["id", "section", "paper", "ours", "status", "note"]]
    atomic_write_csv(out, paths.results_dir(profile) / "claims.csv")
    return df


def ledger_counts(df: pd.DataFrame) -> dict:
    return {s: int((df.status == s).sum()) for s in STATUSES}


def ledger_summary_markdown(df: pd.DataFrame, profile: str) -> str:
    c = ledger_counts(df)
    total = len(df)
    return (f"**Claims ledger** ({total} quantitative claims, profile `{profile}`): "
            f"{c['reproduced']} reproduced, {c['deviates']} deviate, "
            f"{c['not yet implemented']} not yet implemented, "
            f"{c['needs hardware not present']} need hardware not present here. "
            f"See the [Claims ledger](claims-ledger) chapter.\n")


def side_by_side(paper_df: pd.DataFrame, ours_df: pd.DataFrame, on: list[str], value: str,
                 relative: bool = False) -> pd.DataFrame:
    """Join a paper table and our table on ``on`` and show ``value`` as
    paper | this artifact | difference (absolute, or relative when ``relative``)."""
    m = paper_df[on + [value]].merge(ours_df[on + [value]], on=on, how="outer", suffixes=(" (paper)", " (this artifact)"))
    p, o = m[f"{value} (paper)"], m[f"{value} (this artifact)"]
    m["difference"] = (o - p) / p if relative else o - p
    return m


def hardware_present() -> set[str]:
    """{"gpu"} when a CUDA GPU is visible to torch (if torch is installed); "cluster" is never
    assumed: multi-GPU claims are recorded by runs on such machines."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return set()
    try:
        return {"gpu"} if torch.cuda.is_available() else set()
    except Exception:
        return set()
