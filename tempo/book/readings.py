"""The readings of ``data/paper/readings.yaml`` as the book uses them: the chapters run every
study the ledger's claims read under :meth:`Reading.paper` (passed explicitly,
``studies.run(..., reading=READING)``), and the ledger shows what each reading moves.

The loader and the :class:`Reading` object live in :mod:`tempo.core.readings` (the studies take
a reading as a parameter and may not import the book); this module re-exports them and adds the
tables a page shows."""
from __future__ import annotations

import pandas as pd

from ..core.readings import BATCH_LADDERS, N_SEEDS, SKEW_GRIDS, Reading, ReadingSpec, spec, specs  # noqa: F401

PAPER = Reading.paper  # constructors, for chapters: READING = readings.PAPER()
LIBRARY = Reading.library


def table() -> pd.DataFrame:
    """One row per reading: id, section, how settled, the paper's choice, the library's
    default, the alternatives and the claims it moves (in file order)."""
    return pd.DataFrame([{"reading": s.id, "section": s.section, "settled": s.settled, "paper": s.paper,
                          "library": s.library, "alternatives": ", ".join(s.choices), "claims": len(s.claims),
                          "calibration": s.calibration} for s in specs().values()]).set_index("reading")


def claims_of(reading_id: str) -> list[str]:
    """The ledger claims a reading moves (its ``claims`` list)."""
    return list(spec(reading_id).claims)


def readings_of(claim_id: str) -> list[str]:
    """The readings whose ``claims`` list names ``claim_id``, in file order."""
    return [s.id for s in specs().values() if claim_id in s.claims]


def matrix() -> pd.DataFrame:
    """Claims x readings: True where the reading lists the claim (rows: every claim some
    reading lists, sorted)."""
    ids = sorted({c for s in specs().values() for c in s.claims})
    return pd.DataFrame({s.id: [c in s.claims for c in ids] for s in specs().values()}, index=pd.Index(ids, name="claim"))
