"""Chapter 08, *Your model* (``notebooks/08_your_model.md``): the tables the walk-through shows
while it takes a new expert shape from its roofline estimate to a fitted cost model and a
dispatch comparison."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ...core.cost import CostModel
from ...core.instance import Instance
from ...core.models import ModelShape
from ...paper import tables
from .ch01_balance_time import dispatcher_makespans  # noqa: F401  (the chapter compares dispatchers with it)
from .common import recordings_table  # noqa: F401  (the chapter lists the recordings with it)


def floor_estimate(shape: ModelShape, hbm_bytes_per_s: float = 4.8e12) -> pd.DataFrame:
    """What to expect of an expert's floor b before measuring (Section 2.2): its fp8 bytes, the
    roofline floor bytes / bandwidth, and that floor times the paper's range of fitted floors
    over their roofline bounds.  One row."""
    if not hbm_bytes_per_s > 0:
        raise ValueError(f"hbm_bytes_per_s must be positive, got {hbm_bytes_per_s}")
    bound_us = shape.bytes(1.0) / hbm_bytes_per_s * 1e6                     # fp8: one byte per weight
    lo, hi = (tables.text_number("roofline", f"fitted_over_roofline_{q}") for q in ("min", "max"))
    return pd.DataFrame([{"expert MB (fp8)": shape.bytes(1.0) / 1e6, "roofline floor (us)": bound_us,
                          "expected b, from (us)": lo * bound_us, "to (us)": hi * bound_us}])


def fit_summary(model: CostModel, samples: pd.DataFrame) -> pd.DataFrame:
    """A fitted cost model's parameters and its mean relative error (%) on ``samples``."""
    from ...calib import fit_error

    return pd.DataFrame([{"a (us)": model.a, "b (us)": model.b, "c (us)": model.c,
                          "beta (us/token)": model.beta, "mean fit error %": 100 * fit_error(model, samples)}])


# ---------------------------------------------------------------------------- step 2: the recording
def pick_recording(recs: pd.DataFrame, shape: str) -> pd.Series:
    """The recording of expert shape ``shape`` the chapter reads, chosen as chapter 05 chooses
    (:func:`tempo.measured.catalog.pick`: a GPU one first, then the longest grid, then the
    newest) from ``tempo.measured.catalog.recordings("calibration")``; ValueError naming the
    shapes recorded when there is none."""
    from ...measured import catalog

    if not {"shape", "cells", "backend"} <= set(recs.columns):
        raise ValueError("recs must be a calibration listing (columns shape, backend, cells, ...)")
    rec = catalog.pick(recs, shape)
    if rec is None:
        raise ValueError(f"no recording of shape {shape!r}; recorded: {sorted(set(recs['shape']))}")
    return rec


def is_gpu(rec: pd.Series) -> bool:
    """Whether a recording was measured on a GPU (its backend is not the CPU reference)."""
    return str(rec["backend"]) != "cpu"


def chart_G(samples: pd.DataFrame, most: int = 4) -> list[int]:
    """Up to ``most`` activation counts of the recording's grid for the fit chart, spread from
    the smallest to the largest (every one when there are no more than ``most``)."""
    have = sorted(int(g) for g in set(samples[samples.kind == "grid"].G))
    if len(have) <= most:
        return have
    idx = np.unique(np.round(np.linspace(0, len(have) - 1, most)).astype(int))
    return [have[i] for i in idx]


def fit_glue(rec: pd.Series, model: CostModel, samples: pd.DataFrame, bound_us: float,
             check: pd.DataFrame | None = None) -> tuple[dict, dict]:
    """What step 3's paragraph glues, from the recording and the fit: ``(numbers, words)``.
    numbers: the cells, the fitted b, b over step 1's roofline bound ``bound_us``, n*, the mean
    error %, and the tile-aware fit's b and n* from ``check`` (chapter 05's
    :func:`~tempo.book.chapters.ch05_calibration.prediction_check` table; NaN when it does not
    hold this recording); words: the recording's device, shape, backend and date, ``ft_kind``
    (GPU or CPU), ``ft_err_verdict`` against the paper's 4-8%, the predicted b and n* ranges
    (``none`` without a check), where this fit lies against them, whether the tile-aware
    fit lies inside both, and ``ft_pred_words``, the paragraph on the prediction written from
    those (or saying there is none)."""
    from ...calib import fit_error

    err = 100 * fit_error(model, samples)
    mine = (check[check.recording == Path(str(rec["path"])).name] if check is not None and len(check) and "path" in rec
            else pd.DataFrame())
    tile = mine[mine.form.str.startswith("tile-aware")] if len(mine) else mine
    t = tile.iloc[0] if len(tile) else None
    nan = float("nan")
    numbers = {"ft_cells": int(rec["cells"]), "ft_b": model.b, "ft_ratio": model.b / bound_us, "ft_bound": bound_us,
               "ft_ns": model.n_star, "ft_err": err, "ft_tile_b": nan if t is None else t["b (us)"],
               "ft_tile_ns": nan if t is None else t["n*"]}
    words = {"ft_device": str(rec["device"]), "ft_shape": str(rec["shape"]), "ft_backend": str(rec["backend"]),
             "ft_date": str(rec["date"]), "ft_kind": "GPU" if is_gpu(rec) else "CPU",
             "ft_err_verdict": "within" if err <= 8 else "above",
             "ft_pred_b": "none", "ft_pred_n": "none", "ft_b_where": "not compared with", "ft_n_where": "not compared with",
             "ft_tile": "not checked" if t is None else
             ("inside both ranges" if t["b held"] and t["n* held"] else "not inside both ranges")}
    if len(mine):
        p = mine.iloc[0]
        b_lo, b_hi = (float(v) for v in p["predicted b (us)"].split("-"))
        n_lo, n_hi = (float(v) for v in p["predicted n*"].split("-"))

        def where(x, lo, hi, digits):   # against the range as chapter 05 printed it
            return "inside" if round(lo, digits) <= round(x, digits) <= round(hi, digits) else "below" if x < lo else "above"

        words.update(ft_pred_b=p["predicted b (us)"], ft_pred_n=p["predicted n*"],
                     ft_b_where=where(model.b, b_lo, b_hi, 1), ft_n_where=where(model.n_star, n_lo, n_hi, 0))
    if len(mine):
        text = (f"Before measuring, chapter 05 predicted for this shape on an H200 b = {words['ft_pred_b']} us and "
                f"n* = {words['ft_pred_n']} tokens (chapter 01's exercise 3 scales the paper's n* by bandwidth the "
                f"same way). This fit's b is {words['ft_b_where']} that range and its n* {words['ft_n_where']} it.")
        if t is not None:
            text += (f" Eq. 1 has no term for the 128-token tiles of the grouped GEMM; the tile-aware fit (Eq. 2) of "
                     f"the same samples gives b = {numbers['ft_tile_b']:.1f} us and n* ≈ {numbers['ft_tile_ns']:.0f}: "
                     f"{words['ft_tile']} as printed, b to 0.1 us and n* to the token (chapter 05, \"The H200 "
                     f"prediction, checked\").")
    else:
        text = ("Chapter 05's prediction of b and n* does not cover this recording, so there is no predicted range "
                "to hold this fit against; chapter 01's exercise 3 shows how to scale the paper's n* by bandwidth "
                "for your GPU.")
    words["ft_pred_words"] = text
    return numbers, words


def dispatch_rows(batch: Instance, dispatch, n: int = 4) -> pd.DataFrame:
    """The dispatch table's rows of the ``n`` experts with the most tokens: per expert its
    tokens and replica count, and the share of its tokens for each replica column, labelled
    with the GPU of that replica (the hottest experts are the rows a dispatch table is for)."""
    prob = dispatch.probabilities(batch)
    hot = np.argsort(-batch.counts, kind="stable")[:n]
    width = int(batch.n_replicas[hot].max())
    rows = []
    for e in hot:
        row = {"expert": int(e), "tokens": int(batch.counts[e]), "replicas": int(batch.n_replicas[e])}
        for r in range(width):
            g = int(batch.replica_gpu[e, r]) if r < batch.n_replicas[e] else -1
            row[f"replica {r}"] = f"{prob[e, r]:.3f} (GPU {g})" if g >= 0 else ""
        rows.append(row)
    return pd.DataFrame(rows).set_index("expert")


# ---------------------------------------------------------------------------- step 4: the batch
def dispatcher_table(inst: Instance, model: CostModel, policies) -> pd.DataFrame:
    """Each dispatcher's makespan on ``inst`` (us), how far above the best (%), and its busiest
    GPU: activated experts G, tokens N and which piece of the cost model binds there."""
    from ...policies import solve

    if not policies:
        raise ValueError("policies must name at least one dispatcher")
    rows = []
    for p in policies:
        d = solve(inst, model, p)
        G, N, T = model.gpu_features(inst, d)
        times = model.gpu_times(inst, d)
        g = int(np.argmax(times))
        floor = float(np.asarray(model.time(G[g], 0.0, T[g])))        # the activation piece alone
        rows.append({"dispatcher": p, "makespan (us)": float(times[g]), "busiest GPU": g,
                     "its activated experts G": int(G[g]), "its tokens N": float(N[g]),
                     "binding piece": "floor" if floor >= times[g] * (1 - 1e-12) else "tokens"})
    df = pd.DataFrame(rows)
    return df.assign(**{"above the best %": 100 * (df["makespan (us)"] / df["makespan (us)"].min() - 1)})


def ties_text(table: pd.DataFrame) -> str:
    """The dispatchers of :func:`dispatcher_table` that tie (the same makespan to 1e-9), each
    group with the piece that binds on their busiest GPUs; empty when no two tie."""
    out = []
    ms = table["makespan (us)"]
    for _, group in table.groupby(ms.round(6), sort=True):
        if len(group) < 2:
            continue
        r = group.iloc[0]
        if (group["binding piece"] == "floor").all() and group["its activated experts G"].nunique() == 1:
            why = f"the floor binds at {int(r['its activated experts G'])} activations each"
        elif (group["binding piece"] == "tokens").all() and group["its tokens N"].round(6).nunique() == 1:
            why = f"the tokens bind at {r['its tokens N']:.0f} each"
        else:
            why = "different busiest GPUs, same cost"
        out.append(f"{', '.join(f'`{p}`' for p in group.dispatcher)} tie at {r['makespan (us)']:.1f} us: {why}.")
    return " ".join(out)


# ---------------------------------------------------------------------------- restricted replicas, by hand
#: the worked example: six experts on three GPUs; experts 0, 1 and 5 have two replicas, the rest one
EXAMPLE_COUNTS = [600, 300, 30, 30, 30, 30]
EXAMPLE_REPLICAS = [[0, 1], [1, 2], [0, -1], [1, -1], [2, -1], [2, 0]]
EXAMPLE_MODEL = dict(a=0.0, b=15.0, c=0.0, beta=0.2)


def restricted_example() -> tuple[Instance, CostModel]:
    """The chapter's restricted-replica instance (:data:`EXAMPLE_COUNTS`, :data:`EXAMPLE_REPLICAS`,
    three GPUs) and its cost model (:data:`EXAMPLE_MODEL`)."""
    return Instance(EXAMPLE_COUNTS, EXAMPLE_REPLICAS, 3), CostModel(**EXAMPLE_MODEL)


def replica_table(inst: Instance, dispatch=None) -> pd.DataFrame:
    """One row per replica (expert e, column r of ``replica_gpu``): the GPU holding it
    (``replica_gpu[e, r]``) and, given a dispatch, the tokens it receives (``shares[e, r]``).
    Unused columns (-1) are left out."""
    rows = []
    for e, r in zip(*np.nonzero(inst.valid)):
        row = {"expert e": int(e), "replica column r": int(r), "GPU replica_gpu[e, r]": int(inst.replica_gpu[e, r])}
        if dispatch is not None:
            row["tokens shares[e, r]"] = float(dispatch.shares[e, r])
        rows.append(row)
    return pd.DataFrame(rows)


def hand_check(inst: Instance, model: CostModel, predicted_us: float, policies=("tempo", "milp", "static")) -> pd.DataFrame:
    """The hand prediction against the library: each dispatcher's makespan (us) and its
    difference from ``predicted_us``."""
    from ...policies import solve

    rows = [{"dispatcher": p, "makespan (us)": model.makespan(inst, solve(inst, model, p))} for p in policies]
    df = pd.DataFrame(rows)
    return df.assign(**{"predicted (us)": float(predicted_us), "library - predicted (us)": df["makespan (us)"] - predicted_us})


def hand_check_text(check: pd.DataFrame, tol_us: float = 1e-6) -> str:
    """From :func:`hand_check`: which dispatchers reach the hand prediction, and the makespan of
    each that does not."""
    diff = check["library - predicted (us)"]
    hit = check[diff.abs() <= tol_us]
    out = [", ".join(f"`{p}`" for p in hit.dispatcher) + f" reach the predicted {check['predicted (us)'].iloc[0]:.0f} us."
           ] if len(hit) else []
    out += [f"`{r.dispatcher}` ends at {r['makespan (us)']:.1f} us, {'above' if r['library - predicted (us)'] > 0 else 'below'}."
            for _, r in check[diff.abs() > tol_us].iterrows()]
    return " ".join(out)


# ---------------------------------------------------------------------------- the running example
def toy_under(model: CostModel, label: str = "your fit") -> tuple[pd.DataFrame, dict, dict]:
    """Chapter 01's toy priced and solved under ``model`` (chapter 05's
    :func:`~tempo.book.chapters.ch05_calibration.toy_repriced`, the column named ``label``).
    Returns ``(table, numbers, words)`` with the keys renamed ``toy8_*`` for this page's glue;
    ``toy8_tiles`` says whether ``model`` prices M-tiles (Eq. 2) or not (Eq. 1)."""
    from .ch05_calibration import toy_repriced, toy_repriced_words

    table, n = toy_repriced(model, label)
    words = toy_repriced_words(n)
    words["toy5_tiles"] = "prices every 128-token M-tile (Eq. 2)" if model.has_tiles else "has no tile term (Eq. 1)"
    rename = lambda d: {k.replace("toy5_", "toy8_", 1): v for k, v in d.items()}  # noqa: E731
    return table, rename(n), rename(words)
