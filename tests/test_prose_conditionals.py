"""The passages a chapter writes from its own numbers ("prose that follows the data"):
each is rendered for both outcomes of the effect it explains, so a later build or solver that
moves the numbers moves the sentence with them."""
import pandas as pd
import pytest

import tempo
from tempo.book.chapters import ch01_balance_time as ch01
from tempo.book.chapters import ch08_your_model as ch08


# ---------------------------------------------------------------------------- chapter 01
def cx_table(default, paper_, single, metro=54.756, milp=54.756, floors=(4, 3, 4, 3, 7, 3)):
    ms = [default, paper_, single, metro, 83.4, milp]
    df = pd.DataFrame({"makespan (us)": ms, "floors on the busiest GPU": list(floors)},
                      index=list(ch01.CX_TEMPO) + ["metro", "token_lp", "milp"])
    return df.assign(**{"above the best %": 100 * (df["makespan (us)"] / min(ms) - 1)})


def test_counterexample_glue_when_metro_beats_the_default():
    numbers, words = ch01.counterexample_glue(cx_table(55.6, 54.756, 55.6))
    assert words == {"cx_optimal": "is the exact optimum", "cx_default_verdict": "stops above it",
                     "cx_single_verdict": "stops above it"}
    assert numbers["cx_default_above"] == pytest.approx(100 * (55.6 / 54.756 - 1))
    assert (numbers["cx_single_floors"], numbers["cx_metro_floors"]) == (4, 3)


def test_counterexample_glue_when_the_default_reaches_metro():
    numbers, words = ch01.counterexample_glue(cx_table(54.756, 54.756, 55.6, milp=54.0))
    assert words == {"cx_optimal": "is not the optimum", "cx_default_verdict": "reaches it",
                     "cx_single_verdict": "stops above it"}
    assert numbers["cx_default_above"] == pytest.approx(0.0) and numbers["cx_milp"] == 54.0
    assert ch01.counterexample_glue(cx_table(54.756, 54.756, 54.756))[1]["cx_single_verdict"] == "reaches it"


def test_counterexample_table_on_the_chapters_batch():
    inst = tempo.Instance.full_replication([54, 297, 54, 27, 54, 27], n_gpus=2)
    t = ch01.counterexample_table(inst, tempo.CostModel(a=0, b=13.9, c=0, beta=0.156))
    assert list(t.index) == list(ch01.CX_TEMPO) + ["metro", "token_lp", "milp"]
    assert t.loc["metro", "makespan (us)"] == pytest.approx(54.756) == t.loc["milp", "makespan (us)"]
    assert t.loc["tempo, paper preset (Section 4.2)", "makespan (us)"] == pytest.approx(54.756)
    assert t.loc["tempo, one search from our seed", "makespan (us)"] == pytest.approx(55.6)     # stuck: 4 floors each
    assert t.loc["tempo, one search from our seed", "floors on the busiest GPU"] == 4 and t.loc["metro", "floors on the busiest GPU"] == 3
    assert t["makespan (us)"].min() == pytest.approx(t.loc["milp", "makespan (us)"])           # nothing beats the optimum
    numbers, words = ch01.counterexample_glue(t)
    assert words["cx_default_verdict"] == "reaches it" and words["cx_single_verdict"] == "stops above it"


def gain(smallest, wins=4, lo=62.5, hi=125.0):
    return pd.DataFrame([{"grid points": 12, "tempo > 1% better than both proxies": wins, "there, b / beta from (tokens)": lo,
                          "to (tokens)": hi, "best proxy / tempo, largest": 1.725, "best proxy / tempo, smallest": smallest}])


def test_proxy_gain_glue_both_ways():
    numbers, words = ch01.proxy_gain_glue(gain(1.0))
    assert words == {"gain_proxy": "no proxy beats", "gain_band": "b/β from 62.5 to 125.0 tokens"}
    assert numbers["gain_wins"] == 4 and numbers["gain_points"] == 12 and numbers["gain_largest"] == 1.725
    assert numbers["gain_pred_lo"] == pytest.approx(390 / 7) and numbers["gain_pred_hi"] == 172.5
    numbers, words = ch01.proxy_gain_glue(gain(0.97, wins=0))
    assert words == {"gain_proxy": "a proxy beats", "gain_band": "nowhere"} and numbers["gain_smallest"] == 0.97


def test_proxy_gain_band_lies_inside_the_predicted_band():
    """The arithmetic the passage states: on the full grid, every point where tempo beats both
    proxies has 390/7 < b/beta < 690/4."""
    from tempo.studies import toy

    g = ch01.proxy_gain(toy.toy_sweep(ch01.sweep_config("full"))).iloc[0]
    assert 390 / 7 < g["there, b / beta from (tokens)"] <= g["to (tokens)"] < 690 / 4


# ---------------------------------------------------------------------------- chapter 08
def rec(backend="deep_gemm", device="NVIDIA H200"):
    return pd.Series({"machine": "m", "date": "2026-11-30", "backend": backend, "shape": "dsv3", "device": device, "cells": 58})


def test_fit_glue_gpu_and_cpu():
    samples = pd.DataFrame({"G": [1, 8], "N": [10, 800], "T": [1, 8], "t_us": [12.0, 100.0]})
    good = tempo.CostModel(a=0, b=12.0, c=0, beta=0.125)           # exact on both cells: 0% error
    numbers, words = ch08.fit_glue(rec(), good, samples, bound_us=10.0)
    assert (words["ft_device"], words["ft_shape"], words["ft_kind"], words["ft_err_verdict"]) == ("NVIDIA H200", "dsv3", "GPU", "within")
    assert numbers["ft_b"] == 12.0 and numbers["ft_ratio"] == pytest.approx(1.2) and numbers["ft_err"] == pytest.approx(0.0)
    assert words["ft_pred_b"] == "none" and words["ft_tile"] == "not checked" and numbers["ft_tile_b"] != numbers["ft_tile_b"]
    assert words["ft_pred_words"].startswith("Chapter 05's prediction of b and n* does not cover") and "nan" not in words["ft_pred_words"]
    bad = tempo.CostModel(a=0, b=6.0, c=0, beta=0.125)             # 50% off on the first cell
    assert ch08.fit_glue(rec(), bad, samples, bound_us=10.0)[1]["ft_err_verdict"] == "above"
    assert ch08.fit_glue(rec("cpu", "AMD EPYC"), good, samples, bound_us=10.0)[1]["ft_kind"] == "CPU"
    # with chapter 05's check of this recording, the fit is set against the H200 prediction
    check = pd.DataFrame({"recording": ["r"] * 2, "form": ["tile-aware (Eq. 2)", "max-affine (Eq. 1)"],
                          "b (us)": [11.42, 12.65], "n*": [113.0, 77.0], "predicted b (us)": ["10.4-11.4"] * 2,
                          "predicted n*": ["110-120"] * 2, "b held": [True, False], "n* held": [True, False]})
    r = rec().copy()
    r["path"] = "data/measured/m/r"
    numbers, words = ch08.fit_glue(r, good, samples, bound_us=10.0, check=check)
    assert (words["ft_pred_b"], words["ft_pred_n"], words["ft_b_where"], words["ft_n_where"]) == ("10.4-11.4", "110-120", "above", "below")
    assert words["ft_tile"] == "inside both ranges" and (numbers["ft_tile_b"], numbers["ft_tile_ns"]) == (11.42, 113.0)
    assert "b = 10.4-11.4 us" in words["ft_pred_words"] and "b = 11.4 us and n* ≈ 113: inside both ranges" in words["ft_pred_words"]
    assert ch08.fit_glue(rec(), good, samples, bound_us=10.0, check=check)[1] == ch08.fit_glue(rec(), good, samples, bound_us=10.0)[1]


def test_chart_G_and_dispatch_rows():
    S = pd.DataFrame({"G": [1, 2, 4, 8, 13, 20, 40, 8], "kind": ["grid"] * 7 + ["tile"]})
    assert ch08.chart_G(S) == [1, 4, 13, 40] and ch08.chart_G(S[S.G <= 2]) == [1, 2]
    inst = tempo.Instance([100, 10, 60], [[0, 1], [1, -1], [0, 0]], 2)
    d = tempo.solve(inst, tempo.CostModel(a=0, b=15, c=0, beta=0.1), "tempo")
    rows = ch08.dispatch_rows(inst, d, n=2)
    assert list(rows.index) == [0, 2] and list(rows.tokens) == [100, 60]
    # expert 2's two copies share GPU 0: one of them takes every token
    assert sorted(rows.loc[2, ["replica 0", "replica 1"]]) == ["0.000 (GPU 0)", "1.000 (GPU 0)"]


def test_pick_recording_is_the_rule_chapter_05_uses():
    recs = pd.DataFrame({"shape": ["dsv3", "dsv3", "qwen3-30b", "qwen3-30b", "qwen3-30b"],
                         "cells": [36, 58, 192, 36, 36], "date": ["2026-11-30", "2026-11-29", "2026-11-29", "2026-11-30",
                                                                 "2026-12-01"],
                         "backend": ["deep_gemm", "deep_gemm", "cpu", "deep_gemm", "torch_bf16"]})
    assert ch08.pick_recording(recs, "dsv3")["cells"] == 58                 # the longer grid, though older
    assert ch08.pick_recording(recs, "qwen3-30b")["backend"] == "torch_bf16"  # a GPU before the CPU's 192 cells;
    assert ch08.pick_recording(recs[recs.backend == "cpu"], "qwen3-30b")["cells"] == 192  # of equal grids the newest
    with pytest.raises(ValueError, match="recorded: \\['dsv3', 'qwen3-30b'\\]"):
        ch08.pick_recording(recs, "tiny")


def test_dispatcher_table_and_ties_text():
    inst = tempo.Instance.full_replication([600, 30, 30, 30, 30, 30, 30], n_gpus=2)
    model = tempo.CostModel(a=0, b=15, c=0, beta=0.1)
    t = ch08.dispatcher_table(inst, model, ["uniform", "token_lp", "tempo"]).set_index("dispatcher")
    # uniform and token-LP both split all seven experts: seven floors (105 us) bind on the busiest GPU
    assert t.loc["uniform", "makespan (us)"] == t.loc["token_lp", "makespan (us)"] == 105.0
    assert t.loc["uniform", "its activated experts G"] == 7 and t.loc["uniform", "binding piece"] == "floor"
    assert t.loc["tempo", "makespan (us)"] == 60.0
    text = ch08.ties_text(t.reset_index())
    assert text == "`uniform`, `token_lp` tie at 105.0 us: the floor binds at 7 activations each."
    assert ch08.ties_text(t.reset_index().iloc[1:]) == ""               # no tie, no sentence
    with pytest.raises(ValueError, match="policies"):
        ch08.dispatcher_table(inst, model, [])


def test_restricted_example_by_hand():
    inst, model = ch08.restricted_example()
    check = ch08.hand_check(inst, model, predicted_us=68.0).set_index("dispatcher")
    assert check.loc["tempo", "makespan (us)"] == pytest.approx(68.0) and check.loc["milp", "makespan (us)"] == pytest.approx(68.0)
    assert check.loc["static", "makespan (us)"] == pytest.approx(0.2 * 630)
    d = tempo.solve(inst, model, "tempo")
    rows = ch08.replica_table(inst, d)
    assert len(rows) == 9 and rows["tokens shares[e, r]"].sum() == pytest.approx(1020)
    # each replica's tokens land on the GPU replica_gpu names: per-GPU sums equal the model's N
    per_gpu = rows.groupby("GPU replica_gpu[e, r]")["tokens shares[e, r]"].sum().to_numpy()
    assert per_gpu == pytest.approx(model.gpu_features(inst, d)[1])
    text = ch08.hand_check_text(check.reset_index())
    assert text == "`tempo`, `milp` reach the predicted 68 us. `static` ends at 126.0 us, above."


def test_replica_layout_draws_one_box_per_replica():
    from tempo.book import figures

    inst, model = ch08.restricted_example()
    spec = figures.replica_layout(inst, tempo.solve(inst, model, "tempo")).to_dict()
    rows = spec["datasets"][next(iter(spec["datasets"]))]
    assert len(rows) == 9 and {r["GPU"] for r in rows} == {"GPU 0", "GPU 1", "GPU 2"}
    assert sum(r["tokens"] for r in rows) == pytest.approx(1020)


# ---------------------------------------------------------------------------- chapter 03
def svm(ratios, optimal, to_lb=None):
    n = len(ratios)
    return pd.DataFrame({"ratio": ratios, "milp_optimal": optimal, "ratio_to_lb": to_lb or ratios,
                         "tempo": [100.0] * n, "milp": [100.0 / r for r in ratios], "tokens_per_gpu": [512] * n,
                         "tempo_ms": [1.0] * n, "milp_s": [0.1] * n})


def test_solver_glue_when_the_build_shows_no_batch_below_one():
    from tempo.book.chapters import ch03_solver as ch03

    g = ch03.solver_glue(svm([1.0, 1.002, 1.0], [True, True, True]), 10.0)
    assert (g["svm_below"], g["svm_batches"], g["svm_proven"], g["svm_timed_out"]) == (0, 3, 3, 0)
    assert g["svm_bound_max"] == g["svm_max"] == pytest.approx(1.002) and g["milp_limit"] == 10.0
    # every batch proven: no sentence about batches stopped at the limit or a bound above the table's max
    w = ch03.solver_words(svm([1.0, 1.002, 1.0], [True, True, True]))["svm_bound_words"]
    assert w.startswith("Here HiGHS reported every batch optimal") and "exceeds" not in w and "1.0020" in w


def test_solver_glue_when_the_build_shows_some():
    from tempo.book.chapters import ch03_solver as ch03

    frame = svm([0.97, 1.0, 1.011], [True, False, False], to_lb=[0.97, 1.0, 1.02])
    g = ch03.solver_glue(frame, 10.0)
    assert (g["svm_below"], g["svm_below_to"], g["svm_below_proven"], g["svm_timed_out"]) == (1, 0, 1, 2)
    assert g["svm_min"] == 0.97 and g["svm_bound_max"] == pytest.approx(1.02) and g["svm_bound_max"] > g["svm_max"]
    w = ch03.solver_words(frame)["svm_bound_words"]
    assert "(2 batches here)" in w and "its maximum, 1.0200" in w and "exceeds the table's incumbent max (1.0110)" in w
    # batches stopped at the limit whose bound does not raise the worst ratio: "exceeds" is not written
    w = ch03.solver_words(svm([1.0, 1.011, 1.0], [True, True, False], to_lb=[1.0, 1.011, 1.0]))["svm_bound_words"]
    assert "(1 batch here)" in w and "exceeds" not in w and "equals its incumbent max (1.0110)" in w
    t = ch03.milp_summary(frame).set_index("quantity")
    assert t.iloc[-1, -1] == pytest.approx(1.02) and t.loc["tempo / MILP, max"].iloc[-1] == pytest.approx(1.011)


# ---------------------------------------------------------------------------- reproduction map
def test_the_map_checks_the_h200_prediction_as_chapter_05_does():
    from tempo.book.chapters import ch05_calibration as ch05
    from tempo.book.chapters import ch98_reproduction_map as ch98
    from tempo.measured.catalog import recordings

    recs = recordings("calibration")
    t98, words98 = ch98.measured_check(recs)
    t05, words05 = ch05.prediction_check(recs)
    pd.testing.assert_frame_equal(t98, t05)
    assert words98 == words05
    g = ch98.expected_glue(4.8)
    assert g["paper_b"] == pytest.approx(14.78)


# ---------------------------------------------------------------------------- chapter 02
def worst(default, whole, g_default=5, g_opt=4, as_run=None, g_run=5):
    rows = [("tempo, default seed", default, g_default), ("tempo, whole-expert seed", whole, g_opt), ("MILP (OPT)", 1.0, g_opt)]
    if as_run is not None:
        rows.insert(0, ("tempo as the probe ran it (options='paper')", as_run, g_run))
    return pd.DataFrame([{"dispatch": label, "makespan (us)": 30.0 * r, "/ OPT": r, "most activations on a GPU": g,
                          "most tokens on a GPU": 100.0, "b (us)": 5.0, "b / makespan %": 100 * 5.0 / (30.0 * r)}
                         for label, r, g in rows])


def test_worst_case_glue_every_outcome():
    from tempo.book.chapters import ch02_theory as ch02

    def gap(*args, **kw):
        return ch02.worst_case_glue(worst(*args, **kw))[1]["wc_gap"]

    assert gap(1.0, 1.0, 4, 4) == "none: either seed reaches OPT"
    assert gap(1.167, 1.0) == "the default's seed (one floor more)" and gap(1.167, 1.0, 4, 4) == "the default's seed"
    assert gap(1.05, 1.05, 4, 4) == "the later stages (both seeds end alike)"
    assert gap(1.0, 1.1, 4, 4) == "the whole-expert seed (the default does better)"
    assert gap(1.02, 1.1, 4, 4) == "the whole-expert seed (the default does better)"
    # the probe's preset stops above OPT, the default reaches it: the gap is the preset's
    assert gap(1.0, 1.0, 4, 4, as_run=1.1005, g_run=3) == "the preset the probe ran"
    assert gap(1.0, 1.0, 4, 4, as_run=1.0, g_run=4) == "none: either seed reaches OPT"
    numbers = ch02.worst_case_glue(worst(1.167, 1.0, as_run=1.1005, g_run=3))[0]
    assert numbers["wc_probe"] == 1.1005 and numbers["wc_g_default"] == 5 and numbers["wc_g_opt"] == 4
    assert numbers["wc_b_share"] == pytest.approx(100 * 5.0 / 30.0) and numbers["wc_opt"] == 30.0
    assert ch02.worst_case_glue(worst(1.0, 1.0))[0]["wc_probe"] != ch02.worst_case_glue(worst(1.0, 1.0))[0]["wc_probe"]


def test_stages_glue_and_the_forced_time():
    from tempo.book.chapters import ch03_solver as ch03

    same = pd.DataFrame({128: [0.85, 0.85], 512: [0.95, 0.95], "solve ms (B=512)": [0.2, 2.0]}, index=["a", "b"])
    differ = same.assign(**{"512": [0.95, 0.90]}).drop(columns=512)
    forced_all = pd.DataFrame({"batches": [2, 2], "every stage the same makespan": [2, 2], "... forced": [2, 2]})
    numbers, words = ch03.stages_glue(same, forced_all)
    assert words == {"st_rows": "identical"} and numbers == {"st_spread": 0.0, "st_batches": 4, "st_forced": 4, "st_free": 0}
    numbers, words = ch03.stages_glue(differ, forced_all.assign(**{"... forced": [2, 1]}))
    assert words == {"st_rows": "not identical"} and numbers["st_spread"] == pytest.approx(0.05)
    assert (numbers["st_forced"], numbers["st_free"]) == (3, 1)


def test_forced_time_bounds_every_dispatch():
    from tempo.book.chapters import ch03_solver as ch03
    from tempo.studies.solver import drift16_forced, forced_time

    # expert 0 (90 tokens) has one replica on GPU 0; expert 1 may go anywhere
    inst = tempo.Instance([90, 10], [[0, -1], [0, 1]], 2)
    model = tempo.CostModel(a=0, b=1, c=0, beta=0.1)
    assert forced_time(inst, model) == pytest.approx(9.0)
    for p in ("tempo", "milp", "static"):
        assert model.makespan(inst, tempo.solve(inst, model, p)) >= 9.0 - 1e-9
    t = ch03.forced_table(drift16_forced({"tokens": [128], "batches": 1}))
    assert t.loc[128, "batches"] == 1 and t.iloc[0, -1] <= t.iloc[0, 1] <= 1
