"""The studies behind chapter 04's last two tables: Fig. 12's candidates at s = 0
(tempo.studies.scale_s0: why the scale study finds no gain there, and what one change gives)
and the phase grid against the exact activation balancer (tempo.studies.simulator)."""
import numpy as np
import pandas as pd
import pytest

from tempo.book.chapters import ch04_simulator as ch04
from tempo.paper.readings import Reading
from tempo.studies import registry
from tempo.studies import scale_s0 as s0
from tempo.world.workloads import sample_counts, zipf_popularity

CANDS = {c["candidate"]: c for c in s0.S0_CANDIDATES}


def test_colocated_replicas_known_answer():
    # 4 GPUs x 2 slots: expert 0 twice on GPU 0 (co-located), expert 1 on GPUs 1 and 2
    assert s0.colocated_replicas(np.array([0, 0, 1, 2, 3, 1, 4, 5]), 4) == (2, 1)
    assert s0.colocated_replicas(np.array([0, 1, 2, 3]), 2) == (0, 0)


@pytest.mark.parametrize("ep", [8, 32, 64])
def test_uniform_eplb_in_index_order_colocates_every_replica_and_unordered_ties_spread_them(ep):
    pop = zipf_popularity(256, 0.0, seed=1)
    stable = s0.s0_placement(pop, 8, ep, CANDS["EPLB ties in index order"], seed=1)
    assert s0.colocated_replicas(stable, ep) == (64, 64)
    built = s0.s0_placement(pop, 8, ep, CANDS["as built"], seed=1)
    n_rep, n_col = s0.colocated_replicas(built, ep)
    assert n_rep == 64 and n_col <= {8: 16, 32: 4, 64: 2}[ep]  # eplb.py under torch 2.13: 16, 1, 1
    broken = s0.s0_placement(pop, 8, ep, CANDS["EPLB ties broken"], seed=1)
    assert s0.colocated_replicas(broken, ep) == (64, 0)
    measured = s0.s0_placement(pop, 8, ep, CANDS["EPLB from 64 measured batches"], seed=1)
    assert s0.colocated_replicas(measured, ep)[1] == 0  # counted loads: no replicas stacked
    # at s = 0 both routers' long-run pair loads are uniform: the same placement
    indep = s0.s0_placement(pop, 8, ep, CANDS["independent draws (Section 3.2)"], seed=1)
    assert (indep == built).all()


def test_placement_and_candidates_are_checked():
    pop = zipf_popularity(256, 0.0, seed=1)
    with pytest.raises(ValueError, match="placement"):
        s0.s0_placement(pop, 8, 32, {**CANDS["as built"], "placement": "oracle"}, seed=1)
    with pytest.raises(ValueError, match="candidates"):
        s0.scale_s0_candidates({"tokens": [16], "batches": 1, "candidates": ["nope"]})


def test_the_measured_placement_counts_the_candidates_own_routing():
    # "history": EPLB on the pairs of 64 batches drawn by the library's router of the candidate
    pop = zipf_popularity(256, 0.0, seed=1)
    cand = CANDS["measured EPLB + independent draws"]
    from tempo.world.placement import eplb_placement

    w = sample_counts(pop, 256, 8, 32, n_batches=64, seed=12, router="independent").sum(axis=0).astype(float)
    assert (s0.s0_placement(pop, 8, 32, cand, seed=1) == eplb_placement(w, 32, 1.25, "unordered")).all()


def test_candidates_on_one_cell():
    df = s0.scale_s0_candidates({"tokens": [16], "batches": 1, "eps": [32], "workers": 1,
                                 "candidates": ["EPLB ties in index order", "EPLB ties broken"]}).set_index("candidate")
    # ties in index order: nothing can move, TEMPO ties the best fixed policy exactly
    assert df.loc["EPLB ties in index order", "gain_pct"] == 0.0
    assert df.loc["EPLB ties in index order", "colocated"] == 64
    # ties broken: in the flat regime TEMPO drops one activation of nine on the bottleneck GPU
    assert df.loc["EPLB ties broken", "gain_pct"] == pytest.approx(100 / 9)
    assert df.loc["EPLB ties broken", "winner"] == "M"


def test_table_and_text():
    rows = [{"candidate": c, "ep": ep, "B": B, "gain_pct": g, "replicated": 64, "colocated": col}
            for c, col, gains in [("as built", 64, (0.0, 0.0)), ("fix", 0, (12.0, 2.0)), ("half", 0, (8.0, 0.0))]
            for ep in (32, 64) for B, g in zip((16, 1024), gains)]
    t = ch04.scale_s0_table(pd.DataFrame(rows))
    assert t.set_index(["candidate", "ep"]).loc[("fix", 32)].tolist() == [7.0, 12.0, 64, 0]
    rows = [{"candidate": c, "ep": ep, "B": B, "gain_pct": g, "replicated": 64, "colocated": col}
            for c, col, gains in [("as built", 16, (3.0, 1.0)), ("EPLB ties in index order", 64, (0.0, 0.0)),
                                  ("TEMPO's paper preset (Section 4.2)", 16, (0.5, -0.5)),
                                  ("the paper's reading (independent draws, paper preset)", 16, (0.2, 0.0)),
                                  ("fix", 0, (12.0, 2.0))]
            for ep in (32, 64) for B, g in zip((16, 1024), gains)]
    numbers, words = ch04.scale_s0_glue(ch04.scale_s0_table(pd.DataFrame(rows)), 6.0)
    assert (numbers["s0_built_lo"], numbers["s0_built_hi"], numbers["s0_preset_lo"]) == (2.0, 2.0, 0.0)
    assert (numbers["s0_built_col"], numbers["s0_built_rep"], numbers["s0_ep_hi"]) == (16.0, 64.0, 64.0)
    # the rows that match the ledger's "no gain" name the cause: here the ties and the preset, not "as built"
    assert words == {"s0_zero": "EPLB ties in index order, TEMPO's paper preset (Section 4.2), the paper's reading "
                                "(independent draws, paper preset)", "s0_reach": "fix"}
    none = ch04.scale_s0_glue(ch04.scale_s0_table(pd.DataFrame([r for r in rows if r["candidate"] == "as built"])), 6.0)
    assert none[1] == {"s0_zero": "none", "s0_reach": "none"} and "s0_preset_lo" not in none[0]


def test_activation_balancer_check_on_two_cells():
    cfg = {"shapes": ["DSv2-Lite"], "replications": [1.25], "skews": [0.0, 1.2], "tokens": [16], "batches": 1,
           "workers": 1}
    cells = registry.EXPERIMENTS["activation_balancer"](registry.with_reading("activation_balancer", cfg))
    assert len(cells) == 2
    # the exact balancer only adds a candidate: the gain against it is never above the gain vs the fixed policies
    assert (cells.gain_vs_exact_pct <= cells.gain_pct + 1e-9).all()
    # semi-matching activates no more experts than METRO's greedy, so in the flat regime it is never slower
    assert (cells.ms_semi_matching <= cells.ms_metro * (1 + 1e-9)).all()
    # its fixed policies and TEMPO are the phase diagram's cells
    from tempo.studies.simulator import phase_cell

    for r in cells.itertuples():
        cell = phase_cell({"shape": "DSv2-Lite", "ep": 8, "skew": r.skew, "replication": 1.25, "B": 16, "batches": 1,
                           "seed": 0, "reading": Reading.paper().select(registry.READINGS["phase_diagram"])})
        assert cell.ms_tempo.iloc[0] == r.ms_tempo and cell.gain_pct.iloc[0] == r.gain_pct
    t = ch04.activation_balancer_table(cells)
    assert t.cells.tolist() == [2] and t.min_gain_vs_exact_pct.iloc[0] == pytest.approx(cells.gain_vs_exact_pct.min())
    v = ch04.activation_balancer_view(t)
    assert v.loc["DSv2-Lite", "cells"] == 2 and all(" " in c for c in v.columns if c != "cells")
    assert v.loc["DSv2-Lite", "lowest vs exact %"] == pytest.approx(round(cells.gain_vs_exact_pct.min(), 3))
    numbers, words = ch04.activation_balancer_glue(t)
    assert numbers["ab_cells"] == 2 and numbers["ab_lo_exact"] == pytest.approx(cells.gain_vs_exact_pct.min())
    assert (t.max_gain_vs_exact_pct <= t.max_gain_vs_fixed_pct + 1e-9).all()
    assert words["ab_max"].startswith(f"DSv2-Lite {t.max_gain_vs_fixed_pct.iloc[0]:.2f}% -> ")
    good = t.assign(**{"cells_below_-0.3pct": 0})
    assert ch04.activation_balancer_glue(good)[1]["ab_bound"] == "holds against the exact balancer too"
    bad = t.assign(**{"cells_below_-0.3pct": 1, "min_gain_vs_exact_pct": -2.0})
    assert ch04.activation_balancer_glue(bad)[1]["ab_bound"].startswith("depends on which activation balancer")


def test_a_candidate_can_run_the_paper_preset():
    from tempo.core.cost import CostModel
    from tempo.core.instance import Instance
    from tempo.policies import solve
    from tempo.studies.simulator import FIXED, SHAPES

    cand = CANDS["TEMPO's paper preset (Section 4.2)"]
    row = s0.s0_cell({"cand": cand, "ep": 32, "tokens": [16], "batches": 1, "seed": 1}).iloc[0]
    E, K, params = SHAPES["DSv3"]
    model = CostModel.named(params)
    pop = zipf_popularity(E, 0.0, seed=1)
    pl = s0.s0_placement(pop, K, 32, cand, 1)
    inst = Instance.from_placement(sample_counts(pop, 16, K, 32, seed=2)[0], pl, 32)
    best = min(model.makespan(inst, solve(inst, model, p)) for p in FIXED)
    paper = model.makespan(inst, solve(inst, model, "tempo", options="paper"))
    assert row.gain_pct == pytest.approx(100 * (1 - paper / best))


def test_tempo_gain_scores_against_the_first_best():
    from tempo.studies.simulator import tempo_gain

    ms = {"metro": 10.0, "token_lp": 10.0, "uniform": 12.0, "tempo": 9.0, "semi_matching": 8.0}
    assert tempo_gain(ms) == ("metro", pytest.approx(10.0))
    best, gain = tempo_gain(ms, ["metro", "semi_matching"])
    assert best == "semi_matching" and gain == pytest.approx(-12.5)
