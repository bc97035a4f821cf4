"""Claims as code: every claim of ``data/paper/claims.yaml`` computed from this build's results,
the ledger recomputed on every build (:func:`build_ledger`; nothing is kept between builds but
the experiments' CSVs and ``.meta.json``).  Chapters write ``claims.view(profile, ids)``.

* :mod:`.registry`: :func:`claim`, :class:`Value`, :class:`Spec`, :data:`REGISTRY` (claim id ->
  the result stems it reads, its function, its kind of evidence), the tolerance rule;
* :mod:`.functions`: one module of claim functions per chapter;
* :mod:`.ledger`: :func:`evaluate`, :func:`build_ledger`, :func:`view`, ``python -m tempo ledger``.

Verdicts are :data:`STATUSES` (reproduced, consistent, deviates, not run in this build, needs a
recorded trace / a GPU / a cluster) and the categories of :data:`CATEGORIES` (shown, counted
apart, never a verdict); a claim whose yaml ``needs`` a trace, GPU or cluster gets a verdict only
from that kind of evidence.  Tolerance: the largest of the paper's printed precision, its stated
spread and our own bootstrap half-width, unless the yaml gives ``tol`` with a ``tol_why``.  The
ledger chapter explains each.
"""
from __future__ import annotations

from ...paper.claims_file import BOUNDS, TOL_KINDS, claim_rows, precision
from .registry import (CATEGORIES, CONSISTENCY, EVIDENCE, NEED_STATUS, REGISTRY, SATISFIES, STATUSES, VERDICTS, Spec, Value,
                       bootstrap_ci, check, claim, format_value, printed, seed_range, tolerance)
from .ledger import (RECORD_TRACE, build_ledger, claims_reading, counts, evaluate, load_inputs, need_note,
                     sensitivity, sensitivity_view, show_table, summary_markdown, trace_need_note, verdict_moves, view)

__all__ = ["CATEGORIES", "BOUNDS", "TOL_KINDS", "claim_rows", "precision", "CONSISTENCY", "EVIDENCE", "NEED_STATUS", "REGISTRY",
           "SATISFIES", "STATUSES", "Spec", "Value", "bootstrap_ci", "check", "claim", "format_value", "printed",
           "tolerance", "RECORD_TRACE", "build_ledger", "claims_reading", "counts", "evaluate",
           "load_inputs", "need_note", "sensitivity", "sensitivity_view", "show_table", "summary_markdown",
           "trace_need_note", "verdict_moves", "view", "VERDICTS", "seed_range"]
