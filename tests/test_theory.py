import numpy as np
import pytest

import tempo
from tempo.theory import bounds as theory
from tempo.world.placement import drift_corrupt


@pytest.mark.parametrize("seed", range(4))
def test_partition_reduction_yes_instances_reach_T_without_splitting(seed):
    w = theory.random_partition_instance(6, True, seed=seed)
    assert theory.has_balanced_partition(w)
    inst, model, T = theory.partition_reduction(w)
    d = tempo.solve(inst, model, "milp", time_limit=20)
    assert d.meta["optimal"]
    assert d.meta["objective"] == pytest.approx(T)
    assert ((d.shares > 1e-9).sum(axis=1) == 1).all()           # no expert split
    half = inst.counts[d.shares[:, 0] > 0]
    assert half.size == 3 and half.sum() == w.sum() // 2        # the dispatch is a balanced partition


@pytest.mark.parametrize("seed", range(4))
def test_partition_reduction_no_instances_exceed_T(seed):
    w = theory.random_partition_instance(6, False, seed=seed)
    assert not theory.has_balanced_partition(w)
    inst, model, T = theory.partition_reduction(w)
    d = tempo.solve(inst, model, "milp", time_limit=20)
    assert d.meta["optimal"] and d.meta["lower_bound"] > T * (1 + 1e-7)


def test_balanced_partition_dp_known_answers():
    assert theory.has_balanced_partition([1, 2, 3, 4])          # {1,4} vs {2,3}
    assert not theory.has_balanced_partition([1, 1, 1, 5])      # sums even but no half of size 2
    assert not theory.has_balanced_partition([1, 2, 3])         # odd count
    with pytest.raises(ValueError):
        theory.partition_reduction([1, 2, 4])
    with pytest.raises(ValueError):
        theory.partition_reduction([1, 2, 3, 5])                # odd total


def test_probe_suite_generator():
    items = list(theory.probe_suite(40, seed=1, max_experts=64, max_gpus=8))
    assert len(items) == 40
    kinds = {k for k, *_ in items}
    assert kinds == {"zipf", "uniform", "giant", "giant_plus_dust"}
    for kind, name, inst, model in items:
        assert inst.is_full_replication() and inst.n_gpus <= 8 and inst.n_experts <= 64
        if kind.startswith("giant"):
            assert inst.counts[0] == inst.counts.max()
        # Theorem 2 holds against the lower bound (which is at most OPT)
        rr = model.makespan(inst, tempo.solve(inst, model, "round_robin"))
        assert rr <= model.lower_bound(inst) + theory.additive_term(model, inst.counts.max()) + 1e-6
    again = list(theory.probe_suite(40, seed=1, max_experts=64, max_gpus=8))
    assert all((a[2].counts == b[2].counts).all() for a, b in zip(items, again))


def test_lower_bound_is_below_milp():
    rng = np.random.default_rng(5)
    for _ in range(5):
        inst = tempo.Instance.full_replication(rng.integers(0, 400, size=6), 3)
        model = tempo.CostModel(a=2, b=8, c=1, beta=0.05, b2=3)
        opt = tempo.solve(inst, model, "milp")
        assert model.lower_bound(inst) <= opt.meta["objective"] + 1e-9


def test_drift_corrupt_swaps_hot_with_cold():
    w = np.arange(20, dtype=float)[::-1]          # expert 0 hottest
    c = drift_corrupt(w, 4, seed=0)
    assert sorted(c) == sorted(w)
    assert set(np.flatnonzero(c != w)) >= {0, 1, 2, 3}
    assert c[:4].max() < w[3]                      # the top-4 now carry cold statistics
    with pytest.raises(ValueError):
        drift_corrupt(w, 11)


def test_one_table_of_model_shapes():
    """theory.SHAPES, calib.shapes.SHAPES and simulator.SHAPES are views of tempo.core.models, and
    both roofline functions agree (DSv3 fp8 at 3.35 TB/s: 44.04 MB -> 13.15 us, Section 2.2)."""
    from tempo.core import models
    from tempo.theory import bounds as theory
    from tempo.calib import shapes
    from tempo.studies import simulator

    for label, (d_model, d_ff) in theory.SHAPES.items():
        m = models.model_shape(label)
        assert (m.d_model, m.d_ff) == (d_model, d_ff) and shapes.SHAPES[m.name] is m
    for label, (E, K, params) in simulator.SHAPES.items():
        m = models.model_shape(label)
        assert (m.n_experts, m.top_k, m.params) == (E, K, params)
    assert theory.roofline_floor_us("DSv3", 3.35e12) == pytest.approx(13.15, abs=0.01)
    assert shapes.roofline_us("dsv3", 3.35) == pytest.approx(theory.roofline_floor_us("DSv3", 3.35e12), rel=1e-12)
    with pytest.raises(ValueError, match="unknown model"):
        models.model_shape("nope")


# ---------------------------------------------------------------------------- chapter summaries
def test_dispatcher_makespans_on_the_metro_counterexample():
    inst = tempo.Instance.full_replication([54, 297, 54, 27, 54, 27], n_gpus=2)
    model = tempo.CostModel(a=0, b=13.9, c=0, beta=0.156)
    ms = theory.dispatcher_makespans(inst, model, ["tempo", "metro", "milp"]).set_index("dispatcher")["makespan (us)"]
    assert ms["metro"] == pytest.approx(54.756) and ms["milp"] == pytest.approx(54.756)
    assert ms["tempo"] == pytest.approx(55.6)
    with pytest.raises(ValueError, match="policies"):
        theory.dispatcher_makespans(inst, model, [])


def test_roofline_table_bytes_floors_and_inflections():
    t = theory.roofline_table().set_index("shape")
    assert t.loc["DSv3", "expert MB (fp8)"] == pytest.approx(3 * 7168 * 2048 / 1e6)
    assert t.loc["DSv3", "roofline floor (us)"] == pytest.approx(3 * 7168 * 2048 / 3.35e12 * 1e6)
    assert t.loc["DSv3", "n* (tokens)"] == pytest.approx(14.78 / 0.0945)
    assert ((t["fitted / roofline"] > 1.1) & (t["fitted / roofline"] < 1.3)).all()


def test_thm1_summary_and_check_on_a_small_frame():
    import pandas as pd

    thm1 = pd.DataFrame({"m": [4, 4, 4, 4], "solvable": [True, True, False, False], "seed": [1, 2, 3, 4],
                         "T": [100.0] * 4, "milp_makespan": [100.0, 100.0, 110.0, 104.0],
                         "proven_optimal": [True] * 4, "reaches_T": [True, True, False, False], "split_experts": [0, 0, 1, 2]})
    s = theory.thm1_summary(thm1)
    assert s.loc[(4, True), "reach_T"] == 1.0 and s.loc[(4, False), "max_split_when_T"] == 0
    c = theory.thm1_check(thm1).iloc[0]
    assert c["reduction holds on every instance"] and c["no partition: best makespan above T, min %"] == pytest.approx(4.0)
    assert c["max %"] == pytest.approx(10.0)
    thm1.loc[0, "split_experts"] = 1      # a dispatch reaching T that splits an expert breaks the reduction
    assert not theory.thm1_check(thm1).iloc[0]["reduction holds on every instance"]


def test_lemma_summary_on_a_small_frame():
    import pandas as pd

    lem = pd.DataFrame({"instance": [0, 1, 0, 1], "lemma": [1, 1, 2, 2], "optimal": [True, False, True, True],
                        "poly_over_milp": [1.0, 0.98, 1.0, 1.0], "tempo_over_milp": [1.0, 1.01, 1.2, 1.0]})
    t = theory.lemma_summary(lem)
    assert t.loc[1, "MILP proven"] == 0.5 and t.loc[1, "poly / MILP min"] == 0.98
    assert t.loc[2, "tempo / MILP max"] == 1.2 and t.loc[2, "instances"] == 2


def test_thm2_summaries_and_worst_case_on_a_small_probe():
    from tempo.studies.solver import thm2_probe

    cfg = dict(n=12, max_experts=8, max_gpus=4, time_limit=5.0, milp_max_vars=64)
    probe = thm2_probe(cfg)
    h = theory.thm2_headlines(probe)
    assert h["instances"] == 12 and h["pinned"] == int((probe.opt_from == "milp").sum()) > 0
    assert h["worst_ratio_to_bound"] <= 1 + 1e-9                       # Theorem 2 holds
    pinned = probe[probe.opt_from == "milp"]
    assert h["tempo_worst_pinned"] == pytest.approx((pinned.tempo / pinned.opt_hi).max())
    s = theory.thm2_summary(probe).set_index("quantity")
    assert s.loc["worst M(A3) / OPT (giants)", "paper"] == 9.1
    w = theory.probe_worst_by_kind(probe)
    assert set(w.kind) == set(probe.kind) and (w["largest expert / all tokens"] <= 1).all()
    wc = theory.tempo_worst_case(probe, cfg["n"], cfg["max_experts"], cfg["max_gpus"]).set_index("dispatch")
    assert wc.loc["MILP (OPT)", "/ OPT"] == pytest.approx(1.0)
    assert wc.loc["MILP (OPT)", "b / makespan %"] == pytest.approx(100 * wc["b (us)"].iloc[0] / wc.loc["MILP (OPT)", "makespan (us)"])
    assert wc.loc["tempo, default seed", "/ OPT"] == pytest.approx(h["tempo_worst_pinned"], rel=1e-6)
    with pytest.raises(ValueError, match="i must be"):
        theory.probe_instance(12, n=12)


def test_probe_instance_is_the_suites_ith():
    items = list(theory.probe_suite(6, max_experts=8, max_gpus=4))
    kind, name, inst, _ = theory.probe_instance(5, n=6, max_experts=8, max_gpus=4)
    assert (kind, name) == items[5][:2] and (inst.counts == items[5][2].counts).all()


def test_epsilon_summary_and_evidence():
    import pandas as pd

    eps = pd.DataFrame({"scale": [1, 1, 1, 4], "tokens_per_gpu": [32, 64, 128, 128], "eps": [0.1, 0.2, 0.3, 0.5]})
    s = theory.epsilon_summary(eps)
    assert s.loc[1, "median %"] == pytest.approx(20.0) and s.loc[4, "max %"] == pytest.approx(50.0)
    ev = theory.epsilon_evidence([32, 256]).set_index("tokens per GPU B")
    model = tempo.CostModel.named("dsv3-offline")
    for B, r in ev.iterrows():
        assert r["hottest expert / all pairs"] <= 1 / 8 + 1e-12            # top-8 to distinct experts
        n_max = r["beta n_max (us)"] / model.beta
        assert r["epsilon %"] == pytest.approx(100 * max(model.b, model.beta * n_max) / r["LB (us)"])
    # the larger batch's hottest expert outweighs its floor: eps grows with B on these batches
    assert ev.loc[256, "beta n_max (us)"] > model.b and ev.loc[256, "epsilon %"] > ev.loc[32, "epsilon %"]


def test_toy_proxy_gain_and_stage_trace():
    from tempo.studies import toy

    sweep = toy.toy_sweep({"b_values": [0.0, 15.0, 30.0], "beta_values": [0.1]})
    g = toy.proxy_gain(sweep).iloc[0]
    assert g["grid points"] == 3 and g["best proxy / tempo, smallest"] >= 1 - 1e-9
    assert g["best proxy / tempo, largest"] == pytest.approx(69 / 60)        # b = 15: METRO's 69 us against 60 us
    assert g["tempo > 1% better than both proxies"] >= 1 and g["there, b / beta from (tokens)"] <= 150 <= g["to (tokens)"]
    with pytest.raises(ValueError, match="toy_sweep"):
        toy.proxy_gain(sweep.drop(columns="beta"))
    st = toy.stage_trace(toy.toy_instance(), tempo.CostModel(a=0, b=15, c=0, beta=0.1))
    assert st.loc["whole", "seed"] == pytest.approx(66.0) and st.loc["whole", "local_search"] == pytest.approx(60.0)
    assert st.loc["greedy", "seed"] == pytest.approx(75.0) and st.loc["greedy", "chains"] == pytest.approx(60.0)


def test_solver_chapter_summaries_on_a_small_frame():
    import pandas as pd

    from tempo.studies import solver

    svm = pd.DataFrame({"tokens_per_gpu": [16, 512, 512, 1024], "ratio": [1.0, 0.9, 0.95, 1.02],
                        "milp_optimal": [True, False, True, True], "tempo": [10.0, 18.0, 19.0, 20.4],
                        "milp": [10.0, 20.0, 20.0, 20.0], "tempo_ms": [0.1, 0.2, 0.4, 0.6], "milp_s": [0.01, 10.0, 0.03, 0.05]})
    m = solver.milp_summary(svm).set_index("quantity")["this artifact (phase grid)"]
    assert m["tempo / MILP, max"] == 1.02 and m["MILP proved optimal"] == "3 / 4"
    b1 = solver.milp_below_one(svm, b=1.0).set_index("MILP")
    assert b1.loc["stopped at its time limit", "ratio below 1"] == 1
    assert b1.loc["reported optimal", "MILP minus tempo there, in floors b"] == [1.0]
    h = solver.solver_headlines(svm)
    assert (h["below_one"], h["below_one_timed_out"], h["below_one_proven"], h["timed_out"]) == (2, 1, 1, 1)
    assert h["tempo_ms_median_large_b"] == pytest.approx(0.4) and h["milp_ms_median"] == pytest.approx(40.0)
    with pytest.raises(ValueError, match="b must"):
        solver.milp_below_one(svm, b=0)
    abl = pd.DataFrame({"variant": ["no ensemble", "no ensemble", "no partial moves"], "degradation_pct": [0.0, 4.0, 1.0],
                        "ep": [8, 64, 8], "skew": [0.0, 1.2, 0.0], "tokens_per_gpu": [16, 1024, 16]})
    t2 = solver.ablation_table(abl).set_index("variant")
    assert list(t2.index) == ["no ensemble", "no partial moves"]          # the order the experiment ran them
    assert t2.loc["no ensemble", "max % (ours)"] == 4.0 and t2.loc["no ensemble", "region of our max"] == "EP64, s=1.2, B=1024"
    assert t2.loc["no ensemble", "max % (paper)"] == 4.5
    st = pd.DataFrame({"stages": ["seed only", "+LP ensemble"] * 2, "B": [128, 128, 512, 512],
                       "ratio_to_static": [1.0, 0.9, 0.95, 0.88], "solve_ms": [0.1, 0.5, 0.2, 0.7]})
    t8 = solver.stage_table(st)
    assert list(t8.index) == ["seed only", "+LP ensemble"] and t8.loc["+LP ensemble", 512] == 0.88
    assert t8.loc["+LP ensemble", "solve ms (B=512)"] == 0.7
    tm = pd.DataFrame({"objective": ["full 3-term (4)", "drop traffic (c2 gamma)"] * 2, "B": [128, 128, 512, 512],
                       "ratio_to_static": [0.90, 0.90, 0.88, 0.946]})
    gap = solver.traffic_gap(tm)
    assert gap[512].item() == pytest.approx(6.6) and gap[128].item() == pytest.approx(0.0)


def test_toy_sweep_config_and_headlines():
    from tempo.studies import toy

    full = toy.sweep_config("full")
    assert full["b_values"][:3] == [0.0, 2.5, 5.0] and full["b_values"][-1] == 30.0 and len(full["beta_values"]) == 15
    assert toy.sweep_config("gpu") == full and len(toy.sweep_config("smoke")["b_values"]) == 4
    with pytest.raises(ValueError, match="profile"):
        toy.sweep_config("fast")
    h = toy.headlines(toy.toy_dispatch({"b": 15.0, "beta": 0.1}))
    assert (h["token_lp_us"], h["metro_us"], h["tempo_us"]) == (105.0, 69.0, 60.0)
    assert h["token_lp_over_tempo"] == pytest.approx(1.75)
    ms = theory.dispatcher_makespans(toy.toy_instance(), tempo.CostModel(a=0, b=15, c=0, beta=0.1), ["tempo", "metro"])
    assert ms.set_index("dispatcher").loc["metro", "above the best %"] == pytest.approx(15.0)
    assert theory.roofline_table().set_index("shape").loc["DSv3", "share of peak bandwidth %"] == pytest.approx(
        100 * 3 * 7168 * 2048 / 3.35e12 * 1e6 / 14.78)
