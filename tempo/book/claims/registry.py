"""The claims registry: what a claim's computation is, how its value is checked, how it prints.

* :func:`claim` registers ``fn(frames) -> Value | float | tuple`` as the computation of a claim
  id of ``data/paper/claims.yaml`` (read by :func:`tempo.paper.claims_file.claim_rows`) in
  :data:`REGISTRY`, with the result CSVs it reads (``inputs``), the kind of evidence its value
  is (:data:`EVIDENCE`) and where the value comes from (``provenance``).  The functions live in
  :mod:`tempo.book.claims.functions`, one module per chapter.
* :func:`tolerance` and :func:`check` are the one tolerance rule (see :mod:`tempo.book.claims`).
* :func:`format_value` and :func:`printed` format our number and the paper's for the ledger.

Imports nothing of the book.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...paper.claims_file import precision

#: the statuses that are verdicts (an independent computation or arithmetic checked against the
#: paper's number); a category, a missing result and a need are not
VERDICTS = ("reproduced", "consistent", "deviates")


@dataclass(frozen=True)
class Category:
    """A status for a value the ledger shows beside its claim and counts apart, never as a
    verdict.  ``status``: the ledger's status; ``counted``: how the summary, the README and the
    book's intro count it (``"{n} {counted}"``); ``prefix``: the row's note begins
    ``"{prefix}: {why}"``; ``bar``, ``row``: its colours in the chapter's chart and table."""
    status: str
    counted: str
    prefix: str
    bar: str
    row: str


#: The categories, in the order the ledger counts them.  A new category is one entry here; a
#: claim function puts a value in it with ``Value(..., category=status, why=...)`` (or an
#: evidence kind maps to it, :data:`EVIDENCE_CATEGORY`).
CATEGORIES = (
    Category("stand-in", "stand-ins (measured on another GPU or on a partial grid: shown, not verdicts)",
             "stand-in, not a verdict", "#f58518", "#fde3c8"),
    Category("machine figure", "machine figures (a time on this build's machine, shown with the machine: not verdicts)",
             "a machine figure, not a verdict", "#b279a2", "#f1e4ee"),
    Category("not computable", "not computable (the results give no finite value; the note says why)",
             "not computable", "#9d755d", "#efe4dc"),
    Category("hangs on an unpublished choice",
             "hang on a choice the paper does not publish (the verdict differs between readings the text cannot "
             "decide: shown per reading, not judged)",
             "hangs on an unpublished choice, not a verdict", "#72b7b2", "#e0f0ef"),
    Category("stand-in: public trace", "stand-ins on a public trace (another model's routing: shown, not verdicts)",
             "stand-in on a public trace, not a verdict", "#fcbf7f", "#fdebd9"),
    Category("not computable on this trace: aggregates",
             "not computable on this trace (its steps are whole-run aggregates, not batches)",
             "not computable on this trace: aggregates", "#d6d6d6", "#f2f2f2"),
)
CATEGORY = {c.status: c for c in CATEGORIES}
#: evidence kinds whose values always fall in a category: a time on the build's machine is a
#: figure of that machine (Section 4.2's solve times), never a verdict
EVIDENCE_CATEGORY = {"machine": "machine figure"}
NEEDS_STATUSES = ("needs a recorded trace", "needs a GPU", "needs a cluster")
STATUSES = [*VERDICTS, *(c.status for c in CATEGORIES), "not run in this build", *NEEDS_STATUSES]
#: colours per status, in :data:`STATUSES` order: (bar, table row)
_BASE_COLORS = {"reproduced": ("#54a24b", "#d9f2d9"), "consistent": ("#a0d3a0", "#eef7ee"),
                "deviates": ("#e45756", "#f9d6d5"), "not run in this build": ("#bab0ac", "#eeeeee"),
                "needs a recorded trace": ("#f2cf5b", "#fbf0c9"), "needs a GPU": ("#4c78a8", "#dbe8f6"),
                "needs a cluster": ("#9ecae9", "#e8f1fa")}
STATUS_COLORS = {s: _BASE_COLORS[s] if s in _BASE_COLORS else (CATEGORY[s].bar, CATEGORY[s].row) for s in STATUSES}
NEED_STATUS = {"trace": "needs a recorded trace", "gpu": "needs a GPU", "cluster": "needs a cluster"}
#: evidence kinds a value can rest on; the first two give "consistent", not "reproduced"
EVIDENCE = {"paper-parameters": "arithmetic on the paper's own parameters",
            "identity": "true by construction of the code",
            "model": "model-space computation (cost model, solver, MILP)",
            "synthetic": "model-space computation on synthetic routing",
            "machine": "wall-clock time on this build's machine",
            "trace": "model-space replay of a recorded routing trace",
            "proxy": "model-space computation on the paper's synthetic proxy router, its skew calibrated to the "
                     "paper's printed statistic (the paper's own input)",
            "public-trace": "model-space replay of a public recording of another model's routing (not the paper's "
                            "trace)",
            "aggregate": "a trace whose steps are whole-run aggregates, not batches",
            "gpu": "measurement on a GPU",
            "cluster": "measurement on a multi-GPU cluster"}
CONSISTENCY = {"paper-parameters", "identity", "proxy"}
#: which evidence can decide a claim that declares a need
SATISFIES = {"trace": {"trace", "proxy"}, "gpu": {"gpu"}, "cluster": {"cluster"}}
#: evidence that is never a verdict but has a status of its own: a public recording of another
#: model (shown with its value), a trace of whole-run aggregates for a claim about batches
EVIDENCE_STATUS = {"public-trace": "stand-in: public trace", "aggregate": "not computable on this trace: aggregates"}


# ------------------------------------------------------------------ values and specs


@dataclass
class Value:
    """Our number for a claim.  ``ours`` is a float, or a ``(low, high)`` pair for a range
    claim (both ends) and for a ``tight`` claim (lower and upper estimate).  ``ci`` is our own
    95% uncertainty interval of a scalar (bootstrap), or None where the statistic has none.

    ``seeds``: for an extreme over random batches (a maximum or minimum over a grid, the
    ``random_maxima`` reading), the range ``(lowest, highest)`` of the statistic over
    ``n_seeds`` seeds (for a range claim, one such pair per end); :func:`check` then agrees when
    the paper's value lies within that range (widened by the paper's precision).

    ``stand_in``: why this value cannot decide the claim (a measurement on another GPU or on
    a partial grid, the ``hardware_grid`` reading): the ledger shows it with status
    "stand-in", never as a verdict.  ``category`` and ``why``: the same for any category of
    :data:`CATEGORIES` (``stand_in="x"`` is ``category="stand-in", why="x"``).

    ``cause``: what in this build's results makes the value what it is, computed from them (a
    decomposition, the cell that sets an extreme, the term that differs from the paper's
    setting); the ledger adds it to the note of a claim that deviates."""
    ours: float | tuple
    ci: tuple | None = None
    note: str = ""
    evidence: str | None = None  # overrides the spec's (e.g. a trace that turns out synthetic)
    provenance: str = ""         # overrides the spec's description
    seeds: tuple | None = None
    n_seeds: int = 0
    stand_in: str = ""
    cause: str = ""
    category: str = ""
    why: str = ""

    def __post_init__(self):
        if self.category and self.category not in CATEGORY:
            raise ValueError(f"category must be one of {sorted(CATEGORY)}, got {self.category!r}")
        if self.stand_in and not self.category:
            self.category, self.why = "stand-in", self.stand_in


def cause_of(fn, frame=None, needs=()) -> str:
    """``fn()``, the text of a :attr:`Value.cause`, or ``""`` when ``frame`` lacks one of the
    columns ``needs`` (a reduced result, a test's minimal frame): a cause is only written from
    the columns it reads."""
    if frame is not None and not set(needs) <= set(frame.columns):
        return ""
    return fn()


@dataclass
class Spec:
    inputs: tuple
    fn: Callable[[dict], Value]
    evidence: str
    provenance: str
    reads_measured: bool = False
    #: the readings the function itself reads (``fn(frames, reading=...)``), as opposed to
    #: those its input experiments ran under (``tempo.paper.readings``)
    uses: tuple = ()


REGISTRY: dict[str, Spec] = {}

#: the intermediates of one ledger build (:func:`once`), None outside :func:`one_build`
_ONCE: dict | None = None


@contextmanager
def one_build():
    """A block (one ledger build) within which :func:`once` computes each intermediate once;
    forgotten when the block ends (results change between builds)."""
    global _ONCE
    outer, _ONCE = _ONCE, ({} if _ONCE is None else _ONCE)
    try:
        yield
    finally:
        _ONCE = outer


def once(key, fn):
    """``fn()``, computed once per key within :func:`one_build` (a fit of a recording, a
    recording read from data/measured that several claims and their alternative readings
    share); outside it, every time.  The value is shared: callers must not change it."""
    if _ONCE is None:
        return fn()
    if key not in _ONCE:
        _ONCE[key] = fn()
    return _ONCE[key]


def claim(claim_id: str, inputs=(), evidence: str = "synthetic", provenance: str = "", uses=()):
    """Register ``fn(frames) -> Value | float | tuple`` as the computation of ``claim_id``.

    ``uses``: the readings of ``data/paper/readings.yaml`` the function reads itself (how it
    scores the results: ``milp_reference``, ``random_maxima``, ``printed_rounding`` ...); it is
    then called ``fn(frames, reading=...)`` with the reading under evaluation (the paper's for
    the verdict, each alternative for the ledger's sensitivity columns).  The readings the input
    experiments ran under are in their ``.meta.json``, not here."""
    if evidence not in EVIDENCE:
        raise ValueError(f"evidence must be one of {sorted(EVIDENCE)}, got {evidence!r}")
    if isinstance(uses, str):
        raise TypeError(f"uses must be a tuple of reading ids, got the string {uses!r}")

    def deco(fn):
        if claim_id in REGISTRY:
            raise ValueError(f"claim {claim_id!r} registered twice")
        REGISTRY[claim_id] = Spec(tuple(inputs), fn, evidence, provenance, uses=tuple(uses))
        return fn

    return deco


def bootstrap_ci(values, stat=np.median, n: int = 400, seed: int = 0, level: float = 0.95, strata=None) -> tuple:
    """Percentile bootstrap interval of ``stat`` over the items of ``values`` (batches, windows
    or seeds).  Fewer than 3 items: the degenerate interval at the statistic.

    ``strata`` (one label per value, e.g. the grid cell): a stratified bootstrap, resampling
    within each stratum, for a statistic over a designed grid whose random part is the batches
    (seeds) inside each cell; the grid itself is kept."""
    v = np.asarray(values, dtype=float)
    keep = np.isfinite(v)
    v = v[keep]
    if len(v) < 3:
        s = float(stat(v)) if len(v) else float("nan")
        return (s, s)
    rng = np.random.default_rng(seed)
    if strata is None:
        boots = np.array([stat(v[rng.integers(0, len(v), len(v))]) for _ in range(n)])
    else:
        labels = np.asarray(list(strata), dtype=object)
        if len(labels) != len(keep):
            raise ValueError(f"strata has {len(labels)} labels for {len(keep)} values")
        labels = labels[keep]
        groups = [np.flatnonzero(labels == u) for u in dict.fromkeys(labels.tolist())]
        # all n resamples of a stratum drawn at once: [n, len(stratum)] indices per stratum, side by side
        idx = np.concatenate([g[rng.integers(0, len(g), (n, len(g)))] for g in groups], axis=1)
        try:
            boots = np.asarray(stat(v[idx], axis=1), dtype=float)
        except TypeError:  # a statistic without an axis argument
            boots = np.array([stat(row) for row in v[idx]])
    a = (1 - level) / 2
    return (float(np.quantile(boots, a)), float(np.quantile(boots, 1 - a)))


def seed_range(per_seed) -> tuple:
    """``(lowest, highest)`` of a statistic computed once per seed (``per_seed``: a Series or
    array of per-seed values), for :attr:`Value.seeds`."""
    v = np.asarray(per_seed, dtype=float)
    return (float(np.nanmin(v)), float(np.nanmax(v)))


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

    if value.seeds is not None and bound is None:
        # an extreme over random batches (Section 3.2, Table 2; the random_maxima reading): the paper's
        # value is one draw of it; it agrees when it lies within the range our seeds give (each end of a
        # range claim within that end's range), widened by the paper's precision
        def within(p, rng):
            lo, hi = rng
            return bool(np.isfinite(lo) and np.isfinite(hi) and lo - slack(p) - 1e-12 <= p <= hi + slack(p) + 1e-12)

        if isinstance(paper, list):
            return within(paper[0], value.seeds[0]) and within(paper[1], value.seeds[1]), why
        return within(paper, value.seeds), why
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
