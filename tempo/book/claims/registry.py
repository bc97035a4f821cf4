"""The claims registry: what a claim's computation is, how its value is checked, how it prints.

* :func:`claim` registers ``fn(frames) -> Value | float | tuple`` as the computation of a claim
  id of ``data/paper/claims.yaml`` (read by :func:`tempo.book.paper.claim_rows`) in
  :data:`REGISTRY`, with the result CSVs it reads (``inputs``), the kind of evidence its value
  is (:data:`EVIDENCE`) and where the value comes from (``provenance``).  The functions live in
  :mod:`tempo.book.claims.functions`, one module per chapter.
* :func:`tolerance` and :func:`check` are the one tolerance rule (see :mod:`tempo.book.claims`).
* :func:`format_value` and :func:`printed` format our number and the paper's for the ledger.

Imports nothing of the book but :mod:`tempo.book.paper`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..paper import precision

STATUSES = ["reproduced", "consistent", "deviates", "not run in this build",
            "needs a recorded trace", "needs a GPU", "needs a cluster"]
NEED_STATUS = {"trace": "needs a recorded trace", "gpu": "needs a GPU", "cluster": "needs a cluster"}
#: evidence kinds a value can rest on; the first two give "consistent", not "reproduced"
EVIDENCE = {"paper-parameters": "arithmetic on the paper's own parameters",
            "identity": "true by construction of the code",
            "model": "model-space computation (cost model, solver, MILP)",
            "synthetic": "model-space computation on synthetic routing",
            "machine": "wall-clock time on this build's machine",
            "trace": "model-space replay of a recorded routing trace",
            "gpu": "measurement on a GPU",
            "cluster": "measurement on a multi-GPU cluster"}
CONSISTENCY = {"paper-parameters", "identity"}
#: which evidence can decide a claim that declares a need
SATISFIES = {"trace": {"trace"}, "gpu": {"gpu"}, "cluster": {"cluster"}}


# ------------------------------------------------------------------ values and specs


@dataclass
class Value:
    """Our number for a claim.  ``ours`` is a float, or a ``(low, high)`` pair for a range
    claim (both ends) and for a ``tight`` claim (lower and upper estimate).  ``ci`` is our own
    95% uncertainty interval of a scalar (bootstrap), or None where the statistic has none."""
    ours: float | tuple
    ci: tuple | None = None
    note: str = ""
    evidence: str | None = None  # overrides the spec's (e.g. a trace that turns out synthetic)
    provenance: str = ""         # overrides the spec's description


@dataclass
class Spec:
    inputs: tuple
    fn: Callable[[dict], Value]
    evidence: str
    provenance: str
    reads_measured: bool = False


REGISTRY: dict[str, Spec] = {}


def claim(claim_id: str, inputs=(), evidence: str = "synthetic", provenance: str = ""):
    """Register ``fn(frames) -> Value | float | tuple`` as the computation of ``claim_id``."""
    if evidence not in EVIDENCE:
        raise ValueError(f"evidence must be one of {sorted(EVIDENCE)}, got {evidence!r}")

    def deco(fn):
        if claim_id in REGISTRY:
            raise ValueError(f"claim {claim_id!r} registered twice")
        REGISTRY[claim_id] = Spec(tuple(inputs), fn, evidence, provenance)
        return fn

    return deco


def bootstrap_ci(values, stat=np.median, n: int = 400, seed: int = 0, level: float = 0.95) -> tuple:
    """Percentile bootstrap interval of ``stat`` over the items of ``values`` (batches, windows
    or seeds).  Fewer than 3 items: the degenerate interval at the statistic."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) < 3:
        s = float(stat(v)) if len(v) else float("nan")
        return (s, s)
    rng = np.random.default_rng(seed)
    boots = np.array([stat(v[rng.integers(0, len(v), len(v))]) for _ in range(n)])
    a = (1 - level) / 2
    return (float(np.quantile(boots, a)), float(np.quantile(boots, 1 - a)))


# ------------------------------------------------------------------ the verdict


def tolerance(row: dict, value: Value) -> tuple[float, str]:
    """The tolerance in the claim's unit and how it arose: the largest of the paper's precision,
    its reported spread and our uncertainty, unless the yaml states a justified exception."""
    if "tol" in row:
        kind = row.get("tol_kind", "abs")
        return float(row["tol"]), f"exception ({kind} {row['tol']}): {row['tol_why']}"
    texts = row["paper_text"] if isinstance(row["paper_text"], list) else [row["paper_text"]]
    parts = {"paper precision": max(precision(t) for t in texts)}
    if row.get("spread") is not None:
        parts["paper spread"] = float(row["spread"])
    if value is not None and value.ci is not None and all(np.isfinite(value.ci)):
        parts["our 95% interval"] = (value.ci[1] - value.ci[0]) / 2
    name = max(parts, key=parts.get)
    return parts[name], name


def check(row: dict, value: Value) -> tuple[bool, str]:
    """Is ``value`` within the claim's tolerance?  Returns (ok, how the tolerance arose)."""
    tol, why = tolerance(row, value)
    kind = row.get("tol_kind", "abs") if "tol" in row else "abs"
    bound = row.get("bound")
    paper = row["paper"]
    ours = value.ours

    def near(x, p):
        if x is None or not np.isfinite(x):
            return False
        if kind == "rel":
            return abs(x - p) <= tol * abs(p) + 1e-12
        if kind == "factor":
            return p / tol - 1e-12 <= x <= p * tol + 1e-12
        return abs(x - p) <= tol + 1e-12

    def slack(p):
        return tol * abs(p) if kind == "rel" else (p * (tol - 1) if kind == "factor" else tol)

    if isinstance(paper, list):
        if isinstance(ours, tuple):
            return near(ours[0], paper[0]) and near(ours[1], paper[1]), why
        return bool(np.isfinite(ours) and paper[0] - slack(paper[0]) <= ours <= paper[1] + slack(paper[1])), why
    if bound == "tight":   # ours = (lower estimate, upper estimate) of the observed worst case
        lo, hi = ours if isinstance(ours, tuple) else (ours, ours)
        return bool(np.isfinite(lo) and lo >= paper - slack(paper) - 1e-12
                    and hi <= float(row["limit"]) + 1e-12), why
    x = ours[1] if isinstance(ours, tuple) and bound == "upper" else (ours[0] if isinstance(ours, tuple) else ours)
    if x is None or not np.isfinite(x):
        return False, why
    if bound == "upper":
        return x <= paper + slack(paper) + 1e-12, why
    if bound == "lower":
        return x >= paper - slack(paper) - 1e-12, why
    return near(x, paper), why


def printed(text) -> str:
    """The paper's number as printed: ``"0.880"``, a range ``"4.5 to 6.0"``."""
    return " to ".join(text) if isinstance(text, list) else str(text)


def format_value(x) -> str:
    """Our number as the ledger prints it: 4 significant digits, a range as ``"low to high"``."""
    if x is None:
        return ""
    if isinstance(x, (tuple, list)):
        return " to ".join(format_value(v) for v in x)
    if isinstance(x, float) and not math.isfinite(x):
        return "nan"
    return f"{x:.4g}" if isinstance(x, float) else str(x)
