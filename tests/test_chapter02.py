"""Chapter 02's page functions (tempo.book.chapters.ch02_theory), on small frames with known answers."""
import pytest

import tempo
from tempo.book.chapters import ch02_theory as ch02
from tempo.theory import bounds as theory


def test_thm1_summary_and_check_on_a_small_frame():
    import pandas as pd

    thm1 = pd.DataFrame({"m": [4, 4, 4, 4], "solvable": [True, True, False, False], "seed": [1, 2, 3, 4],
                         "T": [100.0] * 4, "milp_makespan": [100.0, 100.0, 110.0, 104.0],
                         "proven_optimal": [True] * 4, "reaches_T": [True, True, False, False], "split_experts": [0, 0, 1, 2]})
    s = ch02.thm1_summary(thm1)
    assert s.loc[(4, True), "reach_T"] == 1.0 and s.loc[(4, False), "max_split_when_T"] == 0
    c = ch02.thm1_check(thm1).iloc[0]
    assert c["reduction holds on every instance"] and c["no partition: best makespan above T, min %"] == pytest.approx(4.0)
    assert c["max %"] == pytest.approx(10.0)
    thm1.loc[0, "split_experts"] = 1      # a dispatch reaching T that splits an expert breaks the reduction
    assert not ch02.thm1_check(thm1).iloc[0]["reduction holds on every instance"]


def test_lemma_summary_on_a_small_frame():
    import pandas as pd

    lem = pd.DataFrame({"instance": [0, 1, 0, 1], "lemma": [1, 1, 2, 2], "optimal": [True, False, True, True],
                        "poly_over_milp": [1.0, 0.98, 1.0, 1.0], "tempo_over_milp": [1.0, 1.01, 1.2, 1.0]})
    t = ch02.lemma_summary(lem)
    assert t.loc[1, "MILP proven"] == 0.5 and t.loc[1, "poly / MILP min"] == 0.98
    assert t.loc[2, "tempo / MILP max"] == 1.2 and t.loc[2, "instances"] == 2


def test_thm2_summaries_and_worst_case_on_a_small_probe():
    from tempo.studies.solver import thm2_probe

    cfg = dict(n=12, max_experts=8, max_gpus=4, time_limit=5.0, milp_max_vars=64)
    probe = thm2_probe(cfg)
    h = ch02.thm2_headlines(probe)
    assert h["instances"] == 12 and h["pinned"] == int((probe.opt_from == "milp").sum()) > 0
    assert h["worst_ratio_to_bound"] <= 1 + 1e-9                       # Theorem 2 holds
    pinned = probe[probe.opt_from == "milp"]
    assert h["tempo_worst_pinned"] == pytest.approx((pinned.tempo / pinned.opt_hi).max())
    s = ch02.thm2_summary(probe).set_index("quantity")
    assert s.loc["worst M(A3) / OPT (giants)", "paper"] == 9.1
    w = ch02.probe_worst_by_kind(probe)
    assert set(w.kind) == set(probe.kind) and (w["largest expert / all tokens"] <= 1).all()
    wc = ch02.tempo_worst_case(probe, cfg["n"], cfg["max_experts"], cfg["max_gpus"]).set_index("dispatch")
    assert wc.loc["MILP (OPT)", "/ OPT"] == pytest.approx(1.0)
    assert wc.loc["MILP (OPT)", "b / makespan %"] == pytest.approx(100 * wc["b (us)"].iloc[0] / wc.loc["MILP (OPT)", "makespan (us)"])
    # the first row re-runs tempo as the probe ran it, so it reproduces the probe's worst ratio
    probe_row = wc.index[0]
    assert probe_row.startswith(ch02.PROBE_ROW) and "'paper'" in probe_row
    assert wc.loc[probe_row, "/ OPT"] == pytest.approx(h["tempo_worst_pinned"], rel=1e-6)
    assert wc.loc["tempo, default seed", "/ OPT"] >= 1 - 1e-9
    with pytest.raises(ValueError, match="i must be"):
        theory.probe_instance(12, n=12)


def test_epsilon_summary_and_evidence():
    import pandas as pd

    eps = pd.DataFrame({"scale": [1, 1, 1, 4], "tokens_per_gpu": [32, 64, 128, 128], "eps": [0.1, 0.2, 0.3, 0.5]})
    s = ch02.epsilon_summary(eps)
    assert s.loc[1, "median %"] == pytest.approx(20.0) and s.loc[4, "max %"] == pytest.approx(50.0)
    ev = ch02.epsilon_evidence([32, 256]).set_index("tokens per GPU B")
    model = tempo.CostModel.named("dsv3-offline")
    for B, r in ev.iterrows():
        assert r["hottest expert / all pairs"] <= 1 / 8 + 1e-12            # top-8 to distinct experts
        n_max = r["beta n_max (us)"] / model.beta
        assert r["epsilon %"] == pytest.approx(100 * max(model.b, model.beta * n_max) / r["LB (us)"])
    # the larger batch's hottest expert outweighs its floor: eps grows with B on these batches
    assert ev.loc[256, "beta n_max (us)"] > model.b and ev.loc[256, "epsilon %"] > ev.loc[32, "epsilon %"]


def test_sizes_and_the_numbers_the_prose_glues():
    import pandas as pd

    assert ch02.sizes("gpu") == ch02.sizes("full") and ch02.sizes("smoke")["probe_n"] == 24
    with pytest.raises(ValueError, match="profile"):
        ch02.sizes("fast")
    from tempo.studies.solver import thm2_probe

    cfg = dict(n=12, max_experts=8, max_gpus=4, time_limit=5.0, milp_max_vars=64)
    probe = thm2_probe(cfg)
    g = ch02.probe_glue(probe)
    assert g["p_giants"] == "theorem2/rr_over_opt_max" and g["instances"] == 12
    assert g["tempo_opt"] == ch02.thm2_headlines(probe)["tempo_worst_pinned"]
    wc, words = ch02.worst_case_glue(ch02.tempo_worst_case(probe, cfg["n"], cfg["max_experts"], cfg["max_gpus"]))
    assert wc["wc_opt"] * wc["wc_b_share"] / 100 == pytest.approx(wc["wc_b"])
    from tempo.book import paper

    assert set(paper.glue_values(**wc)) == set(wc)      # every value glues (numbers, no stray strings)
    assert set(words) == {"wc_gap"} and all(isinstance(v, str) for v in words.values())
    eps = pd.DataFrame({"scale": [1, 1, 4], "tokens_per_gpu": [32, 64, 128], "eps": [0.1, 0.3, 0.5]})
    e = ch02.epsilon_glue(eps)
    assert (e["eps_med"], e["eps_med_4x"]) == (pytest.approx(20.0), pytest.approx(50.0)) and e["p_eps_max"] == "thm2_eps_max"
    # synthetic and trace rows side by side: the synthetic medians as before, the trace's apart
    both = pd.concat([eps.assign(routing="synthetic"), eps.assign(eps=eps.eps * 2, routing="trace")])
    e2 = ch02.epsilon_glue(both)
    assert (e2["eps_med"], e2["eps_med_trace"], e2["eps_max_trace"]) == (pytest.approx(20.0), pytest.approx(40.0),
                                                                         pytest.approx(60.0))


def test_the_running_example_as_an_instance_of_eq3():
    table, n = ch02.toy_bounds()
    # by hand: 780 tokens over two GPUs; the LP's split activates all 7 experts on each GPU (7 x 15 us);
    # LB = max(15 * ceil(7/2), 0.1 * 780 / 2) = 60 = OPT (chapter 01); round-robin's GPU 1 holds
    # 600 + 3 x 30 = 690 tokens (69 us); the term max(15, 0.1 x 600) = 60 makes the bound 120
    assert n == pytest.approx({"toy_lp_tokens": 390.0, "toy_lp_us": 105.0, "toy_lb_us": 60.0, "toy_opt_us": 60.0,
                               "toy_rr_us": 69.0, "toy_term_us": 60.0, "toy_bound_us": 120.0})
    assert list(table.value) == pytest.approx([390.0, 105.0, 60.0, 60.0, 69.0, 60.0, 120.0])
