"""Chapter 98, *The reproduction map* (``notebooks/98_reproduction_map.md``): the map checked
against the ledger, its counts per category, and what a calibration on an H200 should find
before it runs.  The map itself is :mod:`tempo.book.repro`."""
from __future__ import annotations

import pandas as pd

from ...paper import claims_file
from ..repro import FLOOR_SHAPES
from .ch05_calibration import h200_prediction, prediction_check


def checked_map() -> pd.DataFrame:
    """The reproduction map (:func:`tempo.book.repro.load_map`), checked complete against the
    ledger's claim ids; a ValueError lists its problems."""
    from .. import repro

    rmap = repro.load_map()
    problems = repro.check_map(rmap, claims_file.claims().id)
    if problems:
        raise ValueError(f"the reproduction map is incomplete: {problems}")
    return rmap


def counts_table(rmap: pd.DataFrame) -> pd.DataFrame:
    """Items per category of need (:func:`tempo.book.repro.counts`), indexed by category."""
    from .. import repro

    return repro.counts(rmap).set_index("category")


def expected_floors(hbm_tb_s: float = 4.8, shapes=None) -> pd.DataFrame:
    """Per shape of :data:`FLOOR_SHAPES`, what a calibration on a GPU with ``hbm_tb_s`` TB/s
    should find (:func:`tempo.book.repro.expected_floor`), with the chapter's column labels."""
    from .. import repro

    exp = pd.DataFrame([repro.expected_floor(s, p, hbm_tb_s) for s, p in (shapes or FLOOR_SHAPES)])
    return exp.rename(columns={"roofline_us": "roofline floor (us)", "b_lo_us": "expected b, low (us)",
                               "b_hi_us": "expected b, high (us)", "beta_us": "beta of the paper's fit (us/token)",
                               "nstar_lo": "expected n*, low", "nstar_hi": "expected n*, high"})


def expected_glue(hbm_tb_s: float = 4.8) -> dict:
    """The numbers the "Before measuring on one H200" prose quotes, from :func:`expected_floors`
    (DSv3 row) and the paper's DSv3 fit: the expected floor range, the roofline bound, the
    paper's floor and inflection, and the expected inflection range."""
    from ...core.cost import CostModel

    e = expected_floors(hbm_tb_s).set_index("shape").loc["dsv3"]
    paper_fit = CostModel.named("dsv3-offline")
    return {"h200_b_lo": e["expected b, low (us)"], "h200_b_hi": e["expected b, high (us)"],
            "h200_roof": e["roofline floor (us)"], "paper_b": paper_fit.b, "paper_nstar": paper_fit.n_star,
            "h200_ns_lo": e["expected n*, low"], "h200_ns_hi": e["expected n*, high"]}


def measured_check(recs: pd.DataFrame, hbm_tb_s: float = 4.8) -> tuple[pd.DataFrame, str]:
    """The prediction above against every fp8 GPU recording of a predicted shape (``recs``:
    ``tempo.measured.catalog.recordings("calibration")``): chapter 05's check
    (:func:`tempo.book.chapters.ch05_calibration.prediction_check`), the same three fits and
    verdicts, so the two pages say one thing.  Returns ``(table, sentence)``."""
    return prediction_check(recs, h200_prediction(hbm_tb_s))
