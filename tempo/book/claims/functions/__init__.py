"""One small function per claim of ``data/paper/claims.yaml``, one module per chapter.

Each function takes ``frames`` (result stem -> DataFrame, the CSVs named in its ``inputs``) and
returns a :class:`tempo.book.claims.registry.Value` (or a float, a pair, or None when the results
hold no cell the claim is about).  It is registered under its claim id by
:func:`tempo.book.claims.registry.claim` where it is defined: ``grep -rn '"<id>"'`` in this folder
finds it.  The one-liners say which slice of which result the paper's sentence refers to; the
comments cite the paper where the slice is a choice.

* :mod:`.ch01` - :mod:`.ch07`: the claims of each chapter (chapter 04 in two parts,
  :mod:`.ch04_regimes` and :mod:`.ch04_drift`);
* :mod:`.common`: provenance texts and result slices several chapters use;
* :mod:`.measured`: reading the GPU and cluster recordings ``python -m tempo ingest`` stored;
* :mod:`.trace`: the claims the paper computes on recorded routing (:data:`TRACE_CLAIMS`),
  wrapped here once every chapter registered.

Importing this package registers every claim (:mod:`tempo.book.claims.ledger` does).
"""
from . import ch01, ch02, ch03, ch04_regimes, ch04_drift  # noqa: F401  (registration)
# chapter 07 before 05 and 06: measured.MEASURED_CLAIMS lists the measured claims in the order
# ingest and the ledger chapter print them (wc_*, calib_rank_agreement; serve_*, serve_gil_tax)
from . import ch07, ch05, ch06  # noqa: F401,E402  (registration)
from .trace import TRACE_CLAIMS, trace_evidence, wrap_trace_claims

wrap_trace_claims()

__all__ = ["ch01", "ch02", "ch03", "ch04_regimes", "ch04_drift", "ch05", "ch06", "ch07", "TRACE_CLAIMS",
           "trace_evidence"]
