"""Chapter 04, *The simulator*, in three lectures (``notebooks/04_1_routing.md``,
``04_2_phase_diagram.md``, ``04_3_placement.md``): the experiment sizes per
profile and the page's summaries of the simulator studies (Fig. 5, Table 1, the phase diagram
of Fig. 6 and its anatomy, Fig. 12, Tables 3, 4 and 10, Section 5.5, MoonEP, tile-aware prefill,
the trace replay), the routing statistics beside the paper's, and the Markdown the chapter's
prose writes from them.  The experiments are :mod:`tempo.studies.simulator` and
:mod:`tempo.studies.replay`."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...core.cost import CostModel
from ...paper import claims_file, tables
from ...paper.readings import Reading
from ...studies.results import Results
from ...studies.simulator import FIXED, tempo_gain
from .common import sizes as _sizes

#: experiment sizes per profile: smoke is the seconds-long test build (gpu runs the full sizes)
SIZES = {"smoke": dict(tokens=[16, 128, 512, 2048], mixed_batches=10, t1_batches=4, skews=[0.0, 1.2],
                       shapes=["DSv3", "Qwen3-30B", "DSv2-Lite"],
                       replications=[1.25], phase_tokens=[16, 128, 1024], phase_batches=1, scale_eps=[8, 32],
                       landscape_batches=2, landscape_R=[64], landscape_K=[16], stale_batches=3,
                       t10_windows=17, moon_tokens=[8, 64, 512], moon_batches=2, tile_pairs=[4096, 8192], tile_batches=2,
                       tile_shapes=["DSv3"], a2a_pairs=[64, 256, 512], a2a_batches=2, trace_steps=6, trace_layers=2,
                       trace_rescale=[64], routing_batches=10),
         "full": dict(tokens=[16, 32, 64, 128, 256, 512, 1024, 2048], mixed_batches=100, t1_batches=40,
                      skews=None, shapes=["DSv3", "Qwen3-30B", "DSv2-Lite"],  # skews: the reading's (sizes)
                      replications=[1.25, 1.5], phase_tokens=[16, 32, 64, 128, 256, 512, 1024, 2048], phase_batches=3,
                      scale_eps=[8, 16, 32, 64], landscape_batches=12, landscape_R=[16, 64], landscape_K=[16, 32],
                      stale_batches=30, t10_windows=64, moon_tokens=[8, 16, 32, 64, 512, 1024], moon_batches=20,
                      tile_pairs=[4096, 8192, 16384], tile_batches=30, tile_shapes=["DSv3", "Qwen3-235B"],
                      a2a_pairs=[32, 64, 128, 256, 384, 512, 768, 1024], a2a_batches=20, trace_steps=24, trace_layers=4,
                      trace_rescale=[16, 64, 256], routing_batches=100)}


def sizes(profile: str, reading=None) -> dict:
    """The chapter's experiment sizes for a book profile (:data:`SIZES`); outside the smoke
    build the phase grid's skews are the reading's (``skew_grid``, default the paper's six,
    Section 3.2) and its seeds the reading's (``seeds``, ``scale_seeds``: ``random_maxima``)."""
    reading = reading if reading is not None else Reading.paper()
    out = _sizes(SIZES, profile)
    if profile != "smoke":
        out["skews"] = reading.skews
    # the phase grids' seeds (random_maxima: at least 8; the scale grid's start at 1); smoke: one
    out["seeds"] = [0] if profile == "smoke" else reading.seeds()
    out["scale_seeds"] = [1] if profile == "smoke" else reading.seeds(first=1)
    return out


def phase_config(sizes: dict) -> dict:
    """The ``phase_diagram`` config of Fig. 6 at the chapter's sizes (:func:`sizes`): EP8, the
    shapes, skews, replications, batch ladder, batches per cell and seeds.  The routing lecture
    reads the same grid (a cache hit) to place real routing on it."""
    return {"shapes": sizes["shapes"], "eps": [8], "skews": sizes["skews"], "replications": sizes["replications"],
            "tokens": sizes["phase_tokens"], "batches": sizes["phase_batches"], "seeds": sizes["seeds"]}


#: the phase explorer's grid per profile, beside the phase diagram's shapes, replications and
#: skews (:func:`explorer_config`): EP sizes, batch sizes (tokens per GPU; full: sqrt(2) steps
#: from 16 to 2048), batches per cell and the n* ladder of TEMPO's extra solves
EXPLORER_SIZES = {"smoke": dict(eps=[8], tokens=[16, 32, 64, 128, 256, 512, 1024], batches=1, n_stars=[50, 200]),
                  "full": dict(eps=[8, 16, 32], tokens=[int(round(16 * 2 ** (k / 2))) for k in range(15)], batches=2,
                               n_stars=[50, 100, 200, 400])}


def explorer_config(profile: str) -> dict:
    """The ``phase_grid`` config of a book profile: the phase diagram's shapes, replications and
    skews (:func:`sizes`) on the finer grid of :data:`EXPLORER_SIZES`, seed 0 (the phase
    diagram's)."""
    cfg = sizes(profile)
    return {"shapes": cfg["shapes"], "replications": cfg["replications"], "skews": cfg["skews"],
            **_sizes(EXPLORER_SIZES, profile), "seed": 0}


def phase_explorer(grid: pd.DataFrame, profile: str):
    """The page's phase explorer over a ``phase_grid`` result
    (:func:`tempo.book.explorers.phase_explorer`)."""
    from .. import explorers

    return explorers.phase_explorer(grid, profile, explorer_config(profile))


def paper_numbers() -> dict:
    """The paper's numbers the chapter's prose quotes, read from ``data/paper/`` (for
    :func:`tempo.book.paper.glue_numbers`): the DSv3 n*, Fig. 5's split at B = 512, Fig. 6's
    largest gains, the oracle gap's range and the B*_a2a prediction."""
    return {
        "p_nstar_dsv3": float(tables.table(6).set_index("shape").loc["DSv3", "n_star"]),
        "p_flat_b512": tables.text_number("fig5", "flat_share_of_activations_B512"),
        "p_linear_b512": tables.text_number("fig5", "linear_share_of_tokens_B512"),
        "p_max_dsv3": tables.text_number("fig6", "tempo_max_gain_dsv3"),
        "p_max_qwen3": tables.text_number("fig6", "tempo_max_gain_qwen3"),
        "p_max_dsv2": tables.text_number("fig6", "tempo_max_gain_dsv2_1.5x"),
        "p_oracle_lo": claims_file.claim_row("trace_oracle_gap")["paper"][0],
        "p_oracle_hi": claims_file.claim_row("trace_oracle_gap")["paper"][1],
        "p_ba2a_n": float(claims_file.claim_row("ba2a_prediction")["paper"]),
    }


def trace_note(trace_path) -> list:
    """In a trace-backed build (``trace_path`` given), a note naming the recording and the
    studies drawn from it; nothing otherwise.  A list of things to display."""
    from IPython.display import Markdown

    from ...studies import routing_label

    if not trace_path:
        return []
    return [Markdown(f"**{routing_label()}** This build draws the batches of Fig. 5a, Table 1, Table 4, "
                     "Section 5.5, Table 10, MoonEP, tile-aware prefill, Table 3's regimes and the Section 5.4 replay "
                     "from it (see the last section); the phase diagram and Fig. 12 stay on synthetic routing, as in "
                     "the paper. Text below that says \"synthetic\" describes the build without a trace.")]


# ---------------------------------------------------------------------------- routing statistics
#: routing_stats keys shown by :func:`routing_stats_table`, with their labels.
STAT_LABELS = {"hottest_share": "hottest expert's share of pairs (mean over batches)",
               "hottest_share_max": "hottest expert's share of pairs (max over batches)",
               "ceiling": "ceiling 1/K (top-K, distinct experts)",
               "hottest_over_tokens": "hottest expert's pairs / tokens (max; <= 1)",
               "max_over_mean": "expert load max / mean",
               "gpu_max_over_mean": "bottleneck GPU / mean GPU (even split over replicas)",
               "effective_experts": "effective number of experts exp(H)",
               "lag_corr": "lag-1 correlation of per-expert load",
               "lag_corr_dev": "lag-1 correlation of load deviations from the mean",
               "flat_activation_share": "flat experts' share of activations (n_e < n*)",
               "linear_token_share": "linear experts' share of pairs (n_e >= n*)",
               "mixed_share": "mixed batches (both >= 20%)"}


def paper_routing_stats() -> pd.DataFrame:
    """The routing statistics the paper reports, from ``data/paper/routing_stats.csv``
    (stat, value as printed, the paper's setting, section) as a DataFrame indexed by stat.
    The Fig. 5 regime split is read from ``text_numbers.csv``."""
    from ...core import paths
    df = pd.read_csv(paths.PAPER / "routing_stats.csv", dtype=str).set_index("stat")
    fig5 = {"flat_activation_share": "flat_share_of_activations_B512",
            "linear_token_share": "linear_share_of_tokens_B512"}
    for stat, q in fig5.items():
        df.loc[stat] = {"paper": f"{tables.text_number('fig5', q):g}%",
                        "setting": "real traces (Qwen3-30B, DSv2-Lite), B = 512 tokens/GPU", "section": "Section 2.4, Fig. 5"}
    lo, hi = tables.text_number("fig5", "mixed_fraction_real_min"), tables.text_number("fig5", "mixed_fraction_real_max")
    df.loc["mixed_share"] = {"paper": f"{lo:g}-{hi:g}%", "setting": "real traces, 128-512 tokens/GPU",
                             "section": "Section 2.4, Fig. 5"}
    return df


def routing_stats_table(workloads: dict) -> pd.DataFrame:
    """Rows: the statistics of :data:`STAT_LABELS`; columns: each workload's
    :func:`tempo.world.workloads.routing_stats` dict (``{name: stats}``, "this artifact") and
    the paper's value with its setting where the paper reports one."""
    paper_df = paper_routing_stats()
    rows = []
    for key, label in STAT_LABELS.items():
        row = {"statistic": label}
        for name, st in workloads.items():
            v = st.get(key, np.nan)
            row[name] = round(float(v), 3) if v is not None else np.nan
        row["paper"] = paper_df.paper.get(key, "")
        row["paper setting"] = paper_df.setting.get(key, "")
        rows.append(row)
    return pd.DataFrame(rows).set_index("statistic")


def routing_table(rstats: pd.DataFrame) -> pd.DataFrame:
    """:func:`routing_stats_table` of the ``routing_stats`` experiment's result (one column per
    workload, one row per statistic)."""
    return routing_stats_table(rstats.set_index("stat").to_dict())


def routing_text(rstats: pd.DataFrame) -> str:
    """The prose under the routing table: how concentrated the synthetic routing is against the
    paper's ShareGPT routing, and how little its drift-16 timeline persists (``routing_stats``)."""
    from ...world.workloads import zipf_popularity

    rs = rstats.set_index("stat")
    p1 = zipf_popularity(256, 1.0).max()
    pr = paper_routing_stats()
    return (
        f"Under top-8 routing no expert can take more than 1/8 of a batch's pairs; the hottest expert of Zipf(1.0) "
        f"takes {rs.loc['hottest_share', 'zipf1.0_iid']:.3f} on average, although its router weight is {p1:.3f} (the "
        f"share an independent-pair sampler would give it). Its load is {rs.loc['max_over_mean', 'zipf1.0_iid']:.0f}x the mean "
        f"expert's, far above the {pr.loc['max_over_mean', 'paper']} the paper reports for ShareGPT routing "
        f"(Qwen3-235B, 128 experts): Zipf(1.0) over 256 experts is a much more concentrated workload than that trace. "
        f"The bottleneck GPU carries {rs.loc['gpu_max_over_mean', 'zipf1.0_iid']:.2f}x the mean GPU's pairs on a fresh "
        f"placement and {rs.loc['gpu_max_over_mean', 'drift16_timeline']:.2f}x on the drift-16 placement (paper: "
        f"{pr.loc['gpu_max_over_mean', 'paper']}, routinely). Per-expert loads of consecutive batches correlate at "
        f"{rs.loc['lag_corr', 'drift16_timeline']:.2f} on the drift-16 timeline, almost all of it the long-run popularity: "
        f"the deviations from each expert's mean correlate at {rs.loc['lag_corr_dev', 'drift16_timeline']:.3f}, because the "
        "drift we set from the paper's statements (popularity drifts far slower than a 200 ms window: correlation time "
        "300 windows) moves little "
        "between windows compared with the per-batch noise of a few hundred tokens.")


# ---------------------------------------------------------------------------- mixed regimes (Fig. 5)
def mixed_summary(mixed: pd.DataFrame) -> pd.DataFrame:
    """Fig. 5's numbers per batch size: % of mixed batches, mean % of activated experts in the
    flat region and mean % of tokens in linear-region experts (the ``mixed_regime`` result)."""
    return mixed.groupby("tokens_per_gpu").agg(
        mixed_pct=("mixed", "mean"), flat_experts_pct=("flat_expert_share", "mean"),
        linear_tokens_pct=("linear_token_share", "mean")).mul(100).round(1)


def mixed_tables(mixed_all: pd.DataFrame) -> list:
    """What the chapter shows of a ``mixed_regime`` result: :func:`mixed_summary` of the
    synthetic batches (Fig. 5b) and, when the build drew trace batches too (Fig. 5a), the
    routing's label and the same summary of those."""
    from IPython.display import Markdown

    from ...studies import routing_label, routing_rows

    out = [mixed_summary(routing_rows(mixed_all, "synthetic"))]
    trace = routing_rows(mixed_all, "trace")
    if len(trace):
        out += [Markdown(routing_label()), mixed_summary(trace)]
    return out


def mixed_text(mixed: pd.DataFrame, tokens) -> str:
    """The prose under Fig. 5: at which batch sizes ``tokens`` (tokens per GPU, EP8) the
    synthetic batches are not all mixed and why, and the paper's split at B = 512."""
    fig5 = mixed_summary(mixed)
    n_star_dsv3 = CostModel.named("dsv3-offline").n_star
    too_few = [B for B in tokens if B * 8 < n_star_dsv3]  # a batch's tokens (EP8) below n*: no expert can be linear
    never = fig5.index[fig5.mixed_pct < 100].tolist()
    return (
        ("Every synthetic batch is mixed, as the paper finds for Zipf(1.2) routing." if not never else
         f"Every batch is mixed at every size except B = {', '.join(map(str, never))} tokens per GPU, where "
         f"{', '.join(f'{fig5.mixed_pct[B]:.0f}%' for B in never)} of the batches are, unlike the paper's 100% across the ladder"
         + (f": with B = {', '.join(map(str, too_few))} a batch of {8 * too_few[0]} tokens cannot give any expert {n_star_dsv3:.0f} pairs when each "
            "token picks 8 distinct experts, so no expert is linear. The paper's own synthetic routing draws pairs "
            "independently (its E_eff formula, Section 3.2), where one expert may take more pairs than there are tokens."
            if too_few else ".")) +
        f" The split at B = 512 differs from the paper's ({tables.text_number('fig5', 'flat_share_of_activations_B512'):.0f}% "
        f"of activations flat, {tables.text_number('fig5', 'linear_share_of_tokens_B512'):.0f}% of tokens linear): the paper "
        "measured that pair on recorded routing of Qwen3-30B and DSv2-Lite. The rows of a recorded trace above (the "
        "public ESFT recording, the DSv2-Lite architecture, unless the build was given `TRACE=`) are real routing of a "
        "trained model; the ledger shows the ESFT values as stand-ins, apart from the verdicts.")


# ---------------------------------------------------------------------------- proxy mispricing (Table 1)
T1_POLICIES = ["static", "uniform", "token_lp", "metro", "spread"]


def mispricing_summary(t1: pd.DataFrame) -> pd.DataFrame:
    """Table 1, this artifact: per concurrency B, each proxy's ratio to TEMPO (and the spread)
    as ``<policy> median`` and ``<policy> p95`` over batches (the ``proxy_mispricing`` result)."""
    g = t1.groupby("B")[T1_POLICIES]
    out = pd.concat({"median": g.median(), "p95": g.quantile(0.95)}, axis=1)
    out.columns = [f"{p} {q}" for q, p in out.columns]
    return out[[f"{p} {q}" for p in T1_POLICIES for q in ("median", "p95")]]


def mispricing_ordering(t1: pd.DataFrame, table1: pd.DataFrame) -> pd.DataFrame:
    """Table 1's story as an ordering, per concurrency B: the most expensive and the cheapest
    proxy by median ratio to TEMPO, in this artifact's batches (``proxy_mispricing``) and in the
    paper's Table 1 (``tempo.paper.tables.table(1)``: B, policy, median), and whether the two agree.  The
    spread (worst over best proxy) is not a proxy and is left out; ties go to the first proxy
    in :data:`T1_POLICIES` order."""
    proxies = [p for p in T1_POLICIES if p != "spread"]
    ours = t1.groupby("B")[proxies].median()
    theirs = table1[table1.policy.isin(proxies)].pivot(index="B", columns="policy", values="median")[proxies]
    rows = []
    for B in ours.index:
        row = {"B": int(B), "ours: most expensive": ours.loc[B].idxmax(), "ours: cheapest": ours.loc[B].idxmin()}
        if B in theirs.index:
            row.update({"paper: most expensive": theirs.loc[B].astype(float).idxmax(),
                        "paper: cheapest": theirs.loc[B].astype(float).idxmin()})
            row["same ordering ends"] = (row["ours: most expensive"] == row["paper: most expensive"]
                                         and row["ours: cheapest"] == row["paper: cheapest"])
        rows.append(row)
    return pd.DataFrame(rows).set_index("B")


def mispricing_paper(table1: pd.DataFrame) -> pd.DataFrame:
    """Table 1 as the paper prints it (medians, one row per B), from ``tempo.paper.tables.table(1)``."""
    return table1.pivot(index="B", columns="policy", values="median")[T1_POLICIES]


def concentration_text(rstats: pd.DataFrame) -> str:
    """Why Table 1's magnitudes differ: the hottest expert's load over the mean in our Zipf(1.0)
    workload (``routing_stats``) against the paper's ShareGPT routing."""
    rs = rstats.set_index("stat")
    pr = paper_routing_stats()
    col, name = ("proxy_iid", "proxy") if "proxy_iid" in rs else ("zipf1.0_iid", "Zipf(1.0)")
    return (f"One reason magnitudes differ from real routing: our {name} workload is far more concentrated than any "
            f"routing the paper characterizes. Its hottest expert carries {rs.loc['max_over_mean', col]:.0f}x the mean "
            f"expert's load (routing statistics above) against {pr.loc['max_over_mean', 'paper']} for the paper's "
            "ShareGPT routing. The paper's proxy router was synthetic too, and its skew is calibrated here to the one "
            "statistic the paper prints of it (Section 5.13), so Table 1's magnitudes are compared on the paper's own "
            "input; the paper does not report this statistic for its proxy.")


# ---------------------------------------------------------------------------- the phase diagram (Fig. 6, Fig. 12)
def first_seed(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of a seeded grid's first seed (the grid the figures and the anatomy show); a
    result without a ``seed`` column is returned whole."""
    return df[df.seed == df.seed.min()] if "seed" in df else df


def seed_mean(df: pd.DataFrame) -> pd.DataFrame:
    """A seeded phase grid averaged over its seeds, per cell (shape, EP, skew, replication, B):
    the mean of every numeric column (Fig. 12's expected gain per cell)."""
    keys = [k for k in ("shape", "ep", "skew", "replication", "B") if k in df]
    num = [c for c in df.select_dtypes("number").columns if c not in keys + ["seed", "batches"]]
    return df.groupby(keys, as_index=False)[num].mean()


#: the phase maxima the paper reports (Section 3.2): claim id, shape, replication (None: both)
PHASE_MAXIMA = [("phase_max_gain_dsv3", "DSv3", None), ("phase_max_gain_qwen3", "Qwen3-30B", None),
                ("phase_max_gain_dsv2", "DSv2-Lite", 1.5)]


def seed_maxima(phase: pd.DataFrame) -> pd.DataFrame:
    """TEMPO's largest gain over the best fixed policy for each maximum the paper reports
    (:data:`PHASE_MAXIMA`), once per seed: the median and the range over the seeds beside the
    paper's value.  The ledger's phase_max_gain claims agree when the paper's value is in the
    range (the ``random_maxima`` reading)."""
    rows = []
    for cid, shape, rep in PHASE_MAXIMA:
        sub = phase[(phase["shape"] == shape) & ((phase.replication == rep) if rep else True)]
        if sub.empty:
            continue
        per = sub.groupby("seed").gain_pct.max() if "seed" in sub else sub.gain_pct.agg(["max"])
        rows.append({"shape": shape, "replication": "both" if rep is None else f"{rep}x",
                     "paper %": claims_file.claim_row(cid)["paper"], "median of seeds' max %": float(per.median()),
                     "lowest seed %": float(per.min()), "highest seed %": float(per.max()), "seeds": len(per)})
    return pd.DataFrame(rows)


def faces_summary(faces: pd.DataFrame) -> pd.DataFrame:
    """The three optimal token-LP dispatches on the phase grid's batches (``token_lp_faces``):
    per shape and face, the batches, in how many the face's makespan differs from the HiGHS
    vertex's (the ``token_lp_face`` reading's paper choice), its makespan over the HiGHS
    vertex's (lowest, median, highest), the busiest GPU's activated slots (mean) and the
    batches where HiGHS stopped without an optimum and the max-flow vertex stood in."""
    need = {"shape", "seed", "ep", "skew", "replication", "B", "batch", "face", "makespan_us", "max_G", "same_as_highs"}
    if not need <= set(faces.columns):
        raise ValueError(f"faces must have columns {sorted(need)} (the token_lp_faces experiment)")
    key = ["shape", "seed", "ep", "skew", "replication", "B", "batch"]
    ref = faces[faces.face == "highs_vertex"].set_index(key).makespan_us
    rows = []
    for (sh, face), g in faces.groupby(["shape", "face"], sort=False):
        r = g.set_index(key).makespan_us / ref.reindex(g.set_index(key).index)
        rows.append({"shape": sh, "face": face, "batches": len(g), "differs from HiGHS": int((~g.same_as_highs).sum()),
                     "makespan / HiGHS, lowest": r.min(), "median": r.median(), "highest": r.max(),
                     "busiest GPU's slots (mean)": g.max_G.mean(),
                     "HiGHS fell back": int((g.get("fallback", pd.Series("", index=g.index)).fillna("") != "").sum())})
    return pd.DataFrame(rows).set_index(["shape", "face"])


def faces_numbers(faces: pd.DataFrame) -> dict:
    """What the chapter's prose glues from ``token_lp_faces``: the batches, those where the
    max-flow vertex and the HiGHS vertex differ in makespan, the range of their ratio, and the
    largest spread over the HiGHS vertex."""
    t = faces_summary(faces)
    mf, ev = t.xs("maxflow_vertex", level="face"), t.xs("even_spread", level="face")
    return {"faces_batches": float(mf.batches.sum()), "faces_differ": float(mf["differs from HiGHS"].sum()),
            "faces_mf_lo": float(mf["makespan / HiGHS, lowest"].min()), "faces_mf_hi": float(mf["highest"].max()),
            "faces_even_hi": float(ev["highest"].max()), "faces_fallbacks": float(t["HiGHS fell back"].sum())}


#: the alternatives whose phase maxima the chapter's prose quotes, with their glue names
PROSE_ALTERNATIVES = {("token_lp_face", "even_spread"): "spread", ("token_lp_face", "maxflow_vertex"): "mfv",
                      ("metro_order", "descending_tokens"): "mdesc", ("metro_order", "random_order"): "mrand",
                      ("synthetic_router", "distinct_topk"): "distinct", ("tempo_preset", "default"): "deftempo"}


def alternative_numbers(profile: str) -> dict:
    """The phase maxima (median of the seeds' maxima, the ledger's value) under the paper's
    reading and under each alternative of :data:`PROSE_ALTERNATIVES`, as computed by the ledger
    from this build's runs (``alt_<name>_<shape>``, ``alt_paper_<shape>``); NaN where the
    build did not run the alternative."""
    from .. import claims

    results = Results(profile)
    out = {}
    for cid, shape, _ in PHASE_MAXIMA:
        row = claims_file.claim_row(cid)
        k = ANATOMY_SHORT[shape]
        e = claims.evaluate(row, results)
        out[f"alt_paper_{k}"] = e["ours"] if e["ours"] is not None else float("nan")
        for alt, name in PROSE_ALTERNATIVES.items():
            v = claims.evaluate(row, results, alt)["ours"]
            out[f"alt_{name}_{k}"] = float(v) if v is not None else float("nan")
    return {k: float(v) for k, v in out.items()}


def phase_gains(phase: pd.DataFrame) -> pd.DataFrame:
    """TEMPO's gain over the best fixed policy per (shape, replication): min, max, mean %."""
    return phase.groupby(["shape", "replication"]).gain_pct.agg(["min", "max", "mean"])


def scale_gains(scale: pd.DataFrame) -> pd.DataFrame:
    """Fig. 12 per (skew, EP): mean and max gain over the batch ladder, compute-only and with
    the communication term (the ``phase_diagram`` result with ``comm_kr``)."""
    return scale.groupby(["skew", "ep"]).agg(mean_gain=("gain_pct", "mean"), max_gain=("gain_pct", "max"),
                                             mean_gain_comm=("gain_comm_pct", "mean"),
                                             max_gain_comm=("gain_comm_pct", "max"))


def max_gain_cells(phase: pd.DataFrame) -> list[dict]:
    """Each shape's phase-diagram cell of TEMPO's largest gain over the best fixed policy, as
    ``phase_anatomy`` cells (shape, skew, replication, B)."""
    top = phase.loc[phase.groupby("shape").gain_pct.idxmax()]
    return [{"shape": str(r.shape), "skew": float(r.skew), "replication": float(r.replication), "B": int(r.B)}
            for r in top.itertuples()]


def anatomy_gains(anatomy: pd.DataFrame) -> pd.DataFrame:
    """Per (cell, placement): the best of the phase diagram's fixed policies (M / L / E, as in
    :func:`tempo.studies.simulator.phase_cell`) and TEMPO's gain over it, TEMPO's gain over the
    best fixed policy when the sparse token-LP vertex joins them, and TEMPO's makespan over the
    lower bound.  ``anatomy`` is the :func:`tempo.studies.simulator.phase_anatomy` result."""
    need = {"shape", "skew", "replication", "B", "placement", "policy", "makespan_us", "lower_bound_us"}
    if not need <= set(anatomy.columns):
        raise ValueError(f"anatomy must have columns {sorted(need)} (the phase_anatomy experiment)")
    rows = []
    for key, g in anatomy.groupby(["shape", "skew", "replication", "B", "placement"], sort=False):
        ms = g.set_index("policy").makespan_us
        best, gain = tempo_gain(ms)
        best_v, gain_v = tempo_gain(ms, list(FIXED) + ["token_lp_vertex"])
        rows.append({**dict(zip(["shape", "skew", "replication", "B", "placement"], key)),
                     "best_fixed": best, "gain_pct": gain, "best_with_vertex": best_v, "gain_vs_vertex_pct": gain_v,
                     "tempo_over_lb": ms["tempo"] / g.lower_bound_us.iloc[0],
                     "paper_preset_gain_pct": tempo_gain(ms, [best], "tempo_paper")[1]})
    return pd.DataFrame(rows)


def anatomy_table(anat: pd.DataFrame) -> pd.DataFrame:
    """The ``phase_anatomy`` rows under the phase diagram's own placement (long-run loads): per
    cell and dispatch, the makespan, the busiest GPU's activations and tokens, the lower bound."""
    return anat[anat.placement == "long-run loads"][["shape", "skew", "replication", "B", "policy", "makespan_us",
                                                      "max_G", "max_N", "lower_bound_us"]]


#: the anatomy's shapes by the short names the chapter's prose glues them under
ANATOMY_SHORT = {"DSv3": "dsv3", "Qwen3-30B": "qwen3", "DSv2-Lite": "dsv2"}


def anatomy_numbers(anat: pd.DataFrame, why: pd.DataFrame) -> dict:
    """The numbers the chapter quotes about each shape's maximum cell (``an_<what>_<shape>``),
    from ``phase_anatomy`` (``anat``) and :func:`anatomy_gains` (``why``): TEMPO's gain, its
    gain against the vertex token-LP, its distance from the lower bound (%), the paper preset's
    gain, the gain under the router-weight placement, the busiest GPU's activated slots (G) and
    tokens (N) per policy, and the hottest expert's router weight, pair share and replicas."""
    rw = anat[anat.placement == "long-run loads"].set_index(["shape", "policy"])
    ab = anat[anat.placement == "router weights"].set_index(["shape", "policy"])
    gw = why.set_index(["shape", "placement"])
    out = {}
    for sh, k in ANATOMY_SHORT.items():
        if (sh, "long-run loads") not in gw.index:
            continue
        g = gw.loc[(sh, "long-run loads")]
        out.update({f"an_gain_{k}": g.gain_pct, f"an_vertex_{k}": g.gain_vs_vertex_pct,
                    f"an_lb_{k}": 100 * (g.tempo_over_lb - 1), f"an_paper_{k}": g.paper_preset_gain_pct,
                    f"an_routerw_{k}": gw.loc[(sh, "router weights")].gain_pct,
                    f"an_G_lp_{k}": rw.loc[(sh, "token_lp"), "max_G"], f"an_G_tempo_{k}": rw.loc[(sh, "tempo"), "max_G"],
                    f"an_G_metro_{k}": rw.loc[(sh, "metro"), "max_G"], f"an_N_metro_{k}": rw.loc[(sh, "metro"), "max_N"],
                    f"an_N_tempo_{k}": rw.loc[(sh, "tempo"), "max_N"], f"an_N_lp_{k}": rw.loc[(sh, "token_lp"), "max_N"],
                    f"an_hot_w_{k}": rw.loc[(sh, "tempo"), "hot_router_weight"],
                    f"an_hot_share_{k}": rw.loc[(sh, "tempo"), "hot_pair_share"],
                    f"an_hot_reps_{k}": int(rw.loc[(sh, "tempo"), "hot_replicas"]),
                    f"an_hot_reps_rw_{k}": int(ab.loc[(sh, "tempo"), "hot_replicas"]),
                    f"an_slots_{k}": int(rw.loc[(sh, "tempo"), "slots_per_gpu"]) * 8})  # EP8, the phase diagram's
    return {k: float(v) for k, v in out.items()}


def boundary_columns(bounds: pd.DataFrame) -> pd.DataFrame:
    """The first seed's rows of a ``phase_boundary`` result (:func:`tempo.studies.simulator.boundary_hits`
    per (skew, replication) column), without the seed, shape and EP columns."""
    return first_seed(bounds).drop(columns=["seed", "shape", "ep"]).reset_index(drop=True)


def boundary_text(bt: pd.DataFrame) -> str:
    """The prose under the flip-boundary table (:func:`boundary_columns`): in how many columns
    the analytic B* lands in the observed band, and each miss."""
    miss = bt[~bt.hit]
    hits = int(bt.hit.sum())
    desc = "; ".join(f"s = {r.skew}, {r.replication}x: B* = {r.B_star:.0f} vs band [{r.band_lo:.0f}, {r.band_hi:.0f}] "
                     f"({'above' if r.B_star > r.band_hi else 'below'}, {r.mechanism} mechanism)" for r in miss.itertuples())
    return (f"The boundary lands inside the observed flip band in {hits} of {len(bt)} columns here."
            + (f" Misses: {desc}. A column where token-LP never wins alone above METRO's last win has no band to "
               "hit (its top cells may tie, M+L: a tie is won by neither policy and ends no band, the ties reading); "
               "it counts as a miss, and this deviation is reported, not tuned away." if len(miss) else ""))


# ---------------------------------------------------------------------------- policy landscape (Table 4)
T4_ROWS = ["uniform", "token_lp", "metro", "llep", "tempo"]


def landscape_table(land: pd.DataFrame, redundant: int = 64, drift: int = 16) -> pd.DataFrame:
    """Table 4, this artifact: median makespan / static per kernel (rows) and scale (columns)
    at one redundancy and drift (the ``policy_landscape`` result)."""
    main = land[(land.redundant == redundant) & (land.drift == drift)]
    if main.empty:
        raise ValueError(f"no policy_landscape rows at redundant={redundant}, drift={drift}")
    t = main.groupby(["policy", "scale"]).ratio_to_static.median().unstack()
    return t.loc[[p for p in T4_ROWS if p in t.index], [s for s in ("0.25x", "1x", "4x") if s in t.columns]]


def landscape_grid(land: pd.DataFrame) -> pd.DataFrame:
    """Median makespan / static per (redundancy, drift) and kernel, over every scale."""
    return land.groupby(["redundant", "drift", "policy"]).ratio_to_static.median().unstack("policy")


def tight_text(land: pd.DataFrame) -> str:
    """What the tight redundancy R = 16 shows (``policy_landscape``): the span of its kernels'
    medians, against the paper's collapse to static."""
    tight = land[land.redundant == 16].groupby(["drift", "policy"]).ratio_to_static.median()
    return ("R = 16 is not run in this profile." if tight.empty else
            f"At R = 16 the paper finds every kernel collapsing to static (ratio 1); here the medians span "
            f"{tight.min():.3f} to {tight.max():.3f}"
            + (", so they do not collapse on our synthetic batches." if (tight - 1).abs().max() > 0.005 else ", a collapse as well."))


# ---------------------------------------------------------------------------- staleness (Section 5.5)
def staleness_table(stale: pd.DataFrame) -> pd.DataFrame:
    """Section 5.5: median makespan / static per scale (rows) and information regime."""
    return stale.groupby(["scale", "regime"]).ratio_to_static.median().unstack()[["exact", "stale-1", "frozen", "uniform"]]


def staleness_text(st: pd.DataFrame, rstats: pd.DataFrame) -> str:
    """The prose under the staleness table (:func:`staleness_table`, ``st``): the four regimes
    at 1x against static and the paper, and the drift's persistence (``routing_stats``)."""
    rs = rstats.set_index("stat")
    r = st.loc["1x"]
    return (
        f"At 1x, exact solving reaches {r['exact']:.3f} of static, stale-1 {r['stale-1']:.3f}, frozen {r['frozen']:.3f} and "
        f"uniform {r['uniform']:.3f}. Worse than static here: {', '.join(r.index[r > 1 + 1e-9]) or 'none'} (in the paper only "
        f"uniform); exact solving is {'best, as in the paper' if r.idxmin() == 'exact' else 'not the best'}. Unlike the paper, "
        "a one-batch-old table keeps "
        f"{'none' if r['stale-1'] >= 1 - 1e-9 else 'only part'} of the exact gain here. Our timeline drifts, but slowly "
        "against the per-batch noise: consecutive batches' deviations from each expert's mean load correlate at "
        f"{rs.loc['lag_corr_dev', 'drift16_timeline']:.3f} (routing statistics above), so the previous batch carries "
        "little information about the next one beyond the long-run popularity. The paper does not report this "
        "statistic for its routing, so we cannot say whether its windows are more persistent.")


# ---------------------------------------------------------------------------- faster EPLB (Table 10)
#: Table 10's rows: (dispatch, refresh scheme) -> the paper's row label (``tempo.paper.tables.table(10)``).
T10_LABELS = {("static", "never"): "static, never refresh", ("uniform", "never"): "uni, never refresh",
              ("uniform", "cum16"): "uni + cum16 refresh", ("static", "cum16"): "static + cum16 refresh",
              ("tempo", "never"): "TEMPO, never refresh", ("tempo", "cum16"): "TEMPO + cum16 refresh",
              ("tempo", "W4"): "TEMPO + W4 refresh"}


def faster_eplb_table(t10: pd.DataFrame) -> pd.DataFrame:
    """Table 10, this artifact: per paper row, the median and p95 ratio to the never-refreshed
    static map at each B, columns ``B<B>_median`` / ``B<B>_p95`` (the ``faster_eplb`` result)."""
    rows = pd.Series([T10_LABELS[(p, r)] for p, r in zip(t10.policy, t10.refresh)], index=t10.index, name="row")
    t = t10.assign(row=rows).groupby(["row", "B"]).ratio.agg(median="median", p95=lambda x: x.quantile(0.95)).unstack("B")
    t.columns = [f"B{b}_{q}" for q, b in t.columns]
    cols = [f"B{b}_{q}" for b in sorted(t10.B.unique()) for q in ("median", "p95")]
    return t.loc[[v for v in T10_LABELS.values() if v in t.index], cols]


def faster_eplb_side_by_side(t10: pd.DataFrame) -> pd.DataFrame:
    """Table 10 as the paper prints it beside :func:`faster_eplb_table` (rounded to 3 places)."""
    return pd.concat({"paper": tables.table(10).set_index("policy"), "this artifact": faster_eplb_table(t10).round(3)},
                     axis=1)


def faster_eplb_text(t10: pd.DataFrame) -> str:
    """The prose under Table 10: its rows read the way the paper reads them, ours beside the
    paper's."""
    o = faster_eplb_table(t10)
    p10 = tables.table(10).set_index("policy")
    uni, uni16 = o.loc['uni, never refresh', 'B128_median'], o.loc['uni + cum16 refresh', 'B128_median']
    verdict = 'worse' if uni16 > uni + 0.005 else 'no better' if uni16 > uni - 0.005 else 'better'
    return (
        f"Read the rows the way the paper does. In the floor regime (B = 128) the uniform split costs "
        f"{o.loc['uni, never refresh', 'B128_median']:.2f} of static never refreshed and {o.loc['uni + cum16 refresh', 'B128_median']:.2f} "
        f"with cum16 (paper {p10.loc['uni, never refresh', 'B128_median']:.2f} and {p10.loc['uni + cum16 refresh', 'B128_median']:.2f}: "
        "in the paper a more balanced replica spread fragments more experts over GPUs and "
        f"manufactures more activation floors; here the refresh makes it "
        f"{verdict}). "
        f"TEMPO on the stale placement reaches "
        f"{o.loc['TEMPO, never refresh', 'B128_median']:.2f} (paper {p10.loc['TEMPO, never refresh', 'B128_median']:.2f}). "
        f"In the compute regime (B = 512) TEMPO without any refresh reaches {o.loc['TEMPO, never refresh', 'B512_median']:.2f} "
        f"(paper {p10.loc['TEMPO, never refresh', 'B512_median']:.2f}) and composing it with a refresh is best, "
        f"{o.loc['TEMPO + W4 refresh', 'B512_median']:.2f} with W4 (paper {p10.loc['TEMPO + W4 refresh', 'B512_median']:.2f}). "
        f"Static dispatch on a refreshed placement: {o.loc['static + cum16 refresh', 'B512_median']:.2f} at B = 512 "
        f"(paper {p10.loc['static + cum16 refresh', 'B512_median']:.2f}); static here is SGLang's static dispatch, as everywhere "
        "in this book.")


# ---------------------------------------------------------------------------- MoonEP (Appendix H)
def moonep_table(moon: pd.DataFrame) -> pd.DataFrame:
    """Appendix H, this artifact: median change of block makespan (%) per (baseline, tokens per
    GPU) and policy (the ``moonep_replay`` result)."""
    mt = moon.groupby(["baseline", "tokens_per_gpu", "policy"]).change_pct.median().unstack("policy")
    return mt[["moonep_free", "moonep_charged", "token_lp", "tempo"]]


def moonep_text(mt: pd.DataFrame) -> str:
    """The prose under the MoonEP table (:func:`moonep_table`): decode (B <= 64) and prefill
    (B >= 512) against static, beside the paper's charged-prefetch range."""
    dec = mt.loc["static"].loc[lambda d: d.index <= 64]
    pre = mt.loc["static"].loc[lambda d: d.index >= 512]
    return (
        f"At decode, free prefetch gains {-dec.moonep_free.max():.1f} to {-dec.moonep_free.min():.1f}% and TEMPO "
        f"{-dec.tempo.max():.1f} to {-dec.tempo.min():.1f}% on the same batches: perfect token balance does nothing for the "
        "activation floor. Charged prefetch turns MoonEP slower than static, as in the paper, but by "
        f"{dec.moonep_charged.min():.0f} to {dec.moonep_charged.max():.0f}% instead of the paper's "
        f"{' to '.join(f'+{v:g}' for v in claims_file.claim_row('moonep_charged_decode')['paper'])}%: the replay copies "
        "few experts per batch, even from MoonEP's own layout (it fills a receiver's quota from the donor's largest "
        "expert first, so one copy carries many tokens), and charges each copy 4 b, about 16 us for this shape; the "
        "ledger's note on moonep_charged_decode counts the copies against what the paper's range would take. The "
        "paper's accounting of a copy is not "
        "specified beyond the 4x ratio (its measured MoonEP prefetch on the real library is for the DSv3 shape, "
        "a different expert size, so it does not calibrate this replay). At prefill the free variant and token-LP coincide "
        f"({pre.moonep_free.round(1).tolist()} vs {pre.token_lp.round(1).tolist()} %), as the paper reports.")


# ---------------------------------------------------------------------------- tile-aware prefill (Section 2.2)
def tile_table(tile: pd.DataFrame) -> pd.DataFrame:
    """Section 2.2, this artifact: per (shape, pairs per GPU) the % of batches whose makespan the
    tile-aware search changes (a different split of equal cost is no change), the median and
    p95 cut (%), and the uniform split's median extra padded tiles (%); per routing first
    (synthetic, trace) when the result has both."""
    t = tile.groupby((["routing"] if "routing" in tile else []) + ["shape", "pairs_per_gpu"]).agg(
        changed_pct=("changed", "mean"), cut_median_pct=("cut_pct", "median"),
        cut_p95_pct=("cut_pct", lambda x: x.quantile(0.95)), uniform_extra_tiles_pct=("uniform_extra_tiles_pct", "median"))
    t["changed_pct"] *= 100
    return t


# ---------------------------------------------------------------------------- B*_a2a (Section 5.13, Table 3)
def ba2a_table(a2a: pd.DataFrame, model: CostModel) -> pd.DataFrame:
    """Table 3's model columns, this artifact: per B the most frequent bottleneck regime,
    TEMPO's median block ratio to static, the mean activated experts per GPU and the
    crossover N* = (a + bG - c2) / gamma at that G (:func:`tempo.studies.replay.ba2a`) (the
    ``ba2a_regimes`` result)."""
    from ...studies.replay import ba2a

    t = a2a.groupby("B").agg(regime=("regime", lambda x: x.mode()[0]), block_ratio=("ratio_to_static", "median"),
                             G_per_gpu=("mean_G", "mean"))
    t["N_star_at_G"] = [ba2a(model, g) for g in t.G_per_gpu]
    return t


def ba2a_side_by_side(a2a: pd.DataFrame, model: CostModel) -> pd.DataFrame:
    """Table 3's model columns, the paper's (regime, block ratio) beside :func:`ba2a_table`
    (rounded to 3 places), one row per B."""
    p3 = tables.table(3).set_index("B")[["regime", "block_ratio"]]
    return pd.concat({"paper": p3, "this artifact": ba2a_table(a2a, model).round(3)}, axis=1).sort_index()


def table3_measured() -> pd.DataFrame:
    """Table 3's measured columns as the paper prints them: the wall-clock change of two TEMPO
    windows over static and the expert share of the block, per B."""
    return tables.table(3).set_index("B")[["delta_w1_pct", "delta_w2_pct", "expert_share_pct"]]


# ---------------------------------------------------------------------------- trace replay (Section 5.4)
def trace_replay_config(trace_path, sizes: dict, public: str | None = None) -> dict:
    """The ``trace_replay`` config: the trace (``None``: the shipped public trace ``public``,
    its first ``trace_layers`` layers, or without one a synthetic trace), the steps, layers and
    rescaled batch sizes of ``sizes``; a trace's contents key the cache and record its
    provenance (:func:`tempo.world.traces.trace_config`)."""
    cfg = {"trace": trace_path, "steps": sizes["trace_steps"], "layers": sizes["trace_layers"],
           "rescale": sizes["trace_rescale"]}
    if not trace_path and public:
        from ...core import paths

        trace_path = str(paths.TRACES / public)
        cfg.update(trace=trace_path, max_layers=sizes["trace_layers"])
    if trace_path:
        from ...world.traces import trace_config

        cfg.update(trace_config(trace_path))
    return cfg


def trace_source_text(tr_cfg: dict) -> str:
    """The line above the oracle-gap table: where the replayed trace came from, and the model."""
    from ...studies import routing_label

    return (f"{routing_label(tr_cfg) if tr_cfg.get('trace') else 'Trace source: **synthetic** (no `TRACE` given).'} "
            + (f"Its first {tr_cfg['max_layers']} layers. " if tr_cfg.get("max_layers") else "")
            + "Priced with the Table 6 offline model of the trace's shape (Qwen3-30B for 128 experts, top-8; "
            "DSv2-Lite for 64, top-6), EP8, EPLB 1.25x from the first half of the steps.")


# ---------------------------------------------------------------------------- Fig. 12 at s = 0: computed candidates
def scale_s0_config(sizes: dict) -> dict:
    """The ``scale_s0_candidates`` config at the chapter's sizes: the scale study's batch ladder
    (``phase_tokens``), batches per cell (``phase_batches``) and first seed (1), EP32 and EP64."""
    return {"tokens": sizes["phase_tokens"], "batches": int(sizes["phase_batches"]), "eps": [32, 64], "seed": 1}


def scale_s0_table(cand: pd.DataFrame) -> pd.DataFrame:
    """Per candidate and EP size: the mean and the largest gain over the batch ladder (the
    paper: mean 6-6.5%, largest 15.5%) and the replicated experts whose replicas share a GPU."""
    g = cand.groupby(["candidate", "ep"], sort=False)
    return g.agg(mean_gain_pct=("gain_pct", "mean"), max_gain_pct=("gain_pct", "max"),
                 replicated=("replicated", "first"), colocated=("colocated", "first")).reset_index()


def scale_s0_text(table: pd.DataFrame, paper_lo: float, paper_hi: float) -> str:
    """Which candidates of :func:`scale_s0_table` reach the paper's mean gain at s = 0
    (``paper_lo``-``paper_hi`` %, on every EP size of the table), written from the table."""
    m = table.groupby("candidate", sort=False).mean_gain_pct.agg(["min", "max"])
    reach = [c for c, r in m.iterrows() if r["min"] >= paper_lo]
    near = [c for c, r in m.iterrows() if c not in reach and r["max"] >= paper_lo / 2]

    def col(c):
        return ", ".join(f"EP{r.ep} {r.colocated} of {r.replicated}" for r in table[table.candidate == c].itertuples())

    first = m.index[0]
    parts = [f"As built, the mean gain at s = 0 is {m.iloc[0]['min']:.2f}-{m.iloc[0]['max']:.2f}% on "
             f"EP{int(table.ep.min())}-{int(table.ep.max())}; replicated experts whose every replica sits on one "
             f"GPU: {col(first)}. Each other candidate changes one thing (mean gain over the ladder, lowest-highest "
             "over the EP sizes; co-located replicated experts):"]
    for c, r in m.iloc[1:].iterrows():
        parts.append(f"{c}: {r['min']:.2f}-{r['max']:.2f}% ({col(c)}).")
    parts.append((f"At least the low end of the paper's {paper_lo:g}-{paper_hi:g}% on every EP size: "
                  + ", ".join(reach) + ".")
                 if reach else f"No candidate reaches the paper's {paper_lo:g}-{paper_hi:g}% on every EP size" +
                 (f"; at least half of it somewhere: {', '.join(near)}." if near else "."))
    return " ".join(parts)


# ---------------------------------------------------------------------------- phase_min_gain vs an exact activation balancer
def activation_balancer_config(sizes: dict) -> dict:
    """The ``activation_balancer`` config at the chapter's sizes: the phase grid's shapes,
    replications, skews, batch ladder and batches per cell, seed 0 (the phase diagram's first)."""
    return {"shapes": sizes["shapes"], "replications": sizes["replications"], "skews": sizes["skews"],
            "tokens": sizes["phase_tokens"], "batches": int(sizes["phase_batches"]), "seed": 0}


def activation_balancer_table(cells: pd.DataFrame) -> pd.DataFrame:
    """Per shape: TEMPO's lowest and highest cell gain over the best fixed policy and over the
    best of those and the exact activation balancer (the phase maxima against the strongest
    baseline per cell), the cells where the exact balancer beats TEMPO by more than 0.3%, and
    where the lowest of those sits."""
    out = []
    for shape, g in cells.groupby("shape", sort=False):
        worst = g.loc[g.gain_vs_exact_pct.idxmin()]
        out.append({"shape": shape, "min_gain_vs_fixed_pct": g.gain_pct.min(),
                    "min_gain_vs_exact_pct": g.gain_vs_exact_pct.min(),
                    "max_gain_vs_fixed_pct": g.gain_pct.max(), "max_gain_vs_exact_pct": g.gain_vs_exact_pct.max(),
                    "cells_below_-0.3pct": int((g.gain_vs_exact_pct < -0.3).sum()), "cells": len(g),
                    "lowest_at": f"s = {worst['skew']:g}, {worst['replication']:g}x, B = {int(worst['B'])}"})
    return pd.DataFrame(out)


def activation_balancer_text(table: pd.DataFrame) -> str:
    """The sentence under :func:`activation_balancer_table`, written from it."""
    lo_f, lo_x = table.min_gain_vs_fixed_pct.min(), table.min_gain_vs_exact_pct.min()
    n_bad = int(table["cells_below_-0.3pct"].sum())
    worst = table.loc[table.min_gain_vs_exact_pct.idxmin()]
    return (f"Against the fixed policies TEMPO's lowest cell gain on this seed is {lo_f:.2f}%; with the exact "
            f"activation balancer added to them it is {lo_x:.2f}% ({worst['shape']}, {worst['lowest_at']}), and "
            f"{n_bad} of {int(table.cells.sum())} cells fall below the paper's -0.3% bound. The largest gains move "
            "with the stronger baseline too (" + ", ".join(f"{r['shape']} {r.max_gain_vs_fixed_pct:.2f}% -> "
                                                             f"{r.max_gain_vs_exact_pct:.2f}%" for _, r in table.iterrows())
            + "). "
            + ("The paper's bound therefore depends on which activation balancer it is read against: METRO's greedy "
               "(the baseline the paper names) or the exact one, which TEMPO's search does not always match." if n_bad else
               "The paper's bound holds against the exact balancer too."))
