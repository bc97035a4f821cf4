"""Chapter 07, *Serving* (``notebooks/07_serving.md``): the EP microbenchmark's sizes per
profile (CPU gloo ranks, or the GPUs of a ``gpu`` build) and the line written from its run, the
paper's numbers for the prose, this artifact's serve-bench and epbench recordings beside the
paper's figures, and the chapter's claims listing.  The benchmarks themselves are
:mod:`tempo.benchmarks`, which shares the book's layer, so the notebook, not this module, calls
them (``epbench.run_here``)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from ...measured import catalog
from ...paper import claims_file, tables
from .common import chapter_claims
from .common import sizes as _sizes

SOURCE = "07_serving"
#: per profile: steps, ranks and tokens per rank of the EP microbenchmark run on this machine,
#: and whether it runs on the GPUs here (the gpu build) rather than on CPU gloo ranks
SIZES = {"smoke": dict(steps=3, world=4, tokens=16, gpu=False), "full": dict(steps=20, world=4, tokens=32, gpu=False),
         "gpu": dict(steps=20, world=4, tokens=32, gpu=True)}


def sizes(profile: str) -> dict:
    """The chapter's benchmark sizes for a book profile (:data:`SIZES`)."""
    return _sizes(SIZES, profile)


def paper_numbers() -> dict:
    """The paper's numbers the chapter's prose quotes, read from ``data/paper/`` (for
    :func:`tempo.book.paper.glue_numbers`): the wall-clock, calibration-transfer, MoonEP and
    serving claims."""
    return {
        **claims_file.claim_range("wc_b32_vs_eplb"), "p_wc_within_best": claims_file.claim_row("wc_within_best")["paper"],
        "p_wc_fixed_failure": tables.text_number("wallclock", "fixed_failure_min"),
        "p_rank_agreement": claims_file.claim_row("calib_rank_agreement")["paper"],
        "p_gain_transfer": tables.text_number("calib", "gain_transfer_error"),
        "p_deepep_lo": tables.text_number("moonep", "deepep_us_min"), "p_deepep_hi": tables.text_number("moonep", "deepep_us_max"),
        "p_moonep_lo": tables.text_number("moonep", "moonep_us_min"), "p_moonep_hi": tables.text_number("moonep", "moonep_us_max"),
        **claims_file.claim_range("moonep_prefetch_us"), "p_moonep_flat_ms": tables.text_number("moonep", "prefill_flat_ms"),
        "p_moonep_cross": tables.text_number("moonep", "crossing_maxvio"),
        **claims_file.claim_range("serve_vs_lplb"), "p_govreport": claims_file.claim_row("serve_qwen_govreport")["paper"],
        "p_p99": claims_file.claim_row("serve_qwen_p99")["paper"], **claims_file.claim_range("serve_gil_tax"),
        "p_tight": -claims_file.claim_row("serve_tight_budget")["paper"], "p_ep16_hier": claims_file.claim_row("serve_ep16_hier")["paper"],
    }


# ---------------------------------------------------------------------------- the EP microbenchmark here
def model_ranking(summary: pd.DataFrame, noise: float = 0.03, same: float = 1e-9) -> dict:
    """How the model ranks the policies of an epbench summary
    (:func:`tempo.benchmarks.epbench.summarize`): over policy pairs whose measured medians
    differ by more than ``noise`` (relative), how many the model separates (modeled medians
    further apart than ``same``, relative) and on how many of those it orders them as
    measured."""
    import itertools

    pairs = separated = agree = 0
    for a, b in itertools.combinations(summary.index, 2):
        ma, mb = summary.loc[a, "expert_us"], summary.loc[b, "expert_us"]
        if abs(ma - mb) / max(ma, mb) <= noise:
            continue
        pairs += 1
        pa, pb = summary.loc[a, "model_us"], summary.loc[b, "model_us"]
        if abs(pa - pb) <= same * max(abs(pa), abs(pb)):
            continue
        separated += 1
        agree += (ma < mb) == (pa < pb)
    return {"pairs": pairs, "separated": separated, "agree": agree}


def wallclock_glue(where: str, steps: int, transfer: dict, summary: pd.DataFrame | None = None) -> tuple[dict, dict]:
    """What the lines under the microbenchmark's chart glue: ``(numbers, words)``.  numbers:
    the steps, the policy pairs outside the 3% noise band, how many the model separates and
    orders as measured (:func:`model_ranking` of ``summary``, :func:`tempo.benchmarks.epbench.summarize`;
    without one, ``transfer``'s agreement over its pairs), the agreement in % (NaN when the
    model separates no pair) and the mean gain-transfer error in points (``transfer``,
    :func:`tempo.benchmarks.epbench.transfer`); words: ``eb_where`` (from
    :func:`tempo.benchmarks.epbench.run_here`), ``eb_ranks``, whether the model ranks the
    policies or prices them all alike, and ``eb_agree_words``, the agreement in words (none
    reported when the model separates no pair)."""
    if summary is None:
        r = {"pairs": transfer["pairs"], "separated": transfer["pairs"], "agree": transfer["agreement"] * transfer["pairs"]}
        flat = False
    else:
        r = model_ranking(summary)
        m = summary["model_us"]
        flat = m.max() - m.min() <= 1e-9 * max(abs(m.max()), 1.0)
    numbers = {"eb_steps": steps, "eb_pairs": r["pairs"], "eb_separated": r["separated"], "eb_agree": r["agree"],
               "eb_agree_pct": 100 * r["agree"] / r["separated"] if r["separated"] else float("nan"),
               "eb_err": transfer["gain_transfer_error_p"]}
    agree = (f"{numbers['eb_agree_pct']:.0f}% agreement" if r["separated"] else
             "no agreement is reported: a model that separates no pair ranks nothing")
    return numbers, {"eb_where": where, "eb_ranks": "prices every policy alike" if flat else "ranks the policies",
                     "eb_agree_words": agree}


# ---------------------------------------------------------------------------- this artifact's recordings
#: Which serve-bench recordings belong beside which paper figure: a test on the recording's
#: ``manifest.json`` server spec (model, ep, redundant slots, initial expert location).
FIGURE_SERVERS = {
    8: lambda s: "235B" in str(s.get("model", "")) or "V3" in str(s.get("model", "")),
    10: lambda s: int(s.get("ep", 8)) == 8 and bool(s.get("init_expert_location")),
    11: lambda s: "235B" in str(s.get("model", "")) and int(s.get("ep", 8)) == 8,
    13: lambda s: int(s.get("ep", 8)) == 16,
}


def serving_recordings(figure: int | None, root=None) -> pd.DataFrame | None:
    """This artifact's serve-bench recordings for paper Figure ``figure`` (8, 10, 11 or 13; None:
    every recording): those stored by ``python -m tempo ingest``
    (``tempo.measured.catalog.recordings("serve-bench")``, the run's own manifest in
    ``serve-bench.json.gz``) whose server matches :data:`FIGURE_SERVERS`, as
    :func:`tempo.book.figures.servebench_points` frames labelled with the folder; None when
    there is none."""
    from ..figures import servebench_points

    if figure is not None and figure not in FIGURE_SERVERS:
        raise ValueError(f"figure must be one of {sorted(FIGURE_SERVERS)} or None, got {figure!r}")
    frames = []
    for _, r in catalog.recordings("serve-bench", root=root).iterrows():
        server = catalog.load_serve_manifest(r.path).get("server") or {}
        if figure is None or FIGURE_SERVERS[figure](server):
            frames.append(servebench_points(catalog.load_serve(r.path)[0],
                                            who=f"this artifact: {Path(r.path).parent.name}/{r['name']}"))
    return pd.concat(frames, ignore_index=True) if frames else None


def epbench_recordings(root=None) -> pd.DataFrame | None:
    """This artifact's EP microbenchmark recordings (every recording with an ``epbench.csv.gz``,
    with the run's arguments in ``results.json`` as ``gpu-check`` writes them:
    :func:`tempo.measured.catalog.epbench_runs`) as :func:`tempo.book.figures.epbench_points`
    frames: setting ``B=<tokens>``, labelled with the folder, the shape and whether the ranks
    were emulated on one device; None when there is none."""
    from ..figures import epbench_points

    frames = []
    for folder, table, info in catalog.epbench_runs(root):
        ep = info.get("epbench", info) if isinstance(info, dict) else {}
        args = ep.get("args", {}) if isinstance(ep, dict) else {}
        emulated = "emulate" in json.dumps(info).lower() or "gpu-check" in folder.name
        tokens = args.get("tokens")
        if tokens is None:  # a folder named ...-B<tokens> (the chapter's recipe)
            hit = re.search(r"B(\d+)$", folder.name)
            tokens = hit.group(1) if hit else "?"
        setting = f"B={tokens}"
        who = (f"this artifact: {folder.parent.name}/{folder.name} ({args.get('shape', '?')} shape, "
               f"{args.get('world_size', '?')} ranks{' emulated on one GPU' if emulated else ''})")
        frames.append(epbench_points(table, setting, who=who))
    return pd.concat(frames, ignore_index=True) if frames else None


def recordings_agreement_text(points: pd.DataFrame | None) -> str:
    """Whether this artifact's recordings of the same setting agree (``points`` from
    :func:`epbench_recordings`): over the (setting, policy, quantity) measured by more than one
    recording, the largest difference in points and where, and the median; empty when no
    setting was measured twice."""
    if points is None or points.empty:
        return ""
    g = points.groupby(["setting", "policy", "metric"]).value
    spread = (g.max() - g.min())[g.count() > 1]
    if spread.empty:
        return ""
    (setting, policy, metric), worst = spread.idxmax(), float(spread.max())
    return (f"{points.who.nunique()} recordings, up to {worst:.1f} points apart ({metric}, {policy} at {setting}); "
            f"median {float(spread.median()):.1f} over {len(spread)} quantities measured twice.")


def serving_status(root=None) -> list:
    """What this artifact has measured of serving: every serve-bench recording
    (:func:`serving_recordings`) under a heading, or that there is none.  A list to display."""
    from IPython.display import Markdown

    recorded = serving_recordings(None, root=root)
    if recorded is not None:
        return [Markdown("**Recorded by this artifact** (median over kept windows, % against the same window's static):"),
                recorded]
    return [Markdown("**No serve-bench recording under `data/measured/`**: every serving number on this page is the paper's.")]


def claims_table() -> pd.DataFrame:
    """The paper's serving claims this chapter tracks, as the ledger lists them (numbered from 0)."""
    return chapter_claims(SOURCE).reset_index(drop=True)
