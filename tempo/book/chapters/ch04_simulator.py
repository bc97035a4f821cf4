"""Chapter 04, *The simulator*, in three lectures (``notebooks/04_1_routing.md``,
``04_2_phase_diagram.md``, ``04_3_placement.md``): the experiment sizes per
profile and the page's summaries of the simulator studies (Fig. 5, Table 1, the phase diagram
of Fig. 6 and its anatomy, Fig. 12, Tables 3, 4 and 10, Section 5.5, MoonEP, tile-aware prefill,
the trace replay), the routing statistics beside the paper's, and the numbers and the few
data-dependent words the lectures' prose glues (``*_glue``: the words around them live on the
pages).  The experiments are :mod:`tempo.studies.simulator` and
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
    (:func:`tempo.book.explorers.phase_explorer`), with the named routing profiles placed on it
    (:func:`.ch04_routing.profiles_on_phase_diagram`) as its routing presets."""
    from .. import explorers
    from ...studies.phase_grid import phase_grid_means
    from .ch04_routing import profiles_on_phase_diagram

    return explorers.phase_explorer(grid, profile, explorer_config(profile),
                                    profiles_on_phase_diagram(phase_grid_means(grid)))


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
    """In a trace-backed build (``trace_path`` given), the recording's label
    (:func:`tempo.studies.routing_label`) to show at the top of a lecture; nothing otherwise.
    A list of things to display."""
    from IPython.display import Markdown

    from ...studies import routing_label

    return [Markdown(routing_label())] if trace_path else []


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


def routing_glue(rstats: pd.DataFrame) -> tuple[dict, dict]:
    """What the passage under the routing table glues (``routing_stats``): ``(numbers, words)``.
    numbers: Zipf(1.0)'s hottest expert's pair share and router weight, its load over the mean
    expert's, the bottleneck GPU over the mean GPU (fresh and drift-16 placement), the drift-16
    timeline's lag-1 correlations (loads, and deviations from the mean), the proxy workload's
    load over the mean; words: the paper's values as it prints them (``routing_stats.csv``)."""
    from ...world.workloads import zipf_popularity

    rs, pr = rstats.set_index("stat"), paper_routing_stats()
    numbers = {"rt_hot_share": rs.loc["hottest_share", "zipf1.0_iid"], "rt_hot_weight": zipf_popularity(256, 1.0).max(),
               "rt_mm": rs.loc["max_over_mean", "zipf1.0_iid"], "rt_mm_proxy": rs.loc["max_over_mean", "proxy_iid"],
               "rt_gpu_fresh": rs.loc["gpu_max_over_mean", "zipf1.0_iid"],
               "rt_gpu_drift": rs.loc["gpu_max_over_mean", "drift16_timeline"],
               "rt_lag": rs.loc["lag_corr", "drift16_timeline"], "rt_lag_dev": rs.loc["lag_corr_dev", "drift16_timeline"]}
    words = {"rt_paper_mm": str(pr.loc["max_over_mean", "paper"]), "rt_paper_gpu": str(pr.loc["gpu_max_over_mean", "paper"])}
    return {k: float(v) for k, v in numbers.items()}, words


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


def mixed_glue(mixed: pd.DataFrame) -> tuple[dict, dict]:
    """What the passage under Fig. 5 glues (the synthetic ``mixed_regime`` rows): ``(numbers,
    words)``.  numbers: the split at B = 512 (% of activated experts flat, % of tokens linear;
    NaN when the ladder has no 512); words: where the batches are all mixed ("at every batch
    size of the ladder", or the sizes where they are not and their share)."""
    fig5 = mixed_summary(mixed)
    never = fig5.index[fig5.mixed_pct < 100].tolist()
    where = ("at every batch size of the ladder" if not never else
             "at every size except " + ", ".join(f"B = {B} ({fig5.mixed_pct[B]:.0f}% of its batches)" for B in never))
    at = fig5.loc[512] if 512 in fig5.index else pd.Series({"flat_experts_pct": np.nan, "linear_tokens_pct": np.nan})
    return ({"mixed_flat_b512": float(at.flat_experts_pct), "mixed_linear_b512": float(at.linear_tokens_pct)},
            {"mixed_where": where})


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


def scale_glue(scale: pd.DataFrame) -> tuple[dict, dict]:
    """What the reading of Fig. 12 glues, from the seed-mean scale grid (:func:`seed_mean` of the
    ``phase_diagram`` result with ``comm_kr``): ``(numbers, words)``.  numbers: the mean gain
    over the batch ladder at s = 1.2 and at s = 0 (lowest and highest over the EP sizes), the
    largest cell gain, and the largest change of a mean gain when the all-to-all is priced
    (points); words: where the largest gain sits (skew, EP, B)."""
    g = scale_gains(scale)
    top = scale.loc[scale.gain_pct.idxmax()]
    numbers = {"sc_max": top.gain_pct, "sc_comm": (g.mean_gain_comm - g.mean_gain).abs().max()}
    for s, k in ((1.2, "s12"), (0.0, "s0")):
        if s in g.index.get_level_values("skew"):
            m = g.xs(s, level="skew").mean_gain
            numbers.update({f"sc_{k}_lo": m.min(), f"sc_{k}_hi": m.max()})
    words = {"sc_max_at": f"s = {top['skew']:g}, EP{int(top['ep'])}, B = {int(top['B'])}"}
    return {k: float(v) for k, v in numbers.items()}, words


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


def _cell_label(row) -> str:
    """A phase cell's keys in one short label: ``"DSv3 s=1.2 1.25x B=128"``."""
    return f"{row['shape']} s={row['skew']:g} {row['replication']:g}x B={int(row['B'])}"


def anatomy_gains_view(why: pd.DataFrame) -> pd.DataFrame:
    """:func:`anatomy_gains` for the page: one row per (cell, placement) indexed by the cell's
    label and the placement, headers with spaces so a narrow column wraps them, gains to 0.01."""
    t = why.assign(cell=why.apply(_cell_label, axis=1)).set_index(["cell", "placement"])
    t = t[["best_fixed", "gain_pct", "best_with_vertex", "gain_vs_vertex_pct", "tempo_over_lb", "paper_preset_gain_pct"]]
    t.columns = ["best fixed", "gain %", "best with vertex", "gain over it %", "TEMPO / lower bound",
                 "paper preset gain %"]
    return t.round(2)


def anatomy_table(anat: pd.DataFrame) -> pd.DataFrame:
    """The ``phase_anatomy`` rows under the phase diagram's own placement (long-run loads): per
    cell (its label) and dispatch, the makespan (us), the busiest GPU's activated slots (G) and
    tokens (N), and the cell's lower bound (us), measures to 0.1."""
    t = anat[anat.placement == "long-run loads"]
    t = t.assign(cell=t.apply(_cell_label, axis=1)).set_index(["cell", "policy"])
    t = t[["makespan_us", "max_G", "max_N", "lower_bound_us"]].round(1)
    t.columns = ["makespan us", "busiest G", "busiest N", "lower bound us"]
    return t


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
    per (skew, replication) column), without the seed, shape and EP columns, its measures
    rounded to 0.1 (the column's skew and replication whole: 1.25x stays 1.25x)."""
    t = first_seed(bounds).drop(columns=["seed", "shape", "ep"]).reset_index(drop=True)
    return t.round({c: 1 for c in t.select_dtypes("float").columns if c not in ("skew", "replication")})


def boundary_glue(bt: pd.DataFrame) -> tuple[dict, dict]:
    """What the passage under the flip-boundary table glues (:func:`boundary_columns`):
    ``(numbers, words)``.  numbers: the columns where the analytic B* lands in the observed band,
    and the columns; words: each miss (skew, replication, B* against the band, the mechanism),
    or "none"."""
    miss = bt[~bt.hit]
    desc = "; ".join(f"s = {r.skew:g}, {r.replication:g}x: B* = {r.B_star:.0f} against the band [{r.band_lo:.0f}, "
                     f"{r.band_hi:.0f}] ({'above' if r.B_star > r.band_hi else 'below'}, {r.mechanism} mechanism)"
                     for r in miss.itertuples())
    return {"bd_hits": float(bt.hit.sum()), "bd_columns": float(len(bt))}, {"bd_misses": desc or "none"}


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


def tight_glue(land: pd.DataFrame) -> dict:
    """What the sentence on the tight redundancy R = 16 glues (``policy_landscape``): words
    ``tight_span``, the span of its kernels' medians and whether they collapse to static, or
    that this profile does not run R = 16."""
    tight = land[land.redundant == 16].groupby(["drift", "policy"]).ratio_to_static.median()
    if tight.empty:
        return {"tight_span": "are not computed in this profile (it runs R = 64 only)"}
    verdict = "so they do not collapse" if (tight - 1).abs().max() > 0.005 else "a collapse as well"
    return {"tight_span": f"span {tight.min():.3f} to {tight.max():.3f}, {verdict}"}


# ---------------------------------------------------------------------------- staleness (Section 5.5)
def staleness_table(stale: pd.DataFrame) -> pd.DataFrame:
    """Section 5.5: median makespan / static per scale (rows) and information regime."""
    return stale.groupby(["scale", "regime"]).ratio_to_static.median().unstack()[["exact", "stale-1", "frozen", "uniform"]]


def staleness_glue(st: pd.DataFrame) -> tuple[dict, dict]:
    """What the passage under the staleness table glues (:func:`staleness_table`, ``st``):
    ``(numbers, words)``.  numbers: each regime's median ratio to static at 1x; words: the regimes
    worse than static (or "none"), whether exact solving is the best, and how much of the exact
    gain a one-batch-old table keeps ("none", "only part", "all")."""
    r = st.loc["1x"]
    keeps = ("none" if r["stale-1"] >= 1 - 1e-9 else "all" if r["stale-1"] <= r["exact"] + 1e-9 else "only part")
    return ({f"st_{k.replace('-', '')}": float(r[k]) for k in ("exact", "stale-1", "frozen", "uniform")},
            {"st_worse": ", ".join(r.index[r > 1 + 1e-9]) or "none",
             "st_exact_best": "the best" if r.idxmin() == "exact" else "not the best", "st_keeps": keeps})


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


def faster_eplb_glue(t10: pd.DataFrame) -> tuple[dict, dict]:
    """What the passage under Table 10 glues: ``(numbers, words)``.  numbers: the rows the paper
    reads (medians, ours ``t10_<row>_<B>`` and the paper's ``t10p_<row>_<B>``); words: whether a
    cum16 refresh makes the uniform split at B = 128 worse, no better or better here."""
    o, p10 = faster_eplb_table(t10), tables.table(10).set_index("policy")
    rows = {"uni": "uni, never refresh", "uni16": "uni + cum16 refresh", "tempo": "TEMPO, never refresh",
            "tempow4": "TEMPO + W4 refresh", "static16": "static + cum16 refresh"}
    numbers = {}
    for k, row in rows.items():
        for B in (128, 512):
            numbers[f"t10_{k}_{B}"] = float(o.loc[row, f"B{B}_median"])
            numbers[f"t10p_{k}_{B}"] = float(p10.loc[row, f"B{B}_median"])
    uni, uni16 = numbers["t10_uni_128"], numbers["t10_uni16_128"]
    verdict = "worse" if uni16 > uni + 0.005 else "no better" if uni16 > uni - 0.005 else "better"
    return numbers, {"t10_verdict": verdict}


# ---------------------------------------------------------------------------- MoonEP (Appendix H)
def moonep_table(moon: pd.DataFrame) -> pd.DataFrame:
    """Appendix H, this artifact: median change of block makespan (%) per (baseline, tokens per
    GPU) and policy (the ``moonep_replay`` result)."""
    mt = moon.groupby(["baseline", "tokens_per_gpu", "policy"]).change_pct.median().unstack("policy")
    return mt[["moonep_free", "moonep_charged", "token_lp", "tempo"]]


def moonep_glue(mt: pd.DataFrame) -> tuple[dict, dict]:
    """What the passage under the MoonEP table glues (:func:`moonep_table`): ``(numbers,
    words)``.  numbers: at decode (B <= 64, against static) the gains of free prefetch and of
    TEMPO (%, lowest and highest) and charged prefetch's slowdown (%); words: the paper's charged
    range as printed, and the prefill (B >= 512) changes of free MoonEP and token-LP."""
    dec = mt.loc["static"].loc[lambda d: d.index <= 64]
    pre = mt.loc["static"].loc[lambda d: d.index >= 512]
    numbers = {"moon_free_lo": -dec.moonep_free.max(), "moon_free_hi": -dec.moonep_free.min(),
               "moon_tempo_lo": -dec.tempo.max(), "moon_tempo_hi": -dec.tempo.min(),
               "moon_charged_lo": dec.moonep_charged.min(), "moon_charged_hi": dec.moonep_charged.max()}
    words = {"moon_paper_charged": " to ".join(f"+{v:g}" for v in claims_file.claim_row("moonep_charged_decode")["paper"]),
             "moon_pre_free": ", ".join(f"{v:.1f}" for v in pre.moonep_free),
             "moon_pre_lp": ", ".join(f"{v:.1f}" for v in pre.token_lp)}
    return {k: float(v) for k, v in numbers.items()}, words


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


def trace_source_glue(tr_cfg: dict) -> dict:
    """Words for the line above the oracle-gap table: which layers of the replayed trace
    (``tr_layers``: "its first n layers" for the shipped public trace, else "every layer")."""
    return {"tr_layers": f"its first {tr_cfg['max_layers']} layers" if tr_cfg.get("max_layers") else "every layer"}


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


#: the candidates of :func:`scale_s0_table` the page names, by their glue names
S0_NAMED = {"built": "as built", "index": "EPLB ties in index order", "preset": "TEMPO's paper preset (Section 4.2)",
            "reading": "the paper's reading (independent draws, paper preset)"}


def scale_s0_glue(table: pd.DataFrame, paper_lo: float) -> tuple[dict, dict]:
    """What the passage under :func:`scale_s0_table` glues: ``(numbers, words)``.  numbers: the
    lowest and highest mean gain over the EP sizes of the candidates of :data:`S0_NAMED`
    (``s0_<name>_lo`` / ``_hi``) and, as built, the replicated experts and those whose every
    replica sits on one GPU on the largest EP size; words: the candidates whose mean gain stays
    within one point of zero on every EP size (the ledger's "no gain") and those that reach
    ``paper_lo`` (%) on every EP size, each "none" when empty."""
    m = table.groupby("candidate", sort=False).mean_gain_pct.agg(["min", "max"])
    numbers = {}
    for k, c in S0_NAMED.items():
        if c in m.index:
            numbers[f"s0_{k}_lo"], numbers[f"s0_{k}_hi"] = float(m.loc[c, "min"]), float(m.loc[c, "max"])
    big = table[(table.candidate == S0_NAMED["built"]) & (table.ep == table.ep.max())].iloc[0]
    numbers.update(s0_built_rep=float(big.replicated), s0_built_col=float(big.colocated), s0_ep_hi=float(big.ep))
    near_zero = [c for c, r in m.iterrows() if r["min"] > -1 and r["max"] < 1]
    reach = [c for c, r in m.iterrows() if r["min"] >= paper_lo]
    return numbers, {"s0_zero": ", ".join(near_zero) or "none", "s0_reach": ", ".join(reach) or "none"}


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


def activation_balancer_view(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`activation_balancer_table` for the page: indexed by shape, headers with spaces so a
    narrow column wraps them, gains to 0.001."""
    t = table.set_index("shape")
    t = t[["min_gain_vs_fixed_pct", "min_gain_vs_exact_pct", "max_gain_vs_fixed_pct", "max_gain_vs_exact_pct",
           "cells_below_-0.3pct", "cells", "lowest_at"]]
    t.columns = ["lowest gain vs fixed %", "lowest vs exact %", "highest vs fixed %", "highest vs exact %",
                 "cells below -0.3% vs exact", "cells", "lowest vs exact at"]
    return t.round(3)


def activation_balancer_glue(table: pd.DataFrame) -> tuple[dict, dict]:
    """What the passage under :func:`activation_balancer_table` glues: ``(numbers, words)``.
    numbers: TEMPO's lowest cell gain against the fixed policies and against those and the exact
    balancer, the cells below the paper's -0.3% and the cells; words: where the lowest sits,
    each shape's largest gain against both baselines, and whether the paper's bound holds
    against the exact balancer too."""
    n_bad = int(table["cells_below_-0.3pct"].sum())
    worst = table.loc[table.min_gain_vs_exact_pct.idxmin()]
    numbers = {"ab_lo_fixed": table.min_gain_vs_fixed_pct.min(), "ab_lo_exact": table.min_gain_vs_exact_pct.min(),
               "ab_below": n_bad, "ab_cells": int(table.cells.sum())}
    words = {"ab_where": f"{worst['shape']}, {worst['lowest_at']}",
             "ab_max": ", ".join(f"{r['shape']} {r.max_gain_vs_fixed_pct:.2f}% -> {r.max_gain_vs_exact_pct:.2f}%"
                                 for _, r in table.iterrows()),
             "ab_bound": ("depends on which activation balancer it is read against: TEMPO's search does not always "
                          "match the exact one" if n_bad else "holds against the exact balancer too")}
    return {k: float(v) for k, v in numbers.items()}, words


