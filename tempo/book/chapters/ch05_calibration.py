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


def recordings_view(recs: pd.DataFrame):
    """The listing of the recordings (``tempo.measured.catalog.recordings("calibration")``), or
    that there is none."""
    from IPython.display import Markdown

    return Markdown("No recordings under `data/measured/` yet.") if recs.empty else recordings_table(recs)


def recordings_glue(recs: pd.DataFrame) -> dict:
    """How many recordings the listing holds and how many come from a GPU (``recs``:
    ``tempo.measured.catalog.recordings("calibration")``), for :func:`tempo.book.paper.glue`."""
    return {"recs_n": len(recs), "recs_gpu": int((recs.backend != "cpu").sum()) if len(recs) else 0}


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


def regime_glue(rec: Recording) -> dict:
    """The numbers under Fig. 2a: the Table 6 form's fit (``rg_b0``, ``rg_beta0``, ``rg_ns0``,
    ``rg_err0``), the fit with intercepts (``rg_a1``, ``rg_b1``, ``rg_c1``, ``rg_beta1``,
    ``rg_err1``) and the model-free regime evidence on the one-expert column
    (:func:`tempo.calib.fit.regime_evidence`: flat up to ``rg_flat_hi`` tokens varying by
    ``rg_flat_var`` % over a ``rg_flat_fold``-fold token range, slope ``rg_slope`` us per token
    from ``rg_lin_lo`` tokens)."""
    from ...calib.fit import regime_evidence

    S, m0, m1, FITS = rec.samples, rec.m0, rec.m1, rec.fits
    ev = regime_evidence(S[(S.G == 1) & (S.kind == "grid")], m0.n_star)
    return {"rg_b0": m0.b, "rg_beta0": m0.beta, "rg_ns0": m0.n_star, "rg_err0": 100 * FITS["max_affine_no_intercept"]["error"],
            "rg_a1": m1.a, "rg_b1": m1.b, "rg_c1": m1.c, "rg_beta1": m1.beta, "rg_err1": 100 * FITS["max_affine"]["error"],
            "rg_flat_hi": ev["flat_hi_n"], "rg_flat_var": 100 * ev["flat_variation"], "rg_flat_fold": ev["flat_hi_n"] / 2,
            "rg_lin_lo": ev["lin_lo_n"], "rg_slope": ev["linear_slope"]}


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
    """On a CPU recording, the roofline check on this machine: the float32 expert's MB, a copy
    loop's bandwidth measured now (GB/s), the streaming bound and the fitted b against it.
    Nothing for a GPU recording.  A list to display."""
    from IPython.display import Markdown

    from ...calib.shapes import host_copy_bandwidth, shape

    MAN, m0 = rec.manifest, rec.m0
    if MAN["backend"] != "cpu":
        return []
    bw = host_copy_bandwidth()  # bytes/s, read + write, a 64 MB buffer past the caches
    mb = shape(MAN["shape"]).bytes(4.0) / 1e6
    roof = mb / bw * 1e12
    return [Markdown(f"This CPU, {MAN['shape']} at float32: {mb:.1f} MB, copy {bw / 1e9:.1f} GB/s, bound {roof:.0f} us; "
                     f"fitted b = {m0.b:.0f} us ({m0.b / roof:.2f}x).")]


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
    text = Markdown(f"Tile sweep: tile-blind model error {100 * err_blind:.1f}%, tile-aware {100 * err_tile:.1f}%; "
                    f"b2 = {mt.b2:.3g} us ({mt.b2 / max(mt.b, 1e-12):.2f} b).")
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


def bootstrap_glue(rec: Recording, n_boot: int) -> tuple[pd.DataFrame, dict, dict]:
    """The cluster bootstrap of the recording's grid (Section 5.2): ``(ci, numbers, words)``.
    ci: 95% intervals and medians of a, b, c, beta and n* (rows; columns 2.5%, median, 97.5%);
    numbers: the b, beta and n* intervals, corr(a, b) on all G and, on the cells with G in
    9-20 (the paper's operating range; NaN with fewer than two such G), corr(a, b) and the b
    and beta intervals; words: the grid's G values and which of b, beta it identifies (an
    interval narrower than :data:`IDENTIFIED_WIDTH` of its median)."""
    from ...calib import bootstrap

    S = rec.samples
    grid = S[S.kind == "grid"]
    bs = bootstrap(grid, n_boot=n_boot, seed=0)
    ci = bs[["a", "b", "c", "beta", "n_star"]].quantile([0.025, 0.5, 0.975]).T
    ci.columns = ["2.5%", "median", "97.5%"]
    narrow = grid[grid.G.between(9, 20)]
    bn = bootstrap(narrow, n_boot=n_boot, seed=1) if narrow.G.nunique() >= 2 else None
    nan = float("nan")
    numbers = {"bt_b_lo": ci.loc["b", "2.5%"], "bt_b_hi": ci.loc["b", "97.5%"],
               "bt_beta_lo": ci.loc["beta", "2.5%"], "bt_beta_hi": ci.loc["beta", "97.5%"],
               "bt_ns_lo": ci.loc["n_star", "2.5%"], "bt_ns_hi": ci.loc["n_star", "97.5%"], "bt_corr": bs.a.corr(bs.b),
               "bt_corr_op": nan if bn is None else bn.a.corr(bn.b),
               "bt_b_op_lo": nan if bn is None else bn.b.quantile(0.025),
               "bt_b_op_hi": nan if bn is None else bn.b.quantile(0.975),
               "bt_beta_op_lo": nan if bn is None else bn.beta.quantile(0.025),
               "bt_beta_op_hi": nan if bn is None else bn.beta.quantile(0.975)}
    if bn is None:
        op = ("Only the cells with G in 9-20 (the paper's operating range): this grid has fewer than two "
              "such G, so they cannot be bootstrapped on their own.")
    else:
        op = (f"Only the cells with G in 9-20 (the paper's operating range): corr(a, b) = "
              f"{numbers['bt_corr_op']:.3f}, b in [{numbers['bt_b_op_lo']:.1f}, {numbers['bt_b_op_hi']:.1f}] us, "
              f"β in [{numbers['bt_beta_op_lo']:.4f}, {numbers['bt_beta_op_hi']:.4f}] us/token.")
    words = {"bt_G": ", ".join(str(int(g)) for g in sorted(grid.G.unique())), "bt_identifies": identified(ci),
             "bt_op_words": op}
    return ci, numbers, words


#: a parameter is identified by the grid when its 95% bootstrap interval is narrower than this
#: share of its median
IDENTIFIED_WIDTH = 0.5


def identified(ci: pd.DataFrame) -> str:
    """Which of b and beta the bootstrap intervals ``ci`` (rows a, b, c, beta, n_star; columns
    2.5%, median, 97.5%) identify: "both b and beta", "beta, not b", "b, not beta" or "neither"."""
    def ok(p):
        lo, med, hi = ci.loc[p, "2.5%"], ci.loc[p, "median"], ci.loc[p, "97.5%"]
        return med > 0 and (hi - lo) <= IDENTIFIED_WIDTH * med

    return {(True, True): "both b and beta", (False, True): "beta, not b", (True, False): "b, not beta",
            (False, False): "neither"}[(ok("b"), ok("beta"))]


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
    if table.empty:
        return "No fp8 GPU recording of a predicted shape exists yet: the prediction is unchecked."
    held = [f"{x.form} of {x.recording}" for _, x in table.iterrows() if _verdict(x) == "held"]
    return f"Held: {', '.join(held) if held else 'no fit'}; {len(table) - len(held)} of {len(table)} fits missed."


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


def coverage_glue(cov: pd.DataFrame) -> tuple[dict, dict]:
    """What the sentence under :func:`coverage_table` glues: ``(numbers, words)``.  numbers:
    Appendix B's grid size per shape and kernel and its token range, the recordings and how many
    hold all of it, the most grid cells any holds (NaN without recordings); words: its G ladder
    and the recording holding the most."""
    from ...calib.preset import PRESETS

    g = PRESETS["appendix-b"].grid(tile_sweep=False)
    top = None if cov.empty else cov.loc[cov["grid cells (of 117)"].idxmax()]
    numbers = {"cov_grid": len(g), "cov_n_lo": g.n.min(), "cov_n_hi": g.n.max(), "cov_recs": len(cov),
               "cov_full": int((cov["Appendix B grid"] == "complete").sum()),
               "cov_top_cells": float("nan") if top is None else top["grid cells (of 117)"]}
    words = {"cov_G": ", ".join(map(str, sorted(g.G.unique()))),
             "cov_top": "no recording" if top is None else f"{top.recording}, G {top.G}, tokens {top['tokens per expert']}"}
    return numbers, words


def preset_plan() -> tuple[pd.DataFrame, dict, dict]:
    """The Appendix B preset's part plan (:func:`tempo.calib.preset.plan_parts`, estimated from
    the H200 recordings' timings): ``(table, numbers, words)``.  table: per part its recordings,
    cells and expected seconds; numbers: the cells, the parts, a part's limit and the expected
    total (minutes); words: ``plan_sources``, where each backend's per-cell estimate comes from."""
    from ...calib import preset as P

    pre = P.PRESETS["appendix-b"]
    costs = P.cost_models(P.cell_costs(backends=pre.backends), pre.backends)
    summ = P.plan_summary(P.plan_parts("appendix-b", costs))
    numbers = {"plan_cells": int(summ.cells.sum()), "plan_parts": len(summ), "plan_part_min": P.PART_S / 60,
               "plan_total_min": summ.est_s.sum() / 60}
    return summ.round(0), numbers, {"plan_sources": "; ".join(c.source for c in costs.values())}


# ---------------------------------------------------------------------------- the running example
#: the dispatchers the running example compares (chapter 01's three and the exact optimum)
TOY_POLICIES = ("token_lp", "metro", "tempo", "milp")


def toy_repriced(model: CostModel, label: str) -> tuple[pd.DataFrame, dict]:
    """Chapter 01's toy batch (:func:`.common.toy`) solved and priced twice: under the toy's own
    model and under ``model`` (a calibrated fit, named ``label`` in the columns).  Returns
    ``(table, numbers)``: per policy of :data:`TOY_POLICIES` the makespan (us) under each model and,
    under ``model``, the busiest GPU's activated experts and how many GPUs run the hot expert;
    ``numbers`` (``toy5_*``) holds the fit's b, beta and n*, each makespan, the token-LP / tempo
    ratio under both models and the GPUs tempo spreads the hot expert over, for the page's glue."""
    from ...policies import solve
    from .common import toy

    inst, own = toy()
    hot = int(np.argmax(inst.counts))
    rows, n = [], {"toy5_b": model.b, "toy5_beta": model.beta, "toy5_ns": model.n_star}
    for p in TOY_POLICIES:
        d_own, d = solve(inst, own, p), solve(inst, model, p)
        G = model.gpu_features(inst, d)[0]
        t = model.gpu_times(inst, d)
        row = {"policy": p, "toy model (us)": own.makespan(inst, d_own), f"{label} (us)": float(t.max()),
               "busiest GPU's experts": int(G[int(np.argmax(t))]), "GPUs running the hot expert": int((d.shares[hot] > 0).sum())}
        rows.append(row)
        n[f"toy5_{p}_own"], n[f"toy5_{p}"] = row["toy model (us)"], row[f"{label} (us)"]
        n[f"toy5_{p}_hot_gpus"] = row["GPUs running the hot expert"]
    n["toy5_ratio_own"] = n["toy5_token_lp_own"] / n["toy5_tempo_own"]
    n["toy5_ratio"] = n["toy5_token_lp"] / n["toy5_tempo"]
    return pd.DataFrame(rows).set_index("policy"), n


def toy_repriced_words(numbers: dict) -> dict:
    """What the page says about tempo's hot expert under the fit, from :func:`toy_repriced`'s
    numbers: ``toy5_hot`` (whole on one GPU, or split over how many)."""
    k = int(numbers["toy5_tempo_hot_gpus"])
    return {"toy5_hot": "keeps the hot expert whole on one GPU" if k == 1 else f"still splits the hot expert over {k} GPUs"}


def toy_tile_effect(model: CostModel) -> tuple[dict, dict]:
    """Whether the tile term decides how tempo treats the toy's hot expert: the toy solved under
    ``model`` and under ``model`` without its tile cost (``b2 = 0``).  Returns ``(numbers, words)``:
    ``toy5_notile_tempo`` (tempo's makespan without tiles, us), ``toy5_notile_hot_gpus``, and
    ``toy5_tile_effect``, a phrase saying whether dropping the tiles changes the hot expert's GPUs."""
    import dataclasses

    from ...policies import solve
    from .common import toy

    inst, _ = toy()
    hot = int(np.argmax(inst.counts))
    flat = dataclasses.replace(model, b2=0.0)
    k_with = int((solve(inst, model, "tempo").shares[hot] > 0).sum())
    d = solve(inst, flat, "tempo")
    k = int((d.shares[hot] > 0).sum())
    n = {"toy5_notile_tempo": flat.makespan(inst, d), "toy5_notile_hot_gpus": k}
    gpus = f"{k} GPU{'s' if k > 1 else ''}"
    if k == k_with:
        words = (f"priced without the tile cost (b2 = 0), tempo also runs it on {gpus} "
                 f"({n['toy5_notile_tempo']:.1f} us): the tiles do not decide this split")
    else:
        words = (f"priced without the tile cost (b2 = 0), tempo runs it on {gpus} instead "
                 f"({n['toy5_notile_tempo']:.1f} us): the tiles decide this split")
    return n, {"toy5_tile_effect": words}


def calibrated_h200(recs: pd.DataFrame, shape: str = "dsv3") -> tuple[CostModel, str]:
    """The tile-aware fit (Eq. 2) of the fp8 H200 recording of ``shape``
    (:func:`tempo.measured.catalog.pick` with backend ``deep_gemm``) and a label naming it.
    Raises ValueError when ``recs`` holds no such recording."""
    from ...calib import fit_cost_model
    from ...measured import catalog

    r = catalog.pick(recs, shape, "deep_gemm")
    if r is None:
        raise ValueError(f"recs holds no deep_gemm recording of shape {shape!r}")
    samples, _, man = catalog.load_recording(r.path)
    return fit_cost_model(samples, "tile").model, f"{man['device']} {shape} fit"
