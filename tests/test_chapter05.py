"""Chapter 05's page functions (tempo.book.chapters.ch05_calibration) on the recordings under
data/measured/, and on a recording relabelled as a CPU one (the prose's CPU branches)."""
import dataclasses

import pandas as pd
import pytest
from IPython.display import Markdown

from tempo.benchmarks import gpucheck
from tempo.book.chapters import ch05_calibration as ch05
from tempo.calib.record import recording_fits, recordings


@pytest.fixture(scope="module")
def recs():
    r = recordings()
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
    chk = gpucheck.checks()
    assert gpucheck.newest_check(chk.iloc[:0]) is None and ch05.timer_table(None) is None
    assert "run `make gpu-check`" in ch05.gpu_check_view(chk.iloc[:0], None)[0].data
    if len(chk):
        newest = gpucheck.newest_check(chk)
        view = ch05.gpu_check_view(chk, newest)
        assert "path" not in view[0].columns and view[1].data == newest[1]
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
