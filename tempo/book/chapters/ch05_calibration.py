"""Chapter 05, *Calibration* (``notebooks/05_calibration.md``): what a build measures per
profile, the recording the chapter's figures draw from and its fits, the listings of
recordings and gpu-check runs, the bootstrap and fit tables, and the Markdown the chapter's
prose writes from a recording (paper Section 2.2, Appendix B, Tables 6 and 7, Figs. 2-4, 9).
The measuring and fitting are :mod:`tempo.calib`."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...core.cost import CostModel
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
    from .. import paper

    t6p = paper.table(6).set_index("shape")
    f9p = paper.figure(9).set_index(["setting", "model"]).value
    return {
        "p_nstar_dsv3": float(t6p.loc["DSv3", "n_star"]),
        "p_dsv3_mb": paper.text_number("roofline", "dsv3_expert_mb"),
        "p_roof_lo": paper.text_number("roofline", "fitted_over_roofline_min"),
        "p_roof_hi": paper.text_number("roofline", "fitted_over_roofline_max"),
        "p_bw_lo": paper.text_number("roofline", "peak_bw_share_min"),
        "p_bw_hi": paper.text_number("roofline", "peak_bw_share_max"),
        "p_tile_blind_err": paper.text_number("fig4", "tile_blind_err"),
        "p_tile_err": paper.claim("tile_err")["paper"],
        "p_tile_step_lo": paper.claim("tile_step")["paper"][0],
        "p_tile_step_hi": paper.claim("tile_step")["paper"][1],
        "p_b2_over_b": paper.claim("b2_over_b")["paper"],
        "p_boot_b_lo": paper.text_number("calib", "bootstrap_b_lo"),
        "p_boot_b_hi": paper.text_number("calib", "bootstrap_b_hi"),
        "p_boot_corr": paper.text_number("calib", "bootstrap_corr_ab"),
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
    """What the chapter shows of the recordings (:func:`tempo.calib.record.recordings`): their
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
    return [recordings_table(chk), Markdown(newest[1])]


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
    """The newest GPU recording of the DSv3 shape, else of any shape, else the CPU one
    (``recs``: :func:`tempo.calib.record.recordings`), loaded and fitted."""
    from ...calib import fit_cost_model
    from ...calib.record import load_recording, pick_recording

    gpu_recs = recs[recs.backend != "cpu"]
    main = (pick_recording(recs, "dsv3") if len(gpu_recs) else None)
    main = pick_recording(recs) if main is None else main
    if main is None:
        raise ValueError("recs holds no recording (data/measured/ is empty)")
    S, FITS, MAN = load_recording(main.path)
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
    from .. import paper

    return paper.table(6).rename(columns={"b_us": "b (paper)", "beta_us_per_tok": "beta (paper)", "n_star": "n* (paper)",
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
    out = [ci.round(4)]
    if narrow.G.nunique() >= 2:
        bn = bootstrap(narrow, n_boot=n_boot, seed=1)
        out.append(Markdown(
            f"All G: corr(a, b) = {bs.a.corr(bs.b):.3f}. Only the cells with G in 9-20 (the paper's operating range): "
            f"corr(a, b) = {bn.a.corr(bn.b):.3f}, b in [{bn.b.quantile(0.025):.1f}, {bn.b.quantile(0.975):.1f}] us, "
            f"beta in [{bn.beta.quantile(0.025):.4f}, {bn.beta.quantile(0.975):.4f}]."))
    return out


def fits_table(rec: Recording) -> pd.DataFrame:
    """Every fit the recording stores (its ``fit.json``): the parameters and the error in %."""
    return pd.DataFrame({form: {**f["params"], "error %": 100 * f["error"]} for form, f in rec.fits.items()}).T
