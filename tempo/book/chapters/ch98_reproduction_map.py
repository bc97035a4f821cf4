"""Chapter 98, *The reproduction map* (``notebooks/98_reproduction_map.md``): the map checked
against the ledger, its counts per category, and what a calibration on an H200 should find
before it runs.  The map itself is :mod:`tempo.book.repro`."""
from __future__ import annotations

import pandas as pd

from ...paper import claims_file

#: (expert shape, the paper's parameter set) of the floors the chapter predicts
FLOOR_SHAPES = [("dsv3", "dsv3-offline"), ("qwen3-30b", "qwen3-30b-offline"), ("dsv2-lite", "dsv2lite-offline")]


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


def measured_vs_expected(recs: pd.DataFrame, hbm_tb_s: float = 4.8) -> pd.DataFrame:
    """Every fp8 GPU recording (DeepGEMM: the prediction assumes one byte per weight) under
    ``data/measured/`` (``recs``: ``tempo.measured.catalog.recordings("calibration")``) of a shape
    :data:`FLOOR_SHAPES` predicts, with its fitted floor b and inflection (Eq. 1, the recording's
    own ``fit.json``; n* is the fit's own inflection, where one expert's two pieces cross) beside
    the prediction made before measuring."""
    from ...measured.catalog import load_recording
    from .. import repro

    rows = []
    from pathlib import Path

    for _, r in recs[recs.backend == "deep_gemm"].iterrows():
        pset = dict(FLOOR_SHAPES).get(r["shape"])
        if pset is None:
            continue
        _, fits, _ = load_recording(r["path"])
        params = fits["max_affine"]["params"]
        e = repro.expected_floor(r["shape"], pset, hbm_tb_s)
        rows.append({"recording": f"{r['machine']}/{Path(r['path']).name}", "shape": r["shape"], "backend": r["backend"],
                     "cells": int(r["cells"]), "measured b (us)": params["b"], "expected b, low (us)": e["b_lo_us"],
                     "expected b, high (us)": e["b_hi_us"], "measured n*": params.get("n_star", params["b"] / params["beta"]),
                     "expected n*, low": e["nstar_lo"], "expected n*, high": e["nstar_hi"],
                     "fit error %": 100 * fits["max_affine"]["error"]})
    return pd.DataFrame(rows)


def measured_text(table: pd.DataFrame) -> str:
    """Markdown from :func:`measured_vs_expected`: whether a GPU run has been recorded, and for
    each recording whether its floor landed in the predicted range, below it or above it."""
    if table.empty:
        return "No GPU run of this artifact has been recorded yet: the range above is a prediction only."
    out = [f"{len(table)} GPU recording{'s' if len(table) > 1 else ''} of these shapes "
           f"{'are' if len(table) > 1 else 'is'} under `data/measured/` (the table above)."]
    for _, r in table.iterrows():
        lo, hi, b = r["expected b, low (us)"], r["expected b, high (us)"], r["measured b (us)"]
        where = ("inside the predicted range" if lo <= b <= hi else
                 f"{'below' if b < lo else 'above'} the predicted {lo:.1f}-{hi:.1f} us")
        nlo, nhi, ns = r["expected n*, low"], r["expected n*, high"], r["measured n*"]
        nwhere = ("inside the predicted range" if nlo <= ns <= nhi else
                  f"{'below' if ns < nlo else 'above'} the predicted {nlo:.0f}-{nhi:.0f}")
        out.append(f"`{r['recording']}` ({r['cells']} cells): b = {b:.2f} us, {where}; n* ≈ {ns:.0f} "
                   f"tokens, {nwhere}.")
    return " ".join(out)
