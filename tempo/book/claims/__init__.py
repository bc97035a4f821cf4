"""Claims as code: every claim of ``data/paper/claims.yaml`` is computed from this build's
experiment results, and the ledger is recomputed from them on every build.

The package: :mod:`.registry` (the :func:`claim` decorator, :class:`Value`, :class:`Spec`,
:data:`REGISTRY`, the tolerance rule), :mod:`.functions` (one module of claim functions per
chapter) and :mod:`.ledger` (:func:`evaluate`, :func:`build_ledger`, :func:`view`, ``python -m tempo
ledger``); ``claims.yaml`` itself is read by :func:`tempo.paper.claims_file.claim_rows`.  Chapters use
this package's names: ``from tempo.book import claims; claims.view(profile, ids)``.

* :data:`REGISTRY` maps a claim id to a :class:`Spec`: the result CSVs it reads
  (``build/results/<profile>/<stem>.csv``, written by :func:`tempo.studies.run`), a small
  function of those frames that yields our value, and the kind of evidence that value is.
* A claim the paper computed on a recorded routing trace, on a GPU or on a cluster declares
  that need in the yaml (``needs: trace | gpu | cluster``, implied by ``kind: gpu | cluster``).
  It gets a verdict only from evidence of that kind (a recorded trace; a measurement on a GPU
  or cluster); a CPU or synthetic stand-in may appear in its note, never as a verdict.
* :func:`build_ledger` rebuilds every verdict from the results present now.  A claim whose inputs
  this build did not produce reads "not run in this build", never an old verdict: nothing is
  stored between builds except the experiments' CSVs and their ``.meta.json`` provenance.

Verdicts (:data:`STATUSES`):

* **reproduced**: an independent computation that could have failed lands within tolerance;
* **consistent**: an identity or arithmetic on the paper's own parameters agrees; shown, never
  counted as a reproduction;
* **deviates**: computed, outside the tolerance (the note gives what we can show);
* the categories of :data:`CATEGORIES` (stand-in, machine figure, not computable): a value shown
  beside its claim and counted apart, never a verdict;
* **not run in this build**: its inputs are missing from ``build/results/<profile>/``;
* **needs a recorded trace / a GPU / a cluster**: the evidence this build has cannot decide it.

Tolerance (one policy, also stated at the head of ``claims.yaml`` and in the ledger chapter):
the largest of (1) the paper's stated precision, half a unit of the last digit it prints;
(2) the spread the paper reports for the number (``spread`` in the yaml); (3) the half-width
of our own statistical uncertainty (a bootstrap interval over batches or seeds, where the
statistic allows one).  Exceptions carry ``tol`` and a written ``tol_why`` in the yaml.  A range
keeps both ends; a claim about a change is checked as that change.
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
