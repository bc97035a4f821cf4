"""Chapter 05's page functions (tempo.book.chapters.ch05_calibration) on the recordings under
data/measured/, and on a recording relabelled as a CPU one (the prose's CPU branches)."""
import dataclasses

import pandas as pd
import pytest

from tempo.benchmarks import gpucheck
from tempo.book.chapters import ch05_calibration as ch05
from tempo.calib.record import recording_fits
from tempo.measured.catalog import recordings
from tempo.measured.store import ROOT as MEASURED


@pytest.fixture(scope="module")
def recs():
    r = recordings("calibration")
    if r.empty:
        pytest.skip("no recording under data/measured/")
    return r


@pytest.fixture(scope="module")
def rec(recs):
    return ch05.main_recording(recs)


def test_sizes_and_paper_numbers():
    assert ch05.sizes("gpu")["measure"] and not ch05.sizes("full")["measure"] and ch05.sizes("smoke")["n_boot"] == 20
    assert ch05.measure(ch05.sizes("smoke")) == []
    n = ch05.paper_numbers()
    assert n["p_tile_step_lo"] <= n["p_tile_step_hi"] and all(isinstance(v, (int, float)) for v in n.values())


def test_listings(recs):
    assert "path" not in ch05.recordings_view(recs).columns
    assert ch05.recordings_view(recs.iloc[:0]).data == "No recordings under `data/measured/` yet."
    assert ch05.recordings_glue(recs) == {"recs_n": len(recs), "recs_gpu": int((recs.backend != "cpu").sum())}
    assert ch05.recordings_glue(recs[recs.backend == "cpu"])["recs_gpu"] == 0
    assert ch05.recordings_glue(recs.iloc[:0]) == {"recs_n": 0, "recs_gpu": 0}
    chk = recordings("gpu-check")
    assert gpucheck.newest_check(chk.iloc[:0]) is None and ch05.timer_table(None) is None
    assert "run `make gpu-check`" in ch05.gpu_check_view(chk.iloc[:0], None)[0].data
    if len(chk):
        newest = gpucheck.newest_check(chk)
        view = ch05.gpu_check_view(chk, newest)
        assert "path" not in view[0].columns and view[1].data == ch05.demote_headings(newest[1])
        assert not any(line.startswith(("# ", "## ", "### ")) for line in view[1].data.splitlines())
        assert ch05.timer_table(newest) is newest[2].get("timer")


def test_main_recording_and_its_tables(recs, rec):
    gpu = recs[recs.backend != "cpu"]
    if len(gpu):
        assert rec.manifest["backend"] != "cpu"
    assert rec.label.count(" · ") == 3 and rec.m0.a == 0 and rec.m0.c == 0
    g = ch05.regime_glue(rec)
    assert (g["rg_b0"], g["rg_beta0"], g["rg_a1"]) == (rec.m0.b, rec.m0.beta, rec.m1.a)
    assert g["rg_ns0"] == pytest.approx(rec.m0.n_star) and g["rg_flat_fold"] == g["rg_flat_hi"] / 2
    assert g["rg_err0"] == pytest.approx(100 * rec.fits["max_affine_no_intercept"]["error"])
    assert ch05.cpu_roofline_note(rec) == [] or rec.manifest["backend"] == "cpu"
    assert "error %" in ch05.fits_table(rec).columns and set(ch05.fits_table(rec).index) == set(rec.fits)
    assert list(ch05.table6_paper().columns)[1:3] == ["b (paper)", "beta (paper)"]
    assert ch05.recording_fits_view(recording_fits(recs.iloc[:0])).data == "no recordings"
    sp = ch05.grid_spreads(rec)
    assert list(ch05.spread_summary(sp).columns) == ["count", "median", "max"]
    ci, numbers, words = ch05.bootstrap_glue(rec, 5)
    assert list(ci.columns) == ["2.5%", "median", "97.5%"] and list(ci.index) == ["a", "b", "c", "beta", "n_star"]
    assert numbers["bt_b_lo"] == ci.loc["b", "2.5%"] and numbers["bt_ns_hi"] == ci.loc["n_star", "97.5%"]
    assert words["bt_identifies"] == ch05.identified(ci)
    # the operating-range sentence: its numbers where the grid has two G in 9-20, the reason where not
    op = words["bt_op_words"]
    assert "nan" not in op and (("cannot be bootstrapped" in op) == (numbers["bt_corr_op"] != numbers["bt_corr_op"]))
    assert words["bt_G"] == ", ".join(str(int(g)) for g in sorted(rec.samples[rec.samples.kind == "grid"].G.unique()))
    tile = ch05.tile_sweep_view(rec, "smoke")
    assert len(tile) in (1, 4)


def test_the_cpu_branches_of_the_prose(rec):
    cpu = dataclasses.replace(rec, manifest={**rec.manifest, "backend": "cpu"})
    note = ch05.cpu_roofline_note(cpu)
    assert len(note) == 1 and note[0].data.startswith(f"This CPU, {rec.manifest['shape']} at float32: ")
    tile = ch05.tile_sweep_view(cpu, "smoke")
    if len(tile) > 1:
        assert tile[1].data.startswith("Tile sweep: tile-blind model error ")
    empty = dataclasses.replace(rec, samples=rec.samples.assign(kind=rec.samples.kind.replace("tile", "grid")))
    assert ch05.tile_sweep_view(empty, "smoke")[0].data == "This recording has no tile sweep."
    with pytest.raises(ValueError, match="no recording"):
        ch05.main_recording(pd.DataFrame(columns=["backend", "shape", "path"]))


# ---------------------------------------------------------------------------- the H200 prediction, checked
def test_h200_prediction_is_chapter_98s():
    from tempo.book.chapters import ch98_reproduction_map as ch98

    pred = ch05.h200_prediction()
    exp = ch98.expected_floors(hbm_tb_s=4.8).set_index("shape")
    assert pred.loc["dsv3", "b_lo_us"] == exp.loc["dsv3", "expected b, low (us)"]
    n = ch05.prediction_numbers(pred)
    # the numbers the introduction quotes: 9.2 us roofline, b 10.4-11.4 us, n* 110-120
    assert (round(n["pred_dsv3_roof"], 1), round(n["pred_dsv3_b_lo"], 1), round(n["pred_dsv3_b_hi"], 1)) == (9.2, 10.4, 11.4)
    assert (round(n["pred_dsv3_n_lo"]), round(n["pred_dsv3_n_hi"])) == (110, 120)


def test_prediction_check_on_the_h200_recordings(recs):
    table, text = ch05.prediction_check(recs)
    if not (recs.backend == "deep_gemm").any():
        assert table.empty and "unchecked" in text
        return
    t = table.set_index(["recording", "form"])
    tile = t.loc[("2026-11-30-deep_gemm-dsv3", "tile-aware (Eq. 2)")]
    zero = t.loc[("2026-11-30-deep_gemm-dsv3", "Table 6 form (Eq. 1, a = c = 0)")]
    # the recording's own fit.json holds the same fits
    import json

    fj = json.loads((MEASURED / "nvidia-h200" / "2026-11-30-deep_gemm-dsv3" / "fit.json").read_text())
    assert tile["b (us)"] == pytest.approx(fj["tile"]["params"]["b"], rel=1e-3)
    assert tile["n*"] == pytest.approx(fj["tile"]["params"]["n_star"], rel=1e-3)
    assert zero["b (us)"] == pytest.approx(fj["max_affine_no_intercept"]["params"]["b"], rel=1e-3)
    # tile-aware b = 11.42 us, n* = 113: inside 10.4-11.4 / 110-120 as printed; the Table 6 form is not
    assert round(tile["b (us)"], 2) == 11.42 and round(tile["n*"]) == 113 and tile["b held"] and tile["n* held"]
    assert round(zero["b (us)"], 1) == 16.1 and round(zero["n*"]) == 182 and not zero["b held"]
    assert tile["grid cells (of 117)"] == 26 and tile.cells == 58
    assert set(table.form) == {lbl for _, lbl in ch05.PREDICTION_FORMS} and len(table) % 3 == 0
    held = table[table["b held"] & table["n* held"]]
    assert list(held.recording) == ["2026-11-30-deep_gemm-dsv3"]  # only the tile fit of the tile-sweep recording
    assert text == (f"Held: tile-aware (Eq. 2) of 2026-11-30-deep_gemm-dsv3; {len(table) - 1} of {len(table)} fits "
                    "missed.")
    empty, words = ch05.prediction_check(recs.iloc[:0])
    assert empty.empty and "unchecked" in words


def test_prediction_range_is_read_as_printed():
    assert ch05._inside(11.42, 10.3678, 11.3770, 1) and not ch05._inside(11.46, 10.3678, 11.3770, 1)
    assert ch05._inside(109.6, 109.71, 120.39, 0) and not ch05._inside(109.4, 109.71, 120.39, 0)
    assert not ch05._inside(float("nan"), 0, 1, 1)


def test_coverage_table_and_text(recs):
    cov = ch05.coverage_table(recs)
    assert len(cov) == len(recs) and (cov["grid cells (of 117)"] <= 117).all()
    row = cov.set_index("recording").loc["2026-11-30-deep_gemm-dsv3"]
    assert (row.G, row["tokens per expert"], row["tile cells"], row.generation, row["Appendix B grid"]) == \
        ("1, 8", "1-4096", 32, "Hopper", "partial")
    numbers, words = ch05.coverage_glue(cov)
    assert (numbers["cov_grid"], numbers["cov_full"], numbers["cov_recs"]) == (117, 0, len(cov))
    assert numbers["cov_top_cells"] == cov["grid cells (of 117)"].max() and words["cov_top"].startswith(
        cov.loc[cov["grid cells (of 117)"].idxmax(), "recording"])
    numbers, words = ch05.coverage_glue(cov.iloc[:0])
    assert numbers["cov_recs"] == 0 and words["cov_top"] == "no recording" and numbers["cov_top_cells"] != numbers["cov_top_cells"]


def test_preset_plan_view():
    table, numbers, words = ch05.preset_plan()
    assert list(table.part) == [1, 2, 3, 4] and (table.est_s <= 360).all() and table.cells.sum() == 894
    assert (numbers["plan_cells"], numbers["plan_parts"], numbers["plan_part_min"]) == (894, 4, 6)
    assert numbers["plan_total_min"] == pytest.approx(table.est_s.sum() / 60, abs=0.1) and words["plan_sources"]


def test_demote_headings_keeps_code_and_caps_the_depth():
    md = "# gpu-check on X\ntext #1\n## env\n```\n# a comment\n```\n##### deep\n#tag"
    assert ch05.demote_headings(md).splitlines() == [
        "#### gpu-check on X", "text #1", "##### env", "```", "# a comment", "```", "###### deep", "#tag"]


def test_identified_says_when_the_grid_does_not_pin_b():
    import pandas as pd

    ci = pd.DataFrame({"2.5%": [0, 0.0, 0, 0.09, 0], "median": [5, 8.0, 5, 0.1, 80], "97.5%": [9, 12.48, 9, 0.11, 104]},
                      index=["a", "b", "c", "beta", "n_star"])
    assert ch05.identified(ci) == "beta, not b"
    tight = ci.assign(**{"2.5%": [0, 7.9, 0, 0.099, 79], "97.5%": [9, 8.1, 9, 0.101, 81]})
    assert ch05.identified(tight) == "both b and beta"
    assert ch05.identified(ci.assign(**{"2.5%": [0, 7.9, 0, 0.0, 79], "97.5%": [9, 8.1, 9, 0.3, 81]})) == "b, not beta"
    assert ch05.identified(ci.assign(**{"2.5%": [0, 0.0, 0, 0.0, 79]}).assign(**{"97.5%": [9, 30, 9, 0.3, 81]})) == "neither"


def test_the_running_example_repriced(recs):
    import tempo

    # under the toy's own model the page's numbers are chapter 01's; a model equal to it changes nothing
    own = tempo.CostModel(a=0.0, b=15.0, c=0.0, beta=0.1)
    table, n = ch05.toy_repriced(own, "same")
    assert n["toy5_token_lp"] == n["toy5_token_lp_own"] == 105.0 and n["toy5_metro_own"] == 69.0
    assert n["toy5_tempo_own"] == n["toy5_tempo"] == pytest.approx(60.0) and n["toy5_ratio_own"] == pytest.approx(1.75)
    assert n["toy5_tempo_hot_gpus"] == 2 and ch05.toy_repriced_words(n)["toy5_hot"] == "still splits the hot expert over 2 GPUs"
    # the fp8 H200 DSv3 recording's tile-aware fit: a split of the 600-token hot expert costs a tile
    # and a floor more, so tempo and the exact optimum keep it whole (hot + one cold against five cold)
    model, label = ch05.calibrated_h200(recs)
    table, n = ch05.toy_repriced(model, label)
    assert model.b2 > 0 and n["toy5_tempo"] == pytest.approx(n["toy5_milp"]) and n["toy5_tempo_hot_gpus"] == 1
    import numpy as np

    five_cold = model.time(np.array([5.0]), np.array([150.0]), np.array([5.0]))[0]   # 5 experts, 150 tokens, 5 tiles
    hot_and_cold = model.time(np.array([2.0]), np.array([630.0]), np.array([6.0]))[0]  # 600 (5 tiles) + 30 (1 tile)
    assert n["toy5_tempo"] == pytest.approx(max(five_cold, hot_and_cold), rel=1e-9)
    assert n["toy5_tempo"] < n["toy5_metro"] < n["toy5_token_lp"] and table.loc["token_lp", "busiest GPU's experts"] == 7
    with pytest.raises(ValueError, match="deep_gemm"):
        ch05.calibrated_h200(recs[recs.backend == "cpu"])


def test_the_running_example_tile_effect(recs):
    import tempo

    # the H200 fit keeps the hot expert whole; without its tile cost the same fit splits it again
    model, _ = ch05.calibrated_h200(recs)
    n, w = ch05.toy_tile_effect(model)
    assert n["toy5_notile_hot_gpus"] == 2 and w["toy5_tile_effect"].endswith("instead (55.7 us): the tiles decide this split")
    assert "$" not in w["toy5_tile_effect"] and n["toy5_notile_tempo"] < ch05.toy_repriced(model, "x")[1]["toy5_tempo"]
    # a model with no tiles: dropping them changes nothing
    n, w = ch05.toy_tile_effect(tempo.CostModel(a=0.0, b=15.0, c=0.0, beta=0.1))
    assert n == {"toy5_notile_tempo": 60.0, "toy5_notile_hot_gpus": 2} and w["toy5_tile_effect"].endswith("also runs it on 2 GPUs (60.0 us): the tiles do not decide this split")
