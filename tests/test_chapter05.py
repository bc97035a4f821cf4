"""Chapter 05's page functions (tempo.book.chapters.ch05_calibration) on the recordings under
data/measured/, and on a recording relabelled as a CPU one (the prose's CPU branches)."""
import dataclasses

import pandas as pd
import pytest
from IPython.display import Markdown

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
    view = ch05.recordings_view(recs)
    assert "path" not in view[0].columns and isinstance(view[1], Markdown)
    assert ch05.recordings_view(recs.iloc[:0])[0].data == "No recordings under `data/measured/` yet."
    assert ch05.recordings_view(recs[recs.backend == "cpu"])[-1].data.startswith("**No GPU recording exists yet**")
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
    assert ch05.regime_text(rec).startswith("Fitted on the whole grid in the paper's Table 6 form (a = c = 0): b = ")
    assert ch05.cpu_roofline_note(rec) == [] or rec.manifest["backend"] == "cpu"
    assert "error %" in ch05.fits_table(rec).columns and set(ch05.fits_table(rec).index) == set(rec.fits)
    assert list(ch05.table6_paper().columns)[1:3] == ["b (paper)", "beta (paper)"]
    assert ch05.recording_fits_view(recording_fits(recs.iloc[:0])).data == "no recordings"
    sp = ch05.grid_spreads(rec)
    assert list(ch05.spread_summary(sp).columns) == ["count", "median", "max"]
    view = ch05.bootstrap_view(rec, 5)
    assert list(view[0].columns) == ["2.5%", "median", "97.5%"] and list(view[0].index) == ["a", "b", "c", "beta", "n_star"]
    tile = ch05.tile_sweep_view(rec, "smoke")
    assert len(tile) in (1, 4)


def test_the_cpu_branches_of_the_prose(rec):
    cpu = dataclasses.replace(rec, manifest={**rec.manifest, "backend": "cpu"})
    note = ch05.cpu_roofline_note(cpu)
    assert len(note) == 1 and "The same check on this recording's CPU" in note[0].data
    tile = ch05.tile_sweep_view(cpu, "smoke")
    if len(tile) > 1:
        assert "A CPU matrix product has no 128-row tiles" in tile[1].data
    empty = dataclasses.replace(rec, samples=rec.samples.assign(kind=rec.samples.kind.replace("tile", "grid")))
    assert ch05.tile_sweep_view(empty, "smoke")[0].data == "This recording has no tile sweep."
    with pytest.raises(ValueError, match="no recording"):
        ch05.main_recording(pd.DataFrame(columns=["backend", "shape", "path"]))


# ---------------------------------------------------------------------------- the H200 prediction, checked (issue 24)
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
    assert text.startswith("The prediction held for the tile-aware (Eq. 2) fit of 2026-11-30-deep_gemm-dsv3, and for "
                           f"none of the {len(table) - 1} other fits.")
    assert "b = 11.42 us, n* = 113, error 5.3% (held)" in text and "b = 16.12 us, n* = 182" in text
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
    text = ch05.coverage_text(cov)
    assert f"0 of the {len(cov)} recordings hold all of it" in text and "117 cells per shape and kernel" in text
    assert "No calibration recording exists" in ch05.coverage_text(cov.iloc[:0])


def test_preset_plan_view():
    table, text = ch05.preset_plan()
    assert list(table.part) == [1, 2, 3, 4] and (table.est_s <= 360).all() and table.cells.sum() == 894
    assert "planned as 4 parts of at most 6 minutes" in text and "--part K/4" in text


def test_demote_headings_keeps_code_and_caps_the_depth():
    md = "# gpu-check on X\ntext #1\n## env\n```\n# a comment\n```\n##### deep\n#tag"
    assert ch05.demote_headings(md).splitlines() == [
        "#### gpu-check on X", "text #1", "##### env", "```", "# a comment", "```", "###### deep", "#tag"]


def test_identified_text_says_when_the_grid_does_not_pin_b():
    import pandas as pd

    ci = pd.DataFrame({"2.5%": [0, 0.0, 0, 0.09, 0], "median": [5, 8.0, 5, 0.1, 80], "97.5%": [9, 12.48, 9, 0.11, 104]},
                      index=["a", "b", "c", "beta", "n_star"])
    text = ch05.identified_text(ci, [1, 8])
    assert "has only G = 1, 8, and it does not identify b (b anywhere in 0.00-12.48 us, n* in 0-104)" in text
    tight = ci.assign(**{"2.5%": [0, 7.9, 0, 0.099, 79], "97.5%": [9, 8.1, 9, 0.101, 81]})
    assert ch05.identified_text(tight, [1, 2, 4, 8, 13, 20, 40]).startswith("This recording's grid (G = 1, 2, 4, 8, 13, 20, 40) identifies both")
