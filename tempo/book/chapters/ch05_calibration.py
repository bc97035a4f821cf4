"""Chapter 05, *Calibration* (``notebooks/05_calibration.md``): what a build measures per
profile, the recording the chapter's figures draw from and its fits, the listings of
recordings and gpu-check runs, the bootstrap and fit tables, and the Markdown the chapter's
prose writes from a recording (paper Section 2.2, Appendix B, Tables 6 and 7, Figs. 2-4, 9).
The measuring and fitting are :mod:`tempo.calib`."""
from __future__ import annotations

import re

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ...core.cost import CostModel
from ...paper import claims_file, tables
from .common import recordings_table
from .common import sizes as _sizes

#: per profile: bootstrap replicates, and whether the build measures the GPU kernel (gpu only)
SIZES = {"smoke": dict(n_boot=20, measure=False), "full": dict(n_boot=300, measure=False),
         "gpu": dict(n_boot=300, measure=True)}


def sizes(profile: str) -> dict:
    """The chapter's sizes for a book profile (:data:`SIZES`)."""
    return _sizes(SIZES, profile)


def paper_numbers() -> dict:
    """The paper's numbers the chapter's prose quotes, read from ``data/paper/`` (for
    :func:`tempo.book.paper.glue_numbers`): Table 6's DSv3 n*, the roofline section, Fig. 4's tile
    numbers, the bootstrap's intervals and Fig. 9's spreads."""
    t6p = tables.table(6).set_index("shape")
    f9p = tables.figure(9).set_index(["setting", "model"]).value
    return {
        "p_nstar_dsv3": float(t6p.loc["DSv3", "n_star"]),
        "p_dsv3_mb": tables.text_number("roofline", "dsv3_expert_mb"),
        "p_roof_lo": tables.text_number("roofline", "fitted_over_roofline_min"),
        "p_roof_hi": tables.text_number("roofline", "fitted_over_roofline_max"),
        "p_bw_lo": tables.text_number("roofline", "peak_bw_share_min"),
        "p_bw_hi": tables.text_number("roofline", "peak_bw_share_max"),
        "p_tile_blind_err": tables.text_number("fig4", "tile_blind_err"),
        "p_tile_err": claims_file.claim_row("tile_err")["paper"],
        "p_tile_step_lo": claims_file.claim_row("tile_step")["paper"][0],
        "p_tile_step_hi": claims_file.claim_row("tile_step")["paper"][1],
        "p_b2_over_b": claims_file.claim_row("b2_over_b")["paper"],
        "p_boot_b_lo": tables.text_number("calib", "bootstrap_b_lo"),
        "p_boot_b_hi": tables.text_number("calib", "bootstrap_b_hi"),
        "p_boot_corr": tables.text_number("calib", "bootstrap_corr_ab"),
        "p_f9_sameN_qwen3": float(f9p[("same N, different G", "Qwen3-30B (Testbed A grid)")]),
        "p_f9_sameN_dsv3": float(f9p[("same N, different G", "DSv3 (Testbed A grid)")]),
        "p_f9_sameG_qwen3": float(f9p[("same G, different N", "Qwen3-30B (Testbed A grid)")]),
        "p_f9_sameG_dsv3": float(f9p[("same G, different N", "DSv3 (Testbed A grid)")]),
    }


def measure(sizes: dict) -> list:
    """With ``sizes["measure"]`` (profile gpu): measure the paper's kernel (fp8 DeepGEMM) on the
    DSv3 and Qwen3-30B shapes into ``data/measured/``, or stop naming what is missing; the new
    recordings' folders.  Otherwise nothing is measured (an empty list)."""
    if not sizes["measure"]:
        return []
    from ...calib.backends import require
    from ...calib.record import calibrate_shapes

    require("deep_gemm")
    return calibrate_shapes("deep_gemm", ["dsv3", "qwen3-30b"], command="notebook 05_calibration profile=gpu")


def recordings_view(recs: pd.DataFrame) -> list:
    """What the chapter shows of the recordings (``tempo.measured.catalog.recordings("calibration")``): their
    listing (or that there is none) and whether any comes from a GPU.  A list to display."""
    from IPython.display import Markdown

    out = [Markdown("No recordings under `data/measured/` yet.") if recs.empty else recordings_table(recs)]
    gpu_recs = recs[recs.backend != "cpu"]
    out.append(Markdown(
        ("GPU recordings are present; the GPU figures below use the newest one of each shape."
         if len(gpu_recs) else
         "**No GPU recording exists yet**: every measured number in this chapter comes from the CPU recording listed "
         "above (float32 torch, the Qwen3-30B expert shape), and the paper's GPU claims stay marked as needing hardware "
         "in the ledger. The GPU backends are complete code (`tempo/calib/backends.py`); their fp8 layouts and the "
         "recording format are tested on CPU.")))
    return out


def gpu_check_view(chk: pd.DataFrame, newest) -> list:
    """What the chapter shows of the gpu-check runs: their listing
    (:func:`tempo.benchmarks.gpucheck.checks`) and the summary of the newest one as the check
    printed it (``newest``: :func:`tempo.benchmarks.gpucheck.newest_check`), or how to make one."""
    from IPython.display import Markdown

    if newest is None:
        return [Markdown("No gpu-check recording under `data/measured/` yet: run `make gpu-check` on a GPU node.")]
    return [recordings_table(chk), Markdown(demote_headings(newest[1]))]


def demote_headings(markdown: str, levels: int = 3) -> str:
    """``markdown`` with every ATX heading moved ``levels`` deeper (at most ``######``), so a
    summary written as a document (its title an H1) sits inside the chapter's sections instead
    of opening a new top-level part of the page.  Fenced code is left as it is."""
    out, fence = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        m = None if fence else re.match(r"(#{1,6})(\s)", line)
        out.append(line if m is None else "#" * min(6, len(m.group(1)) + levels) + line[len(m.group(1)):])
    return "\n".join(out)


def timer_table(newest):
    """The timer section (its ``timer`` table) of the newest gpu-check
    (:func:`tempo.benchmarks.gpucheck.newest_check`), or None without a check."""
    return None if newest is None else newest[2].get("timer")


# ---------------------------------------------------------------------------- the recording the figures use
@dataclass
class Recording:
    """The recording the chapter's figures draw from, with its three fits: ``m1`` the
    max-affine model with intercepts (Eq. 1), ``m0`` the same with ``a = c = 0`` (the form of
    Table 6), ``mt`` the tile-aware one (Eq. 2)."""
    samples: pd.DataFrame
    fits: dict
    manifest: dict
    label: str
    m1: CostModel
    m0: CostModel
    mt: CostModel


def main_recording(recs: pd.DataFrame) -> Recording:
    """The GPU recording of the DSv3 shape :func:`tempo.measured.catalog.pick` chooses, else
    its pick of any shape (a GPU one when there is one, else the CPU one), loaded and fitted
    (``recs``: ``tempo.measured.catalog.recordings("calibration")``)."""
    from ...calib import fit_cost_model
    from ...measured import catalog

    main = catalog.pick(recs, "dsv3")
    main = catalog.pick(recs) if main is None or main.backend == "cpu" else main
    if main is None:
        raise ValueError("recs holds no recording (data/measured/ is empty)")
    S, FITS, MAN = catalog.load_recording(main.path)
    label = f"{MAN['device']} · {MAN['backend']} · {MAN['shape']} · {MAN['date']}"
    return Recording(S, FITS, MAN, label, fit_cost_model(S, "max_affine").model,
                     fit_cost_model(S, "max_affine", intercept=False).model, fit_cost_model(S, "tile").model)


def regime_text(rec: Recording) -> str:
    """The prose under Fig. 2a: the Table 6 form's fit (and the one with intercepts), and
    model-free evidence of the two regimes on the recording's one-expert column."""
    from ...calib.fit import regime_evidence

    S, m0, m1, FITS = rec.samples, rec.m0, rec.m1, rec.fits
    one = S[(S.G == 1) & (S.kind == "grid")]
    ns0 = m0.n_star
    ev = regime_evidence(one, ns0)
    return (
        f"Fitted on the whole grid in the paper's Table 6 form (a = c = 0): b = {m0.b:.4g} us per activated expert, "
        f"beta = {m0.beta:.4g} us per token, inflection n* = b / beta = {ns0:.0f} tokens, fit error "
        f"{100 * FITS['max_affine_no_intercept']['error']:.1f}% (with intercepts: a = {m1.a:.3g}, b = {m1.b:.4g}, "
        f"c = {m1.c:.4g}, beta = {m1.beta:.4g}, error {100 * FITS['max_affine']['error']:.1f}%). "
        f"Regime evidence on the measured points of one expert: from 2 to {ev['flat_hi_n']:.0f} tokens the time varies by "
        f"{100 * ev['flat_variation']:.0f}% while the token count grows {ev['flat_hi_n'] / 2:.0f}-fold (flat), and from "
        f"{ev['lin_lo_n']:.0f} tokens on it grows by {ev['linear_slope']:.4g} us per token (linear; the fitted beta is "
        f"{m0.beta:.4g}). "
        + (f"On this CPU a single token (n = 1, {ev['t_one']:.0f} us) is cheaper than the flat level: a one-row product "
           "takes a matrix-vector path that streams the weights faster than the matrix-matrix one; the GPU kernels pad "
           "every expert to a 128-row tile and show no such step. The flat region is short on a CPU because it computes "
           "far fewer flops per byte of memory bandwidth than a GPU, so compute overtakes weight streaming after a few "
           "tokens. The CPU's timings are also noisy (a shared 2-core virtual machine), which is most of the fit error."
           if rec.manifest["backend"] == "cpu" and np.isfinite(ev["t_one"]) else ""))


def table6_paper() -> pd.DataFrame:
    """Table 6 as the paper prints it, its columns labelled ``(paper)``."""
    return tables.table(6).rename(columns={"b_us": "b (paper)", "beta_us_per_tok": "beta (paper)", "n_star": "n* (paper)",
                                          "fit_err_pct": "fit err % (paper)"})


def recording_fits_view(ours: pd.DataFrame):
    """This artifact's Table 6 rows (:func:`tempo.calib.record.recording_fits`) rounded to 4
    places, or a note that there are none."""
    from IPython.display import Markdown

    return ours.round(4) if len(ours) else Markdown("no recordings")


def cpu_roofline_note(rec: Recording) -> list:
    """On a CPU recording, the roofline check on this machine: the float32 expert's bytes, a
    copy loop's bandwidth measured now, the streaming bound and the fitted b against it.
    Nothing for a GPU recording.  A list to display."""
    from IPython.display import Markdown

    from ...calib.shapes import host_copy_bandwidth, shape

    MAN, m0 = rec.manifest, rec.m0
    if MAN["backend"] != "cpu":
        return []
    bw = host_copy_bandwidth()  # bytes/s, read + write, a 64 MB buffer past the caches
    sh = shape(MAN["shape"])
    roof = sh.bytes(4.0) / bw * 1e6
    return [Markdown(
        f"The same check on this recording's CPU: the float32 expert of shape {MAN['shape']} holds "
        f"{sh.bytes(4.0) / 1e6:.1f} MB; a copy loop on this machine moves about {bw / 1e9:.1f} GB/s, so streaming the "
        f"expert costs at least {roof:.0f} us. The fitted b is {m0.b:.0f} us, {m0.b / roof:.2f}x that bound "
        "(measured now, on whatever machine builds the book, while the recording may come from another one).")]


def tile_sweep_view(rec: Recording, profile: str) -> list:
    """Fig. 4 on the recording's fine tile sweep: the staircase against the tile-blind and the
    tile-aware fits, their errors and the fitted b2, the measured steps and the claims; or that
    the recording has no sweep.  A list to display."""
    from IPython.display import Markdown

    from ...calib import fit_error
    from ...calib.fit import tile_steps
    from .. import claims, figures

    m1, mt = rec.m1, rec.mt
    fine = figures.tile_window(rec.samples)  # the sweep plus grid points inside it
    if fine.empty:
        return [Markdown("This recording has no tile sweep.")]
    chart = figures.fig4_tile_staircase(fine, m1, mt)
    steps = tile_steps(fine)
    err_blind, err_tile = fit_error(m1, fine), fit_error(mt, fine)
    text = Markdown(f"Tile sweep: tile-blind model error {100 * err_blind:.1f}%, tile-aware {100 * err_tile:.1f}%; fitted "
                    f"b2 = {mt.b2:.3g} us ({mt.b2 / max(mt.b, 1e-12):.2f} b)."
                    + (" A CPU matrix product has no 128-row tiles, so no step is expected here, and the fitted b2 only "
                       "absorbs noise." if rec.manifest["backend"] == "cpu" else ""))
    return [chart, text, steps.round(1), claims.view(profile, ["tile_err", "b2_over_b", "tile_step"])]


def grid_spreads(rec: Recording) -> pd.DataFrame:
    """Fig. 9's proxy-equivalence sets (:func:`tempo.calib.fit.proxy_spreads`) on the
    recording's grid cells."""
    from ...calib import proxy_spreads

    S = rec.samples
    return proxy_spreads(S[S.kind == "grid"])


def spread_summary(sp: pd.DataFrame) -> pd.DataFrame:
    """Per equivalence set of :func:`grid_spreads`: how many sets, the median and the largest
    spread."""
    return sp.groupby("set").spread.agg(["count", "median", "max"])


def bootstrap_view(rec: Recording, n_boot: int) -> list:
    """The cluster bootstrap of the recording's grid (Section 5.2): 95% intervals and medians of
    a, b, c, beta and n*, and, when the grid spans G = 9-20 (the paper's operating range), the
    correlation of a and b and the intervals of b and beta there.  A list to display."""
    from IPython.display import Markdown

    from ...calib import bootstrap

    S = rec.samples
    bs = bootstrap(S[S.kind == "grid"], n_boot=n_boot, seed=0)
    ci = bs[["a", "b", "c", "beta", "n_star"]].quantile([0.025, 0.5, 0.975]).T
    ci.columns = ["2.5%", "median", "97.5%"]
    narrow = S[(S.kind == "grid") & S.G.between(9, 20)]
    out = [ci.round(4), Markdown(identified_text(ci, sorted(S[S.kind == "grid"].G.unique())))]
    if narrow.G.nunique() >= 2:
        bn = bootstrap(narrow, n_boot=n_boot, seed=1)
        out.append(Markdown(
            f"All G: corr(a, b) = {bs.a.corr(bs.b):.3f}. Only the cells with G in 9-20 (the paper's operating range): "
            f"corr(a, b) = {bn.a.corr(bn.b):.3f}, b in [{bn.b.quantile(0.025):.1f}, {bn.b.quantile(0.975):.1f}] us, "
            f"beta in [{bn.beta.quantile(0.025):.4f}, {bn.beta.quantile(0.975):.4f}]."))
    return out


#: a parameter is identified by the grid when its 95% bootstrap interval is narrower than this
#: share of its median
IDENTIFIED_WIDTH = 0.5


def identified_text(ci: pd.DataFrame, G_values) -> str:
    """Whether this recording's grid (its ``G_values``) pins the floor b and the slope beta, from
    the bootstrap intervals ``ci`` (rows a, b, c, beta, n_star; columns 2.5%, median, 97.5%): a
    parameter is identified when its interval is narrower than :data:`IDENTIFIED_WIDTH` of its
    median."""
    def ok(p):
        lo, med, hi = ci.loc[p, "2.5%"], ci.loc[p, "median"], ci.loc[p, "97.5%"]
        return med > 0 and (hi - lo) <= IDENTIFIED_WIDTH * med

    Gs = ", ".join(str(int(g)) for g in G_values)
    b, beta = ci.loc["b"], ci.loc["beta"]
    rng = f"b anywhere in {b['2.5%']:.2f}-{b['97.5%']:.2f} us, n* in {ci.loc['n_star', '2.5%']:.0f}-{ci.loc['n_star', '97.5%']:.0f}"
    if ok("b") and ok("beta"):
        return (f"This recording's grid (G = {Gs}) identifies both: b within {b['2.5%']:.2f}-{b['97.5%']:.2f} us and "
                f"beta within {beta['2.5%']:.4f}-{beta['97.5%']:.4f} us/token.")
    if ok("beta"):
        return (f"This recording's grid has only G = {Gs}, and it does not identify b ({rng}); beta is pinned "
                f"({beta['2.5%']:.4f}-{beta['97.5%']:.4f} us/token). A grid over a wider range of G would pin b too.")
    return (f"This recording's grid (G = {Gs}) identifies neither b ({rng}) nor beta "
            f"({beta['2.5%']:.4f}-{beta['97.5%']:.4f} us/token).")


def fits_table(rec: Recording) -> pd.DataFrame:
    """Every fit the recording stores (its ``fit.json``): the parameters and the error in %."""
    return pd.DataFrame({form: {**f["params"], "error %": 100 * f["error"]} for form, f in rec.fits.items()}).T


# ---------------------------------------------------------------------------- the H200 prediction, checked
#: the fitted forms the prediction is checked on: (fit.json key, label)
PREDICTION_FORMS = (("tile", "tile-aware (Eq. 2)"), ("max_affine", "max-affine (Eq. 1)"),
                    ("max_affine_no_intercept", "Table 6 form (Eq. 1, a = c = 0)"))


def h200_prediction(hbm_tb_s: float = 4.8) -> pd.DataFrame:
    """What the chapter predicted for one H200 before measuring (chapter 98's
    :func:`~tempo.book.chapters.ch98_reproduction_map.expected_floors`, from
    :func:`tempo.book.repro.expected_floor`): per shape, the floor ``b`` and the inflection
    ``n*`` ranges, indexed by shape."""
    from .. import repro
    return pd.DataFrame([repro.expected_floor(s, p, hbm_tb_s) for s, p in repro.FLOOR_SHAPES]).set_index("shape")


def prediction_numbers(pred: pd.DataFrame | None = None) -> dict:
    """The DSv3 prediction as the chapter's prose quotes it (glued, never typed): roofline, b and
    n* ranges."""
    d = (h200_prediction() if pred is None else pred).loc["dsv3"]
    return {"pred_dsv3_roof": float(d.roofline_us), "pred_dsv3_b_lo": float(d.b_lo_us),
            "pred_dsv3_b_hi": float(d.b_hi_us), "pred_dsv3_n_lo": float(d.nstar_lo), "pred_dsv3_n_hi": float(d.nstar_hi)}


def _inside(x: float, lo: float, hi: float, digits: int) -> bool:
    """``x`` in [lo, hi] at the precision the chapter printed the range (``digits`` decimals)."""
    return bool(np.isfinite(x) and round(lo, digits) <= round(x, digits) <= round(hi, digits))


def prediction_check(recs: pd.DataFrame, pred: pd.DataFrame | None = None) -> tuple[pd.DataFrame, str]:
    """Chapter 05's H200 prediction against every fp8 GPU recording of a predicted shape
    (``recs``: ``tempo.measured.catalog.recordings("calibration")``): per recording, the tile-aware fit (Eq. 2),
    the max-affine fit (Eq. 1) and the zero-intercept Table 6 form, each refitted on the
    recording's samples, with b, n* (where one expert's two pieces cross,
    :attr:`tempo.core.cost.CostModel.n_star`) and the fit error, beside the predicted ranges and
    whether each lies inside them as the chapter printed them (b to 0.1 us, n* to a token).
    Returns ``(table, sentence)``: the sentence says which prediction held, every number from
    the table."""
    from ...calib.preset import recording_coverage
    from ...calib.record import fit_all
    from ...measured.catalog import load_recording

    pred = h200_prediction() if pred is None else pred
    gpu = recs[(recs.backend == "deep_gemm") & recs["shape"].isin(pred.index)]
    rows = []
    for r in gpu.itertuples():
        samples, _, man = load_recording(r.path)
        cov = recording_coverage(r.path)
        fits = fit_all(samples, name=f"{r.backend}-{r.shape}")
        p = pred.loc[r.shape]
        for key, label in PREDICTION_FORMS:
            f = fits[key]["params"]
            b, ns = float(f["b"]), float(f["n_star"])
            rows.append({"recording": Path(r.path).name, "shape": r.shape, "device": man.get("device"),
                         "cells": len(samples), "grid cells (of 117)": cov["grid_cells"], "form": label,
                         "b (us)": b, "n*": ns, "fit err %": 100 * fits[key]["error"],
                         "predicted b (us)": f"{p.b_lo_us:.1f}-{p.b_hi_us:.1f}",
                         "predicted n*": f"{p.nstar_lo:.0f}-{p.nstar_hi:.0f}",
                         "b held": _inside(b, p.b_lo_us, p.b_hi_us, 1), "n* held": _inside(ns, p.nstar_lo, p.nstar_hi, 0)})
    cols = ["recording", "shape", "device", "cells", "grid cells (of 117)", "form", "b (us)", "n*", "fit err %",
            "predicted b (us)", "predicted n*", "b held", "n* held"]
    table = pd.DataFrame(rows, columns=cols)
    return table, _prediction_sentence(table, pred)


def _verdict(x) -> str:
    if x["b held"] and x["n* held"]:
        return "held"
    return "b outside" if x["n* held"] else ("n* outside" if x["b held"] else "both outside")


def _prediction_sentence(table: pd.DataFrame, pred: pd.DataFrame) -> str:
    from ...calib.shapes import shape as get_shape

    if table.empty:
        return ("No fp8 GPU recording of a predicted shape exists yet, so the prediction is unchecked "
                "(run `python -m tempo calibrate --preset appendix-b` on an H200).")
    out, held_all = [], []
    for shape_name, t in table.groupby("shape", sort=False):
        p = pred.loc[shape_name]
        label = get_shape(shape_name).label
        parts = [f"For {label} the chapter predicted, before measuring, b = {p.b_lo_us:.1f}-{p.b_hi_us:.1f} us and "
                 f"n* = {p.nstar_lo:.0f}-{p.nstar_hi:.0f} tokens on one H200."]
        for rec_name, r in t.groupby("recording", sort=False):
            nums = "; ".join(f"{x.form} b = {x['b (us)']:.2f} us, n* = {x['n*']:.0f}, error {x['fit err %']:.1f}% "
                             f"({_verdict(x)})" for _, x in r.iterrows())
            parts.append(f"On {rec_name} ({int(r.cells.iloc[0])} cells, {int(r['grid cells (of 117)'].iloc[0])} of "
                         f"Appendix B's 117 grid cells): {nums}.")
            held_all += [f"the {x.form} fit of {rec_name}" for _, x in r.iterrows() if _verdict(x) == "held"]
        out.append(" ".join(parts))
    lead = ("The prediction held for " + (", ".join(held_all) if held_all else "no fit of any recording") +
            f", and for none of the {len(table) - len(held_all)} other fits. ")
    return lead + " ".join(out)


def coverage_table(recs: pd.DataFrame) -> pd.DataFrame:
    """What grid each calibration recording covers against Appendix B's
    (:func:`tempo.calib.preset.recording_coverage`): its cells, the Appendix B grid cells it
    holds (of 117), its G values, token range and tile-sweep cells, and the GPU generation
    beside the paper's testbeds (A: Hopper, B: Blackwell, as :data:`tempo.calib.preset.TESTBEDS`
    reads the paper)."""
    from ...calib.preset import recording_coverage

    rows = []
    for r in recs.itertuples():
        c = recording_coverage(r.path)
        rows.append({"recording": Path(r.path).name, "backend": r.backend, "shape": r.shape, "cells": r.cells,
                     "grid cells (of 117)": c["grid_cells"], "G": ", ".join(map(str, c["G"])),
                     "tokens per expert": f"{c['n_min']}-{c['n_max']}", "tile cells": c["tile_cells"],
                     "device": c["device"], "generation": c["generation"],
                     "Appendix B grid": "complete" if c["covers_grid"] else "partial"})
    return pd.DataFrame(rows, columns=["recording", "backend", "shape", "cells", "grid cells (of 117)", "G",
                                       "tokens per expert", "tile cells", "device", "generation", "Appendix B grid"])


def coverage_text(cov: pd.DataFrame) -> str:
    """One sentence on :func:`coverage_table`: how many recordings hold Appendix B's whole grid,
    and the most any holds."""
    from ...calib.preset import PRESETS

    g = PRESETS["appendix-b"].grid(tile_sweep=False)
    ladder = f"G in {{{', '.join(map(str, sorted(g.G.unique())))}}} x tokens per expert {g.n.min()}-{g.n.max()}"
    if cov.empty:
        return f"No calibration recording exists; Appendix B's grid is {len(g)} cells ({ladder})."
    full = int((cov["Appendix B grid"] == "complete").sum())
    top = cov.loc[cov["grid cells (of 117)"].idxmax()]
    return (f"Appendix B's grid, as the preset measures it, is {len(g)} cells per shape and kernel ({ladder}). "
            f"{full} of the {len(cov)} recordings hold all of it; the most any holds is {int(top['grid cells (of 117)'])} "
            f"({top.recording}, G {top.G}, tokens {top['tokens per expert']}). A fit on a partial grid, or on another "
            "GPU generation than the paper's testbed, is a stand-in for the paper's number, not a check of it.")


def preset_plan() -> tuple[pd.DataFrame, str]:
    """The Appendix B preset's part plan (:func:`tempo.calib.preset.plan_parts`, estimated from
    the H200 recordings' timings): per part its recordings, cells and expected seconds, and the
    command a GPU node runs."""
    from ...calib import preset as P

    pre = P.PRESETS["appendix-b"]
    costs = P.cost_models(P.cell_costs(backends=pre.backends), pre.backends)
    summ = P.plan_summary(P.plan_parts("appendix-b", costs))
    n = len(summ)
    text = (f"Appendix B's grid for all three shapes on both kernels is {int(summ.cells.sum())} cells, planned as {n} "
            f"parts of at most {P.PART_S / 60:.0f} minutes on one H200 ({summ.est_s.sum() / 60:.0f} minutes expected in "
            f"all, estimated from the H200 recordings' own timings: "
            + "; ".join(c.source for c in costs.values()) +
            f"). A GPU node runs `python -m tempo calibrate --preset appendix-b --part K/{n}` for K = 1 to {n}, in one "
            "session or several: each part measures what the parts before it left, and resumes the same recordings "
            "(`scripts/gpu-node-all.sh` runs the parts that fit after its checks).")
    return summ.round(0), text
