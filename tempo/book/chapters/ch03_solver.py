"""Chapter 03, *The solver* (``notebooks/03_solver.md``): the experiment sizes per profile, the
stage trace of the toy batch, and the summaries of tempo against the MILP (Section 4.2), the
ablation of Table 2 and the drift-16 Tables 8 and 9, with the numbers the chapter's prose
quotes.  The experiments are :mod:`tempo.studies.solver`."""
from __future__ import annotations

import pandas as pd

from ...core.cost import CostModel
from ...core.instance import Instance
from ...paper import claims_file, tables
from ...paper.readings import Reading
from .common import sizes as _sizes

#: experiment sizes per profile: smoke is the minutes-long test build (gpu runs the full sizes)
SIZES = {"smoke": dict(phase=dict(eps=[8], skews=[0.0, 1.2], replications=[1.25], tokens=[32, 512]), batches=1,
                       milp_limit=2.0, scale=dict(eps=[16], skews=[1.2], replications=[1.25], tokens=[64]),
                       drift_batches=2, drift_B=[128, 512]),
         "full": dict(phase=dict(eps=[8], skews=[0.0, 0.3, 0.6, 0.9, 1.2, 1.5], replications=[1.25, 1.5],
                                 tokens=[16, 64, 256, 1024, 2048]),
                      batches=2, milp_limit=10.0,
                      scale=dict(eps=[8, 16, 32, 64], skews=[0.0, 1.2], replications=[1.25], tokens=[16, 64, 256, 1024]),
                      drift_batches=12, drift_B=[128, 512, 1024, 2048])}


def sizes(profile: str, reading=None) -> dict:
    """The chapter's experiment sizes for a book profile (:data:`SIZES`); outside the smoke
    build the ablation's batch seeds are the reading's (``random_maxima``: at least 8)."""
    out = _sizes(SIZES, profile)
    out["batch_seeds"] = [0] if profile == "smoke" else (reading if reading is not None else Reading.paper()).seeds()
    return out


def stage_trace(inst: Instance, model: CostModel, seeds=("whole", "greedy")) -> pd.DataFrame:
    """tempo_fast's makespan after each stage (seed, chains, local search, ensemble), one row
    per seed (Section 4.2)."""
    from ...policies import solve

    if not seeds:
        raise ValueError("seeds must name at least one seed ('whole', 'greedy')")
    return pd.DataFrame({s: solve(inst, model, "tempo", seed=s).meta["stages"] for s in seeds}).T.rename_axis("seed")


# ---------------------------------------------------------------------------- tempo against the MILP
def milp_summary(svm: pd.DataFrame, ours: str = "this artifact (phase grid)") -> pd.DataFrame:
    """tempo / MILP on the phase grid (mean, p95, max) beside the paper's real-trace numbers
    (Section 4.2, ``text_numbers.csv``), and how many batches the MILP proved optimal.
    ``ours`` names the column of this build's values (the batches' routing)."""
    rows = [{"quantity": f"tempo / MILP, {q}", "paper (real traces)": tables.text_number("solver", f"ratio_{k}"),
             ours: v}
            for q, k, v in [("mean", "mean", svm.ratio.mean()), ("p95", "p95", svm.ratio.quantile(0.95)),
                            ("max", "max", svm.ratio.max())]]
    rows.append({"quantity": "MILP proved optimal", "paper (real traces)": "",
                 ours: f"{int(svm.milp_optimal.sum())} / {len(svm)}"})
    rows.append({"quantity": "tempo / best bound, max (the ledger's solver_phase_grid_max)", "paper (real traces)": "",
                 ours: float(conservative_ratio(svm).max())})
    return pd.DataFrame(rows)


def conservative_ratio(svm: pd.DataFrame):
    """tempo against what the MILP proved, per batch: tempo / MILP where the MILP proved its
    optimum, tempo / the MILP's lower bound where it stopped at its time limit (the ledger's
    ``solver_phase_grid_max`` takes the largest).  Never below the incumbent ratio's meaning of
    "at most this far above the optimum"."""
    import numpy as np

    to_lb = svm.ratio_to_lb if "ratio_to_lb" in svm else svm.ratio   # a frame without the bound: the incumbent ratio
    return pd.Series(np.where(svm.milp_optimal, svm.ratio, to_lb), index=svm.index)


def milp_tables(svm_all: pd.DataFrame) -> list:
    """What the chapter shows of a ``solver_vs_milp`` result: :func:`milp_summary` of the
    synthetic grid and, when the build drew trace batches too (the paper's "real-trace grids"),
    the routing's label and the same summary of the trace rows."""
    from IPython.display import Markdown

    from ...studies import routing_label, routing_rows

    out = [milp_summary(routing_rows(svm_all, "synthetic"))]
    trace = routing_rows(svm_all, "trace")
    if len(trace):
        out += [Markdown(routing_label()), milp_summary(trace, ours="this artifact (the build's trace)")]
    return out


def milp_below_one(svm: pd.DataFrame, b: float) -> pd.DataFrame:
    """Batches with tempo / MILP below 0.999, split by whether the MILP reported optimal or
    stopped at its time limit, and the MILP's excess over tempo there in floors ``b``."""
    if b <= 0:
        raise ValueError(f"b must be a positive floor (us), got {b}")
    rows = []
    for proven in (True, False):
        grp = svm[svm.milp_optimal == proven]
        below = grp[grp.ratio < 0.999]
        rows.append({"MILP": "reported optimal" if proven else "stopped at its time limit", "batches": len(grp),
                     "ratio below 1": len(below),
                     "MILP minus tempo there, in floors b": sorted(set(((below.milp - below.tempo) / b).round(3)))})
    return pd.DataFrame(rows)


def solver_headlines(svm: pd.DataFrame) -> dict:
    """The numbers the chapter's prose quotes about tempo against the MILP."""
    below = svm.ratio < 0.999
    return {"batches": len(svm), "proven": int(svm.milp_optimal.sum()), "timed_out": int((~svm.milp_optimal).sum()),
            "below_one": int(below.sum()), "below_one_timed_out": int((below & ~svm.milp_optimal).sum()),
            "below_one_proven": int((below & svm.milp_optimal).sum()),
            "ratio_min": float(svm.ratio.min()), "ratio_max": float(svm.ratio.max()),
            "tempo_ms_median_large_b": float(svm[svm.tokens_per_gpu > 256].tempo_ms.median()),
            "milp_ms_median": float(1e3 * svm.milp_s.median()), "milp_ms_max": float(1e3 * svm.milp_s.max())}


def solver_glue(svm: pd.DataFrame, milp_limit: float) -> dict:
    """What the MILP section's prose glues: the MILP's time limit, :func:`solver_headlines` of
    ``svm``, the largest :func:`conservative_ratio`, and the paper's speed-up and two Table 8
    entries (paper keys)."""
    sh = solver_headlines(svm)
    return {"milp_limit": milp_limit, "svm_batches": sh["batches"], "svm_timed_out": sh["timed_out"],
            "svm_below": sh["below_one"], "svm_below_to": sh["below_one_timed_out"], "svm_proven": sh["proven"],
            "svm_bound_max": float(conservative_ratio(svm).max()),
            "svm_below_proven": sh["below_one_proven"], "svm_min": sh["ratio_min"], "svm_max": sh["ratio_max"],
            "milp_ms_median": sh["milp_ms_median"], "milp_ms_max": sh["milp_ms_max"],
            "p_speedup": "solver_speedup", "p_time_small_b": "solver_time_small_b", "p_t8_seed": "table8/seed only/B512", "p_t8_chains": "table8/+aug. chains/B512"}


def solver_words(svm: pd.DataFrame) -> dict:
    """The sentence on the ledger's scoring under the MILP's time limit, as the data allow it:
    ``{"svm_bound_words": str}``.  Written from :func:`solver_headlines` and the largest
    :func:`conservative_ratio`, compared at the 4 digits the page prints."""
    sh = solver_headlines(svm)
    bound, inc = float(conservative_ratio(svm).max()), sh["ratio_max"]
    stopped = f"{sh['timed_out']} batch{'' if sh['timed_out'] == 1 else 'es'}"
    if sh["timed_out"] == 0:
        text = (f"Here HiGHS reported every batch optimal, so the proven bound is the optimum itself: "
                f"the table's last row equals its incumbent max ({inc:.4f}).")
    elif round(bound, 4) > round(inc, 4):
        text = (f"Where HiGHS stopped at its limit ({stopped} here), its incumbent is only an upper "
                f"bound, so the ledger row below scores tempo against the MILP's proven lower bound there instead: "
                f"its maximum, {bound:.4f}, is the table's last row, and it exceeds the table's incumbent max "
                f"({inc:.4f}) only through those batches.")
    else:
        text = (f"Where HiGHS stopped at its limit ({stopped} here), its incumbent is only an upper "
                f"bound, so the ledger row below scores tempo against the MILP's proven lower bound there instead; "
                f"those batches do not set the worst ratio, so the table's last row equals its incumbent max "
                f"({inc:.4f}).")
    return {"svm_bound_words": text}


def runtime_summary(runtime: pd.DataFrame) -> pd.DataFrame:
    """tempo_fast's median solve time at B <= 256 and at B > 256, compiled and as Python
    (``solver_runtime``), CPU and wall clock, beside the paper's 1.9 ms (Section 4.2, pure
    Python at B <= 256)."""
    rows = []
    for rt, grp in runtime.groupby("runtime", sort=False):
        for label, sub in (("B <= 256", grp[grp.tokens_per_gpu <= 256]), ("B > 256", grp[grp.tokens_per_gpu > 256])):
            if len(sub):
                rows.append({"tempo_fast": {"python": "as Python (JIT disabled)", "compiled": "compiled (numba)"}.get(rt, rt),
                             "batches": label, "median CPU ms": sub.cpu_ms.median(), "median wall ms": sub.wall_ms.median(),
                             "paper ms": claims_file.claim_row("solver_time_small_b")["paper"]
                             if (rt == "python" and label == "B <= 256") else None})
    return pd.DataFrame(rows)


def solve_time_summary(svm: pd.DataFrame) -> pd.DataFrame:
    """tempo's median solve time at B > 256 beside the paper's LP-branch time (Section 4.2)."""
    return pd.DataFrame([{"quantity": "tempo median ms, B > 256",
                          "paper": f"about {tables.number('solver/lp_branch_ms')} (LP branch)",
                          "this artifact": solver_headlines(svm)["tempo_ms_median_large_b"]}])


# ---------------------------------------------------------------------------- the ablation (Table 2)
def ablation_table(abl: pd.DataFrame) -> pd.DataFrame:
    """Table 2 beside the paper's: per variant, mean / p95 / max degradation (%) and where the
    worst batch sits (EP, skew, B).  Over several batch seeds (``batch_seed``) the max is the
    median of the per-seed maxima, with the seeds' range beside it (the ``random_maxima``
    reading); mean and p95 are over every batch of every seed."""
    t2 = tables.table(2).set_index("variant")
    rows = []
    for v, grp in abl.groupby("variant", sort=False):
        worst = grp.loc[grp.degradation_pct.idxmax()]
        per = grp.groupby("batch_seed").degradation_pct.max() if "batch_seed" in grp else grp.degradation_pct.agg(["max"])
        rows.append({"variant": v, "mean % (paper)": t2.loc[v, "mean_pct"], "mean % (ours)": grp.degradation_pct.mean(),
                     "p95 % (paper)": t2.loc[v, "p95_pct"], "p95 % (ours)": grp.degradation_pct.quantile(0.95),
                     "max % (paper)": t2.loc[v, "max_pct"], "max % (ours)": float(per.median()),
                     "max %, lowest seed": float(per.min()), "max %, highest seed": float(per.max()), "seeds": len(per),
                     "paper's region": t2.loc[v, "max_region"],
                     "region of our max": f"EP{worst.ep}, s={worst['skew']}, B={worst.tokens_per_gpu}"})
    return pd.DataFrame(rows)


def ablation_glue(abl_whole: pd.DataFrame, abl_greedy: pd.DataFrame) -> tuple[dict, dict]:
    """What the ablation's prose glues, from the runs with the whole-expert and the greedy seed:
    (numbers for :func:`tempo.book.paper.glue`, region labels for
    :func:`tempo.book.paper.glue_text`)."""
    variants = ["no partial moves", "no aug. chains", "no ensemble"]
    whole = ablation_table(abl_whole).set_index("variant").reindex(variants)
    greedy = ablation_table(abl_greedy).set_index("variant").reindex(variants)
    numbers = {"p_partial_max": "t2_no_partial_max", "partial_max": whole.loc["no partial moves", "max % (ours)"],
               "partial_max_lo": whole.loc["no partial moves", "max %, lowest seed"],
               "partial_max_hi": whole.loc["no partial moves", "max %, highest seed"],
               "partial_max_greedy": greedy.loc["no partial moves", "max % (ours)"],
               "p_ensemble_max": "t2_no_ensemble_max", "ensemble_max": whole.loc["no ensemble", "max % (ours)"],
               "ensemble_max_lo": whole.loc["no ensemble", "max %, lowest seed"],
               "ensemble_max_hi": whole.loc["no ensemble", "max %, highest seed"],
               "p_chains_max": "t2_no_chains_max", "chains_max": whole.loc["no aug. chains", "max % (ours)"],
               "chains_max_lo": whole.loc["no aug. chains", "max %, lowest seed"],
               "chains_max_hi": whole.loc["no aug. chains", "max %, highest seed"],
               "abl_seeds": float(whole["seeds"].max())}
    texts = {"partial_where": whole.loc["no partial moves", "region of our max"],
             "p_partial_where": whole.loc["no partial moves", "paper's region"],
             "ensemble_where": whole.loc["no ensemble", "region of our max"],
             "p_ensemble_where": whole.loc["no ensemble", "paper's region"]}
    return numbers, texts


# ---------------------------------------------------------------------------- drift-16 (Tables 8, 9)
def _by_b(df: pd.DataFrame, row: str) -> pd.DataFrame:
    t = df.groupby([row, "B"]).ratio_to_static.median().unstack()
    return t.reindex([r for r in df[row].drop_duplicates() if r in t.index])   # the order the experiment ran them


def stage_table(st: pd.DataFrame) -> pd.DataFrame:
    """Table 8 from a drift16_stages result: median makespan / static per stage set (rows in
    build-up order) and B, plus the median solve time at the largest B."""
    t8 = _by_b(st, "stages")
    t8[f"solve ms (B={st.B.max()})"] = st[st.B == st.B.max()].groupby("stages").solve_ms.median()
    return t8


def term_table(tm: pd.DataFrame) -> pd.DataFrame:
    """Table 9 from a drift16_terms result: median makespan / static per objective and B."""
    return _by_b(tm, "objective")


def traffic_gap(tm: pd.DataFrame) -> pd.DataFrame:
    """What dropping the traffic term costs per B, in points of the static makespan."""
    t9 = term_table(tm)
    gap = 100 * (t9.loc["drop traffic (c2 gamma)"] - t9.loc["full 3-term (4)"])
    return gap.rename("dropping the traffic term costs (points of static)").to_frame().T


# ---------------------------------------------------------------------------- why Table 8's rows agree
def forced_table(forced: pd.DataFrame) -> pd.DataFrame:
    """Table 8's evidence from the ``drift16_forced`` result: per B, the batches, how many have
    every stage of Table 8 at the same makespan, and how many have it equal to the
    single-replica experts' forced time (:func:`tempo.studies.solver.forced_time`), which no
    stage can lower."""
    return forced.groupby("B").agg(**{"batches": ("batch", "size"),
                                      "every stage the same makespan": ("same_makespan", "sum"),
                                      "... equal to the single-replica experts' forced time": ("at_forced_time", "sum")})


def stages_glue(table: pd.DataFrame, forced: pd.DataFrame) -> tuple[dict, dict]:
    """What the passage under Table 8 glues, from :func:`stage_table` and :func:`forced_table`:
    ``(numbers, words)``.  numbers: the largest spread between the rows (points of static), the
    drift-16 batches and those where every stage ends at the forced time; words: ``st_rows``,
    whether the rows are identical."""
    cols = [c for c in table.columns if not str(c).startswith("solve ms")]
    spread = float((table[cols].max() - table[cols].min()).max())
    n, forced_n = int(forced["batches"].sum()), int(forced.iloc[:, -1].sum())
    numbers = {"st_spread": spread, "st_batches": n, "st_forced": forced_n, "st_free": n - forced_n}
    return numbers, {"st_rows": "identical" if spread <= 1e-9 else "not identical"}


# ---------------------------------------------------------------------------- the running example
def toy_stages(seeds=("whole", "greedy")) -> tuple[pd.DataFrame, dict]:
    """tempo_fast's stages on chapter 01's toy (:func:`.common.toy`) against its exact optimum:
    :func:`stage_trace` (one row per seed: the makespan after the seed, the chains, the local
    search with its partial migrations and the ensemble, us; columns labelled by
    :data:`TOY_STAGE_LABELS`) with the MILP's optimum as a last column. Returns ``(table, numbers)``; ``numbers`` holds ``toy_<seed>_<stage>`` for every
    stage that ran and ``toy_opt``, for the page's glue."""
    from ...policies import solve
    from .common import toy

    inst, model = toy()
    table = stage_trace(inst, model, seeds)
    table["exact optimum (MILP)"] = model.makespan(inst, solve(inst, model, "milp"))
    numbers = {f"toy_{s}_{stage}": float(v) for s, row in table.iterrows() for stage, v in row.items()
               if stage in ("seed", "chains", "local_search", "ensemble") and v == v}
    numbers["toy_opt"] = float(table["exact optimum (MILP)"].iloc[0])
    return table.rename(columns=TOY_STAGE_LABELS), numbers


#: the stage columns of :func:`toy_stages` as the page labels them (Section 4.2's stages)
TOY_STAGE_LABELS = {"seed": "1 seed", "chains": "2 chain moves", "local_search": "3 local search (partial moves)",
                    "ensemble": "4 ensemble", "ensemble_pruned": "ensemble pruned"}
