"""Readings (data/paper/readings.yaml): the file, the Reading object, and that each reading
does what it says in the studies (router, token-LP face, ensemble candidate, METRO's
order, ties, the boundary's p_1, the cache key)."""
import numpy as np
import pandas as pd
import pytest

import tempo
from tempo import studies
from tempo.core.cost import CostModel
from tempo.core.instance import Instance
from tempo.paper.claims_file import claims
from tempo.paper.readings import Reading, spec, specs
from tempo.policies import solve
from tempo.policies.exact import token_lp_highs, token_lp_value
from tempo.studies.cache import key
from tempo.studies.scenarios import zipf_batches
from tempo.studies.simulator import FIXED, boundary_table, mixed_regime, phase_cell, winner_label
from tempo.world.workloads import sample_counts, zipf_popularity


# ------------------------------------------------------------------ the file and the object
def test_every_reading_is_well_formed_and_names_real_claims():
    known = set(claims().id)
    assert len(specs()) >= 17
    for s in specs().values():
        assert s.paper in s.alternatives and s.library in s.alternatives, s.id
        assert s.settled in ("yes", "leaning", "open"), s.id
        assert s.section and s.why, s.id
        assert set(s.claims) <= known, (s.id, set(s.claims) - known)


def test_paper_and_library_readings():
    p, lib = Reading.paper(), Reading.library()
    assert p["synthetic_router"] == "independent" and lib["synthetic_router"] == "distinct_topk"
    assert p["token_lp_face"] == "highs_vertex" and lib["token_lp_face"] == "even_spread"
    assert p["toy_token_lp_face"] == lib["toy_token_lp_face"] == "even_spread"  # Fig. 1b draws the spread
    assert p["ensemble_lp"] == "highs_vertex" and lib["ensemble_lp"] == "auto"
    assert p["tempo_preset"] == "paper" and lib["tempo_preset"] == "default"
    assert p["metro_order"] == lib["metro_order"] == "expert_id"  # METRO's Algorithm 1 (arXiv 2512.09277)
    assert p["ties"] == "tie" and p["milp_reference"] == "incumbent"
    assert p.skews == [0.0, 0.3, 0.6, 0.9, 1.2, 1.5] and len(p.with_(skew_grid="seven_skews").skews) == 7
    assert p.batch_ladder == [16, 32, 64, 128, 256, 512, 1024, 2048]
    assert len(p.seeds()) >= 8 and p.with_(random_maxima="one_seed").seeds(3) == [3]
    assert p.label() == "paper" and lib.label() == "library"
    assert p.with_(ties="first_listed").label() == "paper+ties=first_listed"
    assert p == Reading.paper() and hash(p) == hash(Reading.paper()) and p != lib
    assert spec("metro_order").settled == "leaning" and "2512.09277" in spec("metro_order").section


def test_unknown_names_are_refused_naming_the_reading():
    with pytest.raises(ValueError, match="unknown reading 'routerr'"):
        Reading.paper(routerr="independent")
    with pytest.raises(ValueError, match="reading 'token_lp_face' has no choice 'vertex'.*highs_vertex"):
        Reading.paper(token_lp_face="vertex")
    with pytest.raises(ValueError, match="reading 'ties'"):
        Reading.of({"reading": {"ties": "coin"}})
    with pytest.raises(TypeError, match="config\\['reading'\\]"):
        Reading.of({"reading": ["ties"]})
    with pytest.raises(ValueError, match="unknown reading"):
        Reading.paper()["nope"]
    with pytest.raises(ValueError, match="unknown reading"):
        studies.with_reading("phase_diagram", {"reading": {"nope": "x"}})


def test_alternatives_vary_one_choice():
    alts = Reading.paper().alternatives("token_lp_face")
    assert [a["token_lp_face"] for a in alts] == ["maxflow_vertex", "even_spread"]
    assert all(a.differs_from_paper() == {"token_lp_face": a["token_lp_face"]} for a in alts)


def test_the_book_tables():
    from tempo.book import readings

    t = readings.table()
    assert t.loc["synthetic_router", "paper"] == "independent" and t.loc["synthetic_router", "library"] == "distinct_topk"
    m = readings.matrix()
    assert m.loc["mixed_zipf", "synthetic_router"] and not m.loc["mixed_zipf", "ties"]
    assert "synthetic_router" in readings.readings_of("mixed_zipf")
    assert "phase_boundary_hits" in readings.claims_of("ties")


# ------------------------------------------------------------------ the cache key
def test_changing_the_reading_changes_the_cache_key():
    cfg = {"shapes": ["DSv3"], "eps": [8], "skews": [0.0], "replications": [1.25], "tokens": [16], "batches": 1}
    paper = studies.with_reading("phase_diagram", cfg)
    assert paper["reading"] == Reading.paper().select(studies.READINGS["phase_diagram"])
    keys = {key("phase_diagram", paper, "v")}
    for rid in studies.READINGS["phase_diagram"]:
        for alt in Reading.paper().alternatives(rid):
            keys.add(key("phase_diagram", studies.with_reading("phase_diagram", cfg, alt), "v"))
    n_alts = sum(len(spec(r).choices) - 1 for r in studies.READINGS["phase_diagram"])
    assert len(keys) == 1 + n_alts
    # a reading the study does not depend on leaves its key alone ...
    other = studies.with_reading("phase_diagram", cfg, Reading.paper(printed_rounding="unrounded"))
    assert key("phase_diagram", other, "v") == key("phase_diagram", paper, "v")
    # ... and a study that depends on no reading carries none
    assert "reading" not in studies.with_reading("cost_curve", {"params": ["dsv3-offline"], "reading": {"ties": "tie"}})
    # choices named in the config win over the reading passed in
    mixed = studies.with_reading("phase_diagram", {**cfg, "reading": {"ties": "first_listed"}}, Reading.library())
    assert mixed["reading"]["ties"] == "first_listed" and mixed["reading"]["synthetic_router"] == "distinct_topk"


def test_run_writes_the_reading_into_the_meta(tmp_path, monkeypatch):
    import json

    from tempo.core import paths

    monkeypatch.setattr(paths, "BUILD", tmp_path)
    cfg = {"b": 15.0, "beta": 0.1}
    lib = studies.run("toy_dispatch", cfg, "smoke", reading=Reading.library(tempo_preset="default"))
    pap = studies.run("toy_dispatch", cfg, "smoke", tag="p", reading=Reading.paper())
    meta = json.loads((tmp_path / "results" / "smoke" / "toy_dispatch-p.meta.json").read_text())
    assert meta["config"]["reading"] == Reading.paper().select(studies.READINGS["toy_dispatch"])
    assert len(lib) == len(pap)
    out = studies.run_alternatives("toy_dispatch", cfg, "smoke", ids=["metro_order"])
    assert set(out) == {(None, None), ("metro_order", "descending_tokens"), ("metro_order", "random_order")}
    ms = {k: v[v.policy == "metro"].makespan_us.iloc[0] for k, v in out.items()}
    assert ms[(None, None)] == 69.0 and ms[("metro_order", "descending_tokens")] == 66.0
    assert (tmp_path / "results" / "smoke" / "toy_dispatch-metro_order=descending_tokens.csv").exists()


# ------------------------------------------------------------------ the synthetic router
def test_independent_draws_make_every_zipf12_batch_mixed_at_16_tokens_per_gpu():
    # Section 2.4: Zipf(1.2) is mixed in 100% of batches across the ladder, from B = 16 tokens per GPU
    # on EP8 (128 tokens x 8 draws); impossible when each token takes K distinct experts (n* = 156 > 128)
    cfg = {"shape": "DSv3", "skew": 1.2, "tokens": [16], "batches": 40}
    ind = mixed_regime(studies.with_reading("mixed_regime", cfg, Reading.paper()))
    top = mixed_regime(studies.with_reading("mixed_regime", cfg, Reading.library()))
    assert ind.mixed.mean() == 1.0
    assert top.mixed.mean() == 0.0


def test_independent_draws_follow_the_e_eff_law():
    # without the Dirichlet noise, counts are Multinomial(T, p): P(expert e idle) = (1 - p_e)^T (Section 3.2)
    p = zipf_popularity(64, 1.0, seed=3)
    B, K, g = 2, 4, 2
    T = B * K * g
    c = sample_counts(p, B, K, g, n_batches=4000, kappa=None, seed=1, router="independent")
    assert (c.sum(axis=1) == T).all()
    assert np.allclose((c > 0).mean(axis=0), 1 - (1 - p) ** T, atol=0.03)
    assert np.allclose(c.mean(axis=0) / T, p, atol=0.01)
    with pytest.raises(ValueError, match="router"):
        sample_counts(p, B, K, g, router="iid")


def test_the_distinct_router_stays_the_default():
    p = zipf_popularity(64, 1.2, seed=0)
    assert np.array_equal(sample_counts(p, 16, 8, 2, n_batches=3, seed=5),
                          sample_counts(p, 16, 8, 2, n_batches=3, seed=5, router="distinct_topk"))
    assert sample_counts(p, 16, 8, 2, n_batches=20, seed=5).max() <= 16 * 2  # no expert above the batch's tokens
    # scenarios' default too (serving, the live demo and the bench build their batches this way)
    a = zipf_batches(64, 4, 16, 1.2, 1.25, 2, seed=0)
    b = zipf_batches(64, 4, 16, 1.2, 1.25, 2, seed=0, router="distinct_topk", placement_from="long_run_pair_loads")
    assert all(np.array_equal(x.counts, y.counts) and np.array_equal(x.replica_gpu, y.replica_gpu) for x, y in zip(a, b))


# ------------------------------------------------------------------ token-LP faces
def _grid_instances():
    for s in (0.0, 0.6, 1.2):
        for B in (16, 128, 1024):
            for router in ("independent", "distinct_topk"):
                yield from zipf_batches(256, 8, B, s, 1.25, 1, seed=2, router=router)


def test_highs_vertex_is_optimal_basic_and_activates_no_more_slots_than_the_spread():
    for inst in _grid_instances():
        h = solve(inst, None, "token_lp", face="highs_vertex")
        spread = solve(inst, None, "token_lp")
        z = token_lp_value(inst)
        loads = np.bincount(inst.replica_gpu[inst.valid], weights=h.shares[inst.valid], minlength=inst.n_gpus)
        assert loads.max() == pytest.approx(z, rel=1e-7) and h.meta["max_tokens"] == pytest.approx(z, rel=1e-7)
        assert np.allclose(h.shares.sum(axis=1), inst.counts)
        # a basic solution: at most one positive column per row (live experts + GPUs) of the LP
        assert (h.shares > 0).sum() <= inst.live.sum() + inst.n_gpus
        model = CostModel.named("dsv3-offline")
        Gh = model.gpu_features(inst, h)[0]
        Gs = model.gpu_features(inst, spread)[0]
        assert (h.shares > 0).sum() <= (spread.shares > 0).sum()
        assert Gh.max() <= Gs.max()
        assert h.meta["solver"].startswith("HiGHS") and "fallback" not in h.meta


def test_the_two_vertices_can_differ_in_makespan():
    # the same optimum, different vertices: HiGHS's simplex and the max-flow disagree on this batch
    m = CostModel.named("dsv3-offline")
    inst = zipf_batches(256, 8, 256, 0.6, 1.25, 1, seed=0, router="independent")[0]
    h = m.makespan(inst, solve(inst, m, "token_lp", face="highs_vertex"))
    v = m.makespan(inst, solve(inst, m, "token_lp", face="maxflow_vertex"))
    assert h != pytest.approx(v, rel=1e-6)
    # the study that reports it over a grid
    from tempo.studies.simulator import token_lp_faces

    df = token_lp_faces({"shapes": ["DSv3"], "eps": [8], "skews": [0.6], "replications": [1.25], "tokens": [256],
                         "batches": 1, "seed": 0})
    assert set(df.face) == {"even_spread", "maxflow_vertex", "highs_vertex"}
    top = df.groupby("face").max_N.first()  # every face is optimal for the token LP (to float rounding:
    assert np.ptp(top) <= 1e-9 * top.max()  # the even spread is a dual projection)
    assert not df[df.face == "maxflow_vertex"].same_as_highs.all()


def test_highs_vertex_falls_back_to_the_max_flow_vertex_when_highs_stops(monkeypatch):
    import highspy

    from tempo.policies import exact

    real = exact.new_highs

    class Stopped:
        def __init__(self):
            self.h = real()

        def __getattr__(self, name):
            return getattr(self.h, name)

        def getModelStatus(self):
            return highspy.HighsModelStatus.kTimeLimit

    monkeypatch.setattr(exact, "new_highs", Stopped)
    inst = zipf_batches(64, 4, 64, 1.0, 1.25, 1, seed=0)[0]
    d = token_lp_highs(inst)
    assert "fallback" in d.meta and "Time limit" in d.meta["fallback"]
    assert np.allclose(d.shares, exact.token_lp_vertex(inst).shares)
    with pytest.raises(ValueError, match="time_limit"):
        token_lp_highs(inst, time_limit=0)


def test_token_lp_face_option():
    inst = Instance([6, 3, 1], [[0, 1], [1, 2], [2, 0]], 3)
    assert tempo.solve(inst, None, "token_lp", face="maxflow_vertex").shares.tolist() == \
        tempo.solve(inst, None, "token_lp", vertex=True).shares.tolist()
    with pytest.raises(ValueError, match="face"):
        tempo.solve(inst, None, "token_lp", face="simplex")
    with pytest.raises(ValueError, match="disagree"):
        tempo.solve(inst, None, "token_lp", vertex=True, face="highs_vertex")


# ------------------------------------------------------------------ TEMPO's ensemble candidate
def test_tempo_with_the_highs_candidate_keeps_proposition_1():
    for inst in _grid_instances():
        for model in (CostModel.named("dsv3-offline"), CostModel.named("qwen3-30b-offline")):
            d = solve(inst, model, "tempo", options="paper", lp_variants=("highs",))
            t = model.makespan(inst, d)
            lp = model.makespan(inst, token_lp_highs(inst))
            ls = model.makespan(inst, solve(inst, model, "tempo", options="paper", ensemble=False))
            assert t <= lp * 1.01 + 1e-9           # never 1% worse than the candidate it scores
            assert t <= ls + 1e-9                  # the ensemble only ever switches to something better
            assert d.meta["chosen"] in ("local_search", "token_lp_highs")
    with pytest.raises(ValueError, match="lp_variants"):
        tempo.solve(inst, model, "tempo", lp_variants=("simplex",))


def test_tempo_highs_candidate_under_full_replication_scores_round_robin_too():
    inst = Instance.full_replication([600, 30, 30, 30, 30, 30, 30], 2)
    m = CostModel(0, 15, 0, 0.1)
    for opts in ("paper", "default"):
        d = solve(inst, m, "tempo", options=opts, lp_variants=("highs",))
        assert m.makespan(inst, d) == pytest.approx(60.0)


# ------------------------------------------------------------------ METRO's order
def test_metro_orders_on_the_toy():
    from tempo.studies.toy import toy_instance

    inst = toy_instance()
    m = CostModel(0, 15, 0, 0.1)
    assert m.makespan(inst, solve(inst, m, "metro")) == 69.0          # METRO's Algorithm 1: id order
    assert m.makespan(inst, solve(inst, m, "metro", order="expert_id")) == 69.0
    assert m.makespan(inst, solve(inst, m, "metro", order="descending_tokens")) == 66.0
    r1 = solve(inst, m, "metro", order="random_order", seed=4).shares
    assert np.array_equal(r1, solve(inst, m, "metro", order="random_order", seed=4).shares)
    assert ((r1 > 0).sum(axis=1) == 1).all()                           # whole experts, every order
    with pytest.raises(ValueError, match="order"):
        solve(inst, m, "metro", order="tokens")


def test_every_metro_order_balances_activations_greedily():
    for inst in _grid_instances():
        for order in ("expert_id", "descending_tokens", "random_order"):
            d = solve(inst, None, "metro", order=order)
            assert ((d.shares > 0).sum(axis=1) == inst.live).all()
            G = np.bincount(inst.replica_gpu[d.shares > 0], minlength=inst.n_gpus)
            opt = solve(inst, None, "semi_matching").meta["max_experts"]
            assert opt <= G.max() <= 2 * opt + 1


# ------------------------------------------------------------------ ties and the boundary
def test_ties_are_labelled_as_ties():
    assert winner_label({"metro": 10.0, "token_lp": 10.0, "uniform": 11.0}) == ("M+L", True)
    assert winner_label({"metro": 10.0, "token_lp": 10.0 * (1 + 5e-10), "uniform": 10.0}) == ("M+L+E", True)
    assert winner_label({"metro": 10.0, "token_lp": 9.0, "uniform": 11.0}) == ("L", False)
    assert winner_label({"metro": 10.0, "token_lp": 10.0, "uniform": 11.0}, "first_listed") == ("M", False)
    assert winner_label({"metro": 10.0, "token_lp": 10.0 * (1 + 1e-8), "uniform": 11.0}) == ("M", False)
    with pytest.raises(ValueError, match="ties"):
        winner_label({p: 1.0 for p in FIXED}, "random")


def test_a_real_tied_cell():
    # s = 0 with EPLB's equal loads packed in index order (every replica of a replicated expert on
    # one GPU), deep in the compute regime: every fixed policy reaches the token optimum (the
    # review's "never flips")
    cell = {"shape": "DSv3", "ep": 8, "B": 2048, "skew": 0.0, "replication": 1.25, "batches": 1, "seed": 0}
    tie = phase_cell({**cell, "reading": {"ties": "tie", "eplb_ties": "index_order"}}).iloc[0]
    first = phase_cell({**cell, "reading": {"ties": "first_listed", "eplb_ties": "index_order"}}).iloc[0]
    assert tie.tie and "+" in tie.winner and "L" in tie.winner
    assert not first.tie and first.winner == tie.winner[0]
    assert tie.gain_pct == first.gain_pct


def test_boundary_band_ignores_ties_and_uses_the_readings_p1():
    rows = [{"shape": "DSv3", "ep": 8, "skew": 1.2, "replication": 1.25, "B": B, "winner": w, "seed": 0}
            for B, w in [(16, "M"), (32, "M"), (64, "M+L"), (128, "L"), (256, "L+E")]]
    df = pd.DataFrame(rows)
    bt = boundary_table(df, reading=Reading.paper()).iloc[0]
    assert (bt.band_lo, bt.band_hi) == (32, 128)
    lib = boundary_table(df, reading=Reading.library()).iloc[0]             # distinct top-K: pair shares
    rw = boundary_table(df, reading=Reading.library(hot_share="router_weight")).iloc[0]
    assert rw.B_star_hot < lib.B_star_hot  # the router weight of the hottest expert exceeds its pair share
    # under independent draws the pair share is the router weight: hot_share does not matter
    assert boundary_table(df, reading=Reading.paper(hot_share="router_weight")).iloc[0].B_star == pytest.approx(bt.B_star)
    with pytest.raises(ValueError, match="one seed"):
        boundary_table(pd.concat([df, df.assign(seed=1)]))


# ------------------------------------------------------------------ studies under a reading
def test_phase_diagram_runs_under_a_reading_and_over_seeds():
    from tempo.studies.simulator import phase_diagram

    cfg = {"shapes": ["DSv3"], "eps": [8], "skews": [1.2], "replications": [1.25], "tokens": [64], "batches": 1,
           "workers": 1, "progress": False, "seeds": [0, 1]}
    p = phase_diagram(studies.with_reading("phase_diagram", cfg, Reading.paper()))
    lib = phase_diagram(studies.with_reading("phase_diagram", cfg, Reading.library()))
    assert list(p.seed) == [0, 1] and "reading" not in p
    assert not np.allclose(p.ms_token_lp, lib.ms_token_lp)  # another router, another face
    # the paper's L is the HiGHS vertex, its TEMPO the paper preset with the HiGHS candidate
    i = zipf_batches(256, 8, 64, 1.2, 1.25, 1, seed=0, router="independent")[0]
    m = CostModel.named("dsv3-offline")
    assert p.ms_token_lp.iloc[0] == pytest.approx(m.makespan(i, token_lp_highs(i)))
    assert p.ms_tempo.iloc[0] == pytest.approx(m.makespan(i, solve(i, m, "tempo", options="paper", lp_variants=("highs",))))


def test_solver_studies_under_a_reading():
    from tempo.studies.solver import ablation, milp_ratio, solver_vs_milp, thm2_probe

    grid = {"eps": [8], "skews": [1.2], "replications": [1.25], "tokens": [64]}
    svm = solver_vs_milp(studies.with_reading("solver_vs_milp", {**grid, "batches": 1, "time_limit": 5.0}))
    assert {"token_lp_highs", "ratio", "ratio_to_lb", "vs_token_lp_face_pct"} <= set(svm.columns)
    assert (milp_ratio(svm) == svm.ratio).all()
    assert (milp_ratio(svm, Reading.paper(milp_reference="lower_bound")) == svm.ratio_to_lb).all()
    ab = ablation(studies.with_reading("ablation", {"phase": grid, "scale": grid, "batches": 1}))
    assert set(ab.preset) == {"paper"} and set(ab.seed) == {"whole"}
    ab2 = ablation(studies.with_reading("ablation", {"phase": grid, "scale": grid, "batches": 1, "seed": "greedy"},
                                        Reading.paper(ablation_reference="default_whole_seed")))
    assert set(ab2.preset) == {"default"} and set(ab2.seed) == {"greedy"}
    pr = thm2_probe(studies.with_reading("thm2_probe", {"n": 4, "max_experts": 32, "max_gpus": 4, "time_limit": 1.0}))
    assert (pr.tempo >= pr.lb * (1 - 1e-9)).all()


def test_solver_runtime_times_the_same_batches_compiled_and_as_python():
    """solver_runtime: the paper preset on solver_vs_milp's batches, compiled and in a subprocess
    with numba's JIT disabled (the solver_runtime reading's pure_python)."""
    cfg = {"eps": [8], "skews": [1.2], "replications": [1.25], "tokens": [16], "batches": 1, "repeats": 1,
           "python_timeout": 600}
    df = studies.EXPERIMENTS["solver_runtime"](studies.with_reading("solver_runtime", cfg, Reading.paper()))
    assert sorted(df.runtime) == ["compiled", "python"]
    assert df.set_index("runtime").jit_disabled.to_dict() == {"compiled": False, "python": True}
    assert (df.cpu_ms > 0).all() and (df.wall_ms > 0).all()
    assert df.groupby("runtime")[["ep", "skew", "replication", "tokens_per_gpu", "batch"]].first().nunique().max() == 1


@pytest.mark.parametrize("workers", [1, 2])
def test_solver_vs_milp_alternatives_reuse_the_milps_answer(workers, monkeypatch):
    """The MILP runs once per batch: an alternative reading that keeps the batches (another
    TEMPO preset) reuses its answer, also when the first run's cells ran in worker processes."""
    from tempo.studies import solver as solver_studies, sweep

    sweep.memo_clear()
    cfg = {"eps": [8], "skews": [1.2], "replications": [1.25], "tokens": [16, 32], "batches": 1, "time_limit": 2.0,
           "workers": workers, "progress": False}
    a = studies.EXPERIMENTS["solver_vs_milp"](studies.with_reading("solver_vs_milp", cfg, Reading.paper()))
    milps = [k for k in sweep._MEMO if k.startswith(b"milp:")]
    assert len(milps) == 2                                           # one per batch, back in this process
    calls = []
    real = solver_studies.solve
    monkeypatch.setattr(solver_studies, "solve", lambda inst, model, policy, **kw: calls.append(policy) or real(inst, model, policy, **kw))
    b = studies.EXPERIMENTS["solver_vs_milp"](studies.with_reading("solver_vs_milp", {**cfg, "workers": 1},
                                                                   Reading.paper(tempo_preset="default")))
    assert "milp" not in calls and "tempo" in calls                  # the same batches: no new MILP
    assert a.milp.tolist() == b.milp.tolist() and a.milp_lb.tolist() == b.milp_lb.tolist()
    sweep.memo_clear()


def test_a_reused_milp_answer_counts_its_fallback_again(monkeypatch):
    """solver._milp solves an instance once; a reuse that came from a fallback is counted again,
    so an alternative's .meta.json flags what the first run flagged."""
    import numpy as np

    import tempo
    from tempo.policies._fallback import fallback_count, mark_fallback
    from tempo.studies import solver as solver_studies, sweep

    sweep.memo_clear()
    calls = []

    def fake(inst, model, **kw):
        calls.append("milp")
        return mark_fallback(tempo.Dispatch(np.ones((2, 1)) * [[3.0], [4.0]], {"objective": 1.0}), "no incumbent")

    monkeypatch.setattr(solver_studies.milp_references, "exact", fake)
    inst = tempo.Instance(np.array([3, 4]), np.array([[0], [1]]), 2)
    model = tempo.CostModel.named("dsv3-offline")
    try:
        before = fallback_count()
        a = solver_studies._milp(inst, model, 1.0)
        b = solver_studies._milp(inst, model, 1.0)
        assert a is b and calls == ["milp"] and fallback_count() - before == 2
        solver_studies._milp(inst, model, 2.0)  # another limit: solved again
        assert calls == ["milp", "milp"]
    finally:
        sweep.memo_clear()
