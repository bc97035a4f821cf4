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


def test_counterexample_text_when_metro_beats_the_default():
    text = ch01.counterexample_text(cx_table(55.6, 54.756, 55.6))
    assert "**METRO beats tempo on this batch**" in text and "stops 1.5% above METRO, at 55.60 us" in text
    assert "exact optimum here" in text and "busiest GPU pays 4 floors where METRO's pays 3" in text
    assert "protects the default" not in text          # the default did not escape: no claim that it did


def test_counterexample_text_when_the_default_reaches_metro():
    text = ch01.counterexample_text(cx_table(54.756, 54.756, 55.6))
    assert "METRO beats tempo" not in text and "The library's default tempo reaches it too (54.76 us)" in text
    assert "One local search from our water-filling seed, with no ensemble and no balancer restart, stops 1.5% above" in text
    assert "protects the default" in text
    text = ch01.counterexample_text(cx_table(54.756, 54.756, 54.756))
    assert "Even one local search from our water-filling seed" in text and "stops" not in text.split("Chapter 03")[0].split("optimum here")[1]


def test_counterexample_table_on_the_chapters_batch():
    inst = tempo.Instance.full_replication([54, 297, 54, 27, 54, 27], n_gpus=2)
    t = ch01.counterexample_table(inst, tempo.CostModel(a=0, b=13.9, c=0, beta=0.156))
    assert list(t.index) == list(ch01.CX_TEMPO) + ["metro", "token_lp", "milp"]
    assert t.loc["metro", "makespan (us)"] == pytest.approx(54.756) == t.loc["milp", "makespan (us)"]
    assert t.loc["tempo, paper preset (Section 4.2)", "makespan (us)"] == pytest.approx(54.756)
    assert t.loc["tempo, one search from our seed", "makespan (us)"] == pytest.approx(55.6)     # stuck: 4 floors each
    assert t.loc["tempo, one search from our seed", "floors on the busiest GPU"] == 4 and t.loc["metro", "floors on the busiest GPU"] == 3
    assert t["makespan (us)"].min() == pytest.approx(t.loc["milp", "makespan (us)"])           # nothing beats the optimum
    ch01.counterexample_text(t)                                                                  # renders whichever way it lands


def gain(smallest, wins=4, lo=62.5, hi=125.0):
    return pd.DataFrame([{"grid points": 12, "tempo > 1% better than both proxies": wins, "there, b / beta from (tokens)": lo,
                          "to (tokens)": hi, "best proxy / tempo, largest": 1.725, "best proxy / tempo, smallest": smallest}])


def test_proxy_gain_text_both_ways():
    text = ch01.proxy_gain_text(gain(1.0))
    assert "no point of the map has the best proxy beating the time model" in text
    assert "on 4 of 12 grid points, all with b/β between 62.5 and 125.0 tokens" in text and "$" not in text
    assert "390/7 ≈ 55.7" in text and "690/4 = 172.5" in text
    text = ch01.proxy_gain_text(gain(0.97, wins=0))
    assert "a proxy beats the time model somewhere" in text and "0.970" in text
    assert "beats neither proxy by more than 1% anywhere" in text and "grid points" not in text


def test_proxy_gain_band_lies_inside_the_predicted_band():
    """The arithmetic the passage states: on the full grid, every point where tempo beats both
    proxies has 390/7 < b/beta < 690/4."""
    from tempo.studies import toy

    g = ch01.proxy_gain(toy.toy_sweep(ch01.sweep_config("full"))).iloc[0]
    assert 390 / 7 < g["there, b / beta from (tokens)"] <= g["to (tokens)"] < 690 / 4


# ---------------------------------------------------------------------------- chapter 08
def rec(backend="deep_gemm", device="NVIDIA H200"):
    return pd.Series({"machine": "m", "date": "2026-11-30", "backend": backend, "shape": "dsv3", "device": device, "cells": 58})


def test_fit_text_gpu_and_cpu():
    samples = pd.DataFrame({"G": [1, 8], "N": [10, 800], "T": [1, 8], "t_us": [12.0, 100.0]})
    good = tempo.CostModel(a=0, b=12.0, c=0, beta=0.125)           # exact on both cells: 0% error
    text = ch08.fit_text(rec(), good, samples, bound_us=10.0)
    assert "NVIDIA H200 recording of the dsv3 expert" in text and "b = 12.00 us, 1.20x the roofline bound" in text
    assert "mean error is 0.0%" in text and "within the 4-8%" in text and "CPU" not in text
    bad = tempo.CostModel(a=0, b=6.0, c=0, beta=0.125)             # 50% off on the first cell
    assert "misses part of this kernel's curve" in ch08.fit_text(rec(), bad, samples, bound_us=10.0)
    text = ch08.fit_text(rec("cpu", "AMD EPYC"), good, samples, bound_us=10.0)
    assert "A CPU has no weight-streaming floor" in text and "within the 4-8%" not in text
    # with chapter 05's check of this recording, the fit is set against the H200 prediction
    check = pd.DataFrame({"recording": ["r"] * 2, "form": ["tile-aware (Eq. 2)", "max-affine (Eq. 1)"],
                          "b (us)": [11.42, 12.65], "n*": [113.0, 77.0], "predicted b (us)": ["10.4-11.4"] * 2,
                          "predicted n*": ["110-120"] * 2, "b held": [True, False], "n* held": [True, False]})
    r = rec().copy()
    r["path"] = "data/measured/m/r"
    text = ch08.fit_text(r, good, samples, bound_us=10.0, check=check)
    assert "predicted for this shape on an H200 b = 10.4-11.4 us and n* = 110-120 tokens" in text
    assert "This fit's b is above that range and its n* below it." in text
    assert "the tile-aware fit (Eq. 2) of the same samples gives b = 11.42 us and n* ≈ 113, inside both ranges" in text
    assert ch08.fit_text(rec(), good, samples, bound_us=10.0, check=check) == ch08.fit_text(rec(), good, samples, bound_us=10.0)


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
    assert text.startswith("`uniform`, `token_lp` tie at 105.0 us: on its busiest GPU each activates 7 experts")
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
    assert text.startswith("`tempo`, `milp` reach the predicted 68 us") and "`static` ends at 126.0 us, above" in text


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


def test_below_one_text_when_the_build_shows_no_such_batch():
    from tempo.book.chapters import ch03_solver as ch03

    text = ch03.below_one_text(svm([1.0, 1.002, 1.0], [True, True, True]), 10.0)
    assert text.startswith("In this build none does: 0 of 3 batches have a ratio below 1")
    assert "HiGHS proved 3 of the 3 optimal within its 10 s limit" in text and "Were a ratio below 1" in text
    assert "equals the table's max, 1.0020" in text and "In this build 1" not in text


def test_below_one_text_when_the_build_shows_some():
    from tempo.book.chapters import ch03_solver as ch03

    frame = svm([0.97, 1.0, 1.011], [True, False, False], to_lb=[0.97, 1.0, 1.02])
    text = ch03.below_one_text(frame, 10.0)
    assert "In this build 1 of 3 batches have one (the smallest is 0.9700" in text
    assert "0 where HiGHS stopped at its 10 s limit and 1 on batches it reported optimal" in text
    assert "none does" not in text and "its maximum, 1.0200, is the table's last row" in text
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


def test_worst_case_text_every_outcome():
    from tempo.book.chapters import ch02_theory as ch02

    text = ch02.worst_case_text(worst(1.0, 1.0, 4, 4))
    assert "not above the optimum on any instance the MILP pinned" in text and "one floor more" not in text
    text = ch02.worst_case_text(worst(1.167, 1.0))
    assert "The library's default ends at 1.167 x OPT (5 activations on its busiest GPU)" in text
    assert "can pay one floor more than OPT's (5 against 4 here)" in text and "comes from its seed" in text
    text = ch02.worst_case_text(worst(1.05, 1.05, 4, 4))
    assert "Both seeds end at the same ratio" in text and "default" in text.split("Both")[0]
    text = ch02.worst_case_text(worst(1.0, 1.1, 4, 4))
    assert "whole-expert seed ends further above OPT than the default" in text
    # the probe's preset stops above OPT, the default reaches it: the gap is the preset's, said so
    text = ch02.worst_case_text(worst(1.0, 1.0, 4, 4, as_run=1.1005, g_run=3))
    assert text.startswith("Reading the table: re-run as the probe ran it, tempo ends at 1.101 x OPT")
    assert "the gap belongs to the preset the probe ran" in text and "no gap to explain" not in text
    text = ch02.worst_case_text(worst(1.0, 1.0, 4, 4, as_run=1.0, g_run=4))
    assert "no gap to explain" in text and "belongs to the preset" not in text


def test_stages_text_and_the_forced_time():
    from tempo.book.chapters import ch03_solver as ch03

    same = pd.DataFrame({128: [0.85, 0.85], 512: [0.95, 0.95], "solve ms (B=512)": [0.2, 2.0]}, index=["a", "b"])
    differ = same.assign(**{"512": [0.95, 0.90]}).drop(columns=512)
    forced_all = pd.DataFrame({"batches": [2, 2], "every stage the same makespan": [2, 2], "... forced": [2, 2]})
    forced_none = forced_all.assign(**{"... forced": [0, 0]})
    text = ch03.stages_text(same, forced_all)
    assert text.startswith("In this build every row of the table is identical") and "on 4 of 4 drift-16" in text
    text = ch03.stages_text(differ, forced_none)
    assert "differ by at most 0.050" in text and "On none of the 4" in text and "identical" not in text
    text = ch03.stages_text(same, forced_all.assign(**{"... forced": [2, 1]}))
    assert "on 3 of 4" in text and "On the other 1" in text


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
