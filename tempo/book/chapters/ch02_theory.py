"""Chapter 02, *Theory* (``notebooks/02_theory.md``): the experiment sizes per profile and the
summaries of the Theorem 1 reduction, Lemmas 1 and 2, the Theorem 2 probe and the certificate
epsilon (paper Section 3, Appendix A), with the numbers the chapter's prose quotes.  The bounds
and constructions themselves are :mod:`tempo.theory.bounds`."""
from __future__ import annotations

import pandas as pd

from ...core.cost import CostModel
from ...core.instance import Instance
from ...paper import tables
from ...theory.bounds import probe_instance, round_robin_epsilon
from .common import sizes as _sizes

#: experiment sizes per profile: smoke is the minutes-long test build (gpu runs the full sizes)
SIZES = {"smoke": dict(sizes=[4, 6], reps=2, lemma_n=6, probe_n=24, probe_max_e=64, probe_gpus=8, eps_batches=3),
         "full": dict(sizes=[4, 6, 8, 10, 12], reps=6, lemma_n=40, probe_n=1296, probe_max_e=512, probe_gpus=16,
                      eps_batches=20)}


def sizes(profile: str) -> dict:
    """The chapter's experiment sizes for a book profile (:data:`SIZES`)."""
    return _sizes(SIZES, profile)


# ---------------------------------------------------------------------------- Theorem 1, Lemmas 1-2
def thm1_summary(thm1: pd.DataFrame) -> pd.DataFrame:
    """Theorem 1 per (m, has a partition): instances, share reaching T, share proven optimal, and
    the most experts split by a dispatch that reaches T (0 when none reaches it)."""
    g = thm1.groupby(["m", "solvable"])
    out = g.agg(instances=("seed", "size"), reach_T=("reaches_T", "mean"), optimal=("proven_optimal", "mean"))
    out["max_split_when_T"] = thm1[thm1.reaches_T].groupby(["m", "solvable"]).split_experts.max()
    return out.fillna({"max_split_when_T": 0}).astype({"max_split_when_T": int})


def thm1_check(thm1: pd.DataFrame) -> pd.DataFrame:
    """One row: does the reduction hold on every instance (the MILP, proven optimal, reaches T
    exactly when a partition exists, splitting no expert), and how far above T the best
    makespan lies (%) where no partition exists."""
    holds = bool(((thm1.reaches_T == thm1.solvable) & thm1.proven_optimal).all()
                 and (thm1[thm1.reaches_T].split_experts == 0).all())
    no = thm1[~thm1.solvable]
    above = 100 * (no.milp_makespan / no["T"] - 1)
    return pd.DataFrame([{"reduction holds on every instance": holds, "instances": len(thm1),
                          "no partition: best makespan above T, min %": above.min(), "max %": above.max()}])


def lemma_summary(lem: pd.DataFrame) -> pd.DataFrame:
    """Lemmas 1 and 2: per lemma, instances, share the MILP proved, and the polynomial
    algorithm's and tempo's ratios to the MILP."""
    tab = lem.groupby("lemma").agg(instances=("instance", "size"), milp_proven=("optimal", "mean"),
                                   poly_over_milp_min=("poly_over_milp", "min"),
                                   poly_over_milp_max=("poly_over_milp", "max"),
                                   tempo_over_milp_max=("tempo_over_milp", "max"))
    return tab.rename(columns={"milp_proven": "MILP proven", "poly_over_milp_min": "poly / MILP min",
                               "poly_over_milp_max": "poly / MILP max", "tempo_over_milp_max": "tempo / MILP max"})


# ---------------------------------------------------------------------------- Theorem 2 probe
def thm2_headlines(probe: pd.DataFrame) -> dict:
    """The numbers of the Theorem 2 probe the chapter quotes: worst ratios with OPT at its best
    known value (``*_lo`` / ``*_min`` columns) and at its lower bound, and the worst tempo / OPT
    on the instances whose OPT the MILP pinned (with that instance's index ``i``)."""
    pinned = probe[probe.opt_from == "milp"]
    r = pinned.tempo / pinned.opt_hi
    return {"worst_ratio_to_bound": float(probe.rr_over_bound_lo.max()),
            "worst_ratio_to_bound_lb": float(probe.rr_over_bound_hi.max()),
            "rr_over_opt_max": float(probe.rr_over_opt_min.max()),
            "rr_over_opt_max_lb": float(probe.rr_over_opt_max.max()),
            "tempo_worst_vs_opt": float((probe.tempo / probe.opt_hi).max()),
            "tempo_worst_vs_opt_lb": float(probe.tempo_over_opt_max.max()),
            "tempo_worst_pinned": float(r.max()) if len(r) else float("nan"),
            "tempo_worst_pinned_i": int(pinned.loc[r.idxmax(), "i"]) if len(r) else -1,
            "instances": int(len(probe)), "pinned": int(len(pinned)),
            "max_gpus": int(probe.n_gpus.max())}


def thm2_summary(probe: pd.DataFrame) -> pd.DataFrame:
    """Theorem 2's three worst ratios beside the paper's (``text_numbers.csv``), OPT taken at its
    best known value and at its lower bound."""
    h = thm2_headlines(probe)
    rows = [("worst M(A3) / (OPT + term)", "worst_ratio_to_bound"), ("worst M(A3) / OPT (giants)", "rr_over_opt_max"),
            ("worst tempo / OPT", "tempo_worst_vs_opt")]
    return pd.DataFrame([{"quantity": q, "paper": tables.text_number("theorem2", k),
                          "this artifact (OPT = best known)": h[k], "this artifact (OPT = lower bound)": h[k + "_lb"]}
                         for q, k in rows])


def probe_glue(probe: pd.DataFrame) -> dict:
    """What the Theorem 2 section's prose glues: the paper's giants ratio and worst tempo / OPT
    (paper keys), and this build's (:func:`thm2_headlines`) with the probe's size."""
    h = thm2_headlines(probe)
    return {"p_giants": "theorem2/rr_over_opt_max", "giants": h["rr_over_opt_max"], "max_gpus": h["max_gpus"],
            "p_tempo_opt": "tempo_worst_vs_opt", "tempo_opt": h["tempo_worst_pinned"], "pinned": h["pinned"],
            "instances": h["instances"]}


def _select(df: pd.DataFrame, columns: dict) -> pd.DataFrame:
    """``df[list(columns)]`` renamed by ``columns``, index reset."""
    return df[list(columns)].rename(columns=columns).reset_index(drop=True)


def probe_worst_by_kind(probe: pd.DataFrame) -> pd.DataFrame:
    """The probe instance with the largest M(A3) / OPT (best known) of each construction, with
    the largest expert's share of all tokens (``n_max`` column of the thm2_probe result)."""
    w = probe.loc[probe.groupby("kind").rr_over_opt_min.idxmax()]
    return _select(w.assign(share=w.n_max / w.tokens),
                   {"kind": "kind", "params": "params", "experts": "experts", "n_gpus": "P", "tokens": "tokens",
                    "share": "largest expert / all tokens", "rr_over_opt_min": "M(A3) / OPT",
                    "rr_over_bound_lo": "M(A3) / (OPT + term)"})


#: the row of :func:`tempo_worst_case` that re-runs tempo as the probe ran it
PROBE_ROW = "tempo as the probe ran it"


def tempo_worst_case(probe: pd.DataFrame, n: int, max_experts: int, max_gpus: int, seed: int = 0,
                     reading=None) -> pd.DataFrame:
    """The probe instance where tempo is furthest above the MILP-pinned OPT, re-solved with
    tempo as the probe ran it (``reading``'s preset, the paper's reading when None: the row that
    reproduces the probe's ratio), with the library's default and with the default's options
    and the paper's whole-expert seed: the ratio to OPT and the most activated experts on one
    GPU for each, and for OPT's dispatch.  One row per dispatch."""
    from ...paper.readings import Reading
    from ...policies import solve
    from ...studies.readings import tempo_options

    i = thm2_headlines(probe)["tempo_worst_pinned_i"]
    if i < 0:
        raise ValueError("probe has no MILP-pinned instance")
    kind, pname, inst, model = probe_instance(i, n, seed=seed, max_experts=max_experts, max_gpus=max_gpus)
    opt = solve(inst, model, "milp", time_limit=10.0)
    as_run = tempo_options(reading if reading is not None else Reading.paper())
    rows = []
    for label, d in [(f"{PROBE_ROW} (options={as_run['options']!r})", solve(inst, model, "tempo", **as_run)),
                     ("tempo, default seed", solve(inst, model, "tempo")),
                     ("tempo, whole-expert seed", solve(inst, model, "tempo", seed="whole")), ("MILP (OPT)", opt)]:
        G, N, _ = model.gpu_features(inst, d)
        rows.append({"instance": f"#{i}: {kind}, {pname}, E={inst.n_experts}, P={inst.n_gpus}", "dispatch": label,
                     "makespan (us)": model.makespan(inst, d), "/ OPT": model.makespan(inst, d) / opt.meta["objective"],
                     "most activations on a GPU": int(G.max()), "most tokens on a GPU": float(N.max()),
                     "b (us)": model.b, "b / makespan %": 100 * model.b / model.makespan(inst, d)})
    return pd.DataFrame(rows)


def worst_case_glue(worst_case: pd.DataFrame, same: float = 1e-9) -> tuple[dict, dict]:
    """What the prose glues about :func:`tempo_worst_case`'s instance: ``(numbers, words)``.
    numbers: tempo's ratio to OPT as the probe ran it (NaN without that row) and with each seed
    of the default, the most activations on a GPU for tempo and for OPT, the floor b, OPT's
    makespan and b's share of it; words: ``wc_gap``, where the gap to OPT comes from."""
    wc = worst_case.set_index("dispatch")
    probe_row = next((r for r in wc.index if r.startswith(PROBE_ROW)), None)
    numbers = {"wc_probe": wc.loc[probe_row, "/ OPT"] if probe_row else float("nan"),
               "wc_g_probe": wc.loc[probe_row, "most activations on a GPU"] if probe_row else float("nan"),
               "wc_default": wc.loc["tempo, default seed", "/ OPT"], "wc_whole": wc.loc["tempo, whole-expert seed", "/ OPT"],
               "wc_g_default": wc.loc["tempo, default seed", "most activations on a GPU"],
               "wc_g_opt": wc.loc["MILP (OPT)", "most activations on a GPU"], "wc_b": wc["b (us)"].iloc[0],
               "wc_opt": wc.loc["MILP (OPT)", "makespan (us)"], "wc_b_share": wc.loc["MILP (OPT)", "b / makespan %"]}
    p, d, w = numbers["wc_probe"], numbers["wc_default"], numbers["wc_whole"]
    if p == p and p > 1 + same and d <= 1 + same:
        gap = "the preset the probe ran"
    elif d <= 1 + same and w <= 1 + same:
        gap = "none: either seed reaches OPT"
    elif d > w * (1 + same):
        # the default's seed: one floor more on the busiest GPU, or a worse local optimum
        gap = "the default's seed" + (" (one floor more)" if numbers["wc_g_default"] > numbers["wc_g_opt"] else "")
    elif abs(d - w) <= same * max(d, w):
        gap = "the later stages (both seeds end alike)"
    else:
        gap = "the whole-expert seed (the default does better)"
    return numbers, {"wc_gap": gap}


# ---------------------------------------------------------------------------- the certificate epsilon
def epsilon_summary(eps: pd.DataFrame) -> pd.DataFrame:
    """The certificate's distribution per token scale (the thm2_epsilon result), in %; per
    routing (synthetic, trace) and scale when the result has both."""
    by = ["routing", "scale"] if "routing" in eps else "scale"
    d = eps.groupby(by).eps.describe(percentiles=[0.5, 0.95])[["count", "50%", "95%", "max"]]
    d[["50%", "95%", "max"]] *= 100
    return d.rename(columns={"50%": "median %", "95%": "p95 %", "max": "max %"})


def epsilon_glue(eps: pd.DataFrame) -> dict:
    """What the certificate's prose glues: the paper's median, max and 4x max (claim ids) and
    this build's median at 1x and 4x scale (:func:`epsilon_summary`) on synthetic routing
    (``eps_med``, ``eps_med_4x``) and on the trace when the result has one (``eps_med_trace``,
    ``eps_max_trace``; NaN without)."""
    from ...studies import routing_rows

    syn = epsilon_summary(routing_rows(eps, "synthetic"))
    tr = epsilon_summary(routing_rows(eps, "trace")) if "routing" in eps else None
    return {"p_eps_med": "thm2_eps_median", "p_eps_max": "thm2_eps_max", "p_eps_4x": "thm2_eps_max_4x",
            "eps_med": syn.loc[1, "median %"], "eps_med_4x": syn.loc[4, "median %"],
            "eps_med_trace": tr.loc[1, "median %"] if tr is not None else float("nan"),
            "eps_max_trace": tr.loc[1, "max %"] if tr is not None else float("nan")}


def epsilon_evidence(tokens=(32, 64, 128, 256), params: str = "dsv3-offline", skew: float = 1.2,
                     n_experts: int = 256, top_k: int = 8, n_gpus: int = 8) -> pd.DataFrame:
    """Why the certificate is what it is: one Zipf decode batch per size (the thm2_epsilon
    generator, seed = B), its hottest expert's share of all pairs beside the top-k cap 1/k,
    beta * n_max against the lower bound, and eps (%)."""
    from ...studies.scenarios import zipf_batches

    model = CostModel.named(params)
    rows = []
    for B in tokens:
        inst = Instance.full_replication(zipf_batches(n_experts, n_gpus, B, skew, 1.25, 1, seed=B, top_k=top_k)[0].counts, n_gpus)
        n_max = float(inst.counts.max())
        rows.append({"tokens per GPU B": B, "hottest expert / all pairs": n_max / inst.total_tokens,
                     "top-k cap": 1 / top_k, "beta n_max (us)": model.beta * n_max, "LB (us)": model.lower_bound(inst),
                     "epsilon %": 100 * round_robin_epsilon(inst, model)})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------- the running example
def toy_bounds() -> tuple[pd.DataFrame, dict]:
    """Chapter 01's toy (:func:`.common.toy`) as an instance of Eq. 3: the token LP's optimum
    (tokens on the fuller GPU, Lemma 1) and its Eq. 1 makespan, the lower bound LB, the exact
    optimum (MILP), round-robin (Theorem 2's A3) and Theorem 2's bound OPT + max(b, beta n_max).
    Returns ``(table, numbers)``: one row per quantity (value, unit), and the same values keyed
    ``toy_*`` for the page's glue."""
    from ...policies import solve
    from ...theory.bounds import additive_term, round_robin_bound
    from .common import toy

    inst, model = toy()
    lp = solve(inst, model, "token_lp")
    opt = model.makespan(inst, solve(inst, model, "milp"))
    n = {"toy_lp_tokens": float(model.gpu_features(inst, lp)[1].max()),
         "toy_lp_us": model.makespan(inst, lp), "toy_lb_us": model.lower_bound(inst), "toy_opt_us": opt,
         "toy_rr_us": model.makespan(inst, solve(inst, model, "round_robin")),
         "toy_term_us": additive_term(model, float(inst.counts.max())), "toy_bound_us": round_robin_bound(inst, model, opt)}
    rows = [("token LP optimum: tokens on the fuller GPU (Lemma 1)", n["toy_lp_tokens"], "tokens"),
            ("that split's makespan under Eq. 1", n["toy_lp_us"], "us"),
            ("lower bound LB", n["toy_lb_us"], "us"),
            ("optimum OPT (MILP)", n["toy_opt_us"], "us"),
            ("round-robin A3", n["toy_rr_us"], "us"),
            ("additive term max(b, beta n_max)", n["toy_term_us"], "us"),
            ("Theorem 2's bound OPT + term", n["toy_bound_us"], "us")]
    return pd.DataFrame(rows, columns=["quantity", "value", "unit"]), n
