import pandas as pd
import pytest

from tempo import studies as experiments
from tempo.book import figures


@pytest.mark.needs('altair', 'vl_convert')
def test_chart_html_is_offline_and_has_static_copy(tmp_path, monkeypatch):
    from tempo.core import paths

    monkeypatch.setattr(paths, "BUILD", tmp_path)
    df = experiments.run("toy_sweep", {"b_values": [0.0, 15.0], "beta_values": [0.1, 0.2]}, "smoke")
    chart = figures.toy_explorer(df)
    html = figures.chart_html(chart)
    assert "vegaEmbed" in html and "cdn" not in html.lower() and "<svg" in html
    assert "tempo-chart-static" in html
    # sliders are bound to both parameters
    spec = chart.to_dict()
    assert {p["name"] for p in spec["params"]} == {"b_us", "beta_us"}
    # the beta slider speaks the chapter's unit (us per token) and ranges over the sweep's betas
    beta = next(p for p in spec["params"] if p["name"] == "beta_us")
    assert beta["bind"]["name"].strip() == "beta (us per token)"
    assert (beta["bind"]["min"], beta["bind"]["max"], beta["value"]) == (0.1, 0.2, 0.1)


@pytest.mark.needs('altair', 'vl_convert')
def test_toy_winner_map_never_below_one(tmp_path, monkeypatch):
    from tempo.core import paths

    monkeypatch.setattr(paths, "BUILD", tmp_path)
    df = experiments.run("toy_sweep", {"b_values": [0.0, 10.0, 30.0], "beta_values": [0.02, 0.3]}, "smoke")
    tempo_ms = df[df.policy == "tempo"].set_index(["b", "beta"]).makespan_us
    best_proxy = df[df.policy != "tempo"].groupby(["b", "beta"]).makespan_us.min()
    assert (best_proxy >= tempo_ms * (1 - 1e-9)).all()
    figures.toy_winner_map(df).to_dict()


def test_paper_table_charts_draw_every_cell_and_reject_wrong_frames():
    import pytest

    from tempo.paper import tables

    for number, builder, n_cells in [(5, figures.table5_attribution, 6 * 4), (11, figures.table11_topology, 3 * 6),
                                     (3, figures.table3_measured, 7 * 2)]:
        spec = builder(tables.table(number)).to_dict()
        values = next(iter(spec["datasets"].values()))
        assert len(values) == n_cells, number
    t5 = figures.table5_attribution(tables.table(5)).to_dict()
    rows = next(iter(t5["datasets"].values()))
    hit = [r for r in rows if r["workload"].startswith("decode-heavy") and r["variant"] == "hier"]
    assert hit[0]["pct"] == 7.2
    with pytest.raises(ValueError, match="workload"):
        figures.table5_attribution(pd.DataFrame({"x": [1]}))
    with pytest.raises(ValueError, match="requests"):
        figures.table11_topology(pd.DataFrame({"x": [1]}))
    with pytest.raises(ValueError, match="columns"):
        figures.table3_measured(pd.DataFrame({"B": [1]}))


def test_simulator_figure_builders_on_small_frames():
    import pytest

    mixed = pd.DataFrame({"tokens_per_gpu": [16, 16, 512, 512], "mixed": [True, False, True, True],
                          "flat_expert_share": [0.5, 0.7, 0.4, 0.5], "linear_token_share": [0.2, 0.1, 0.9, 0.92]})
    rows = next(iter(figures.fig5_mixed(mixed).to_dict()["datasets"].values()))
    got = {(r["tokens_per_gpu"], r["quantity"]): r["percent"] for r in rows}
    assert got[(16, "mixed batches")] == 50.0 and got[(512, "tokens in linear-region experts")] == pytest.approx(91.0)
    phase = pd.DataFrame({"shape": "DSv3", "replication": [1.25, 1.25, 1.5], "skew": [0.0, 1.2, 0.0],
                          "B": [16, 16, 16], "winner": ["M", "L", "E"], "gain_pct": [1.0, 2.0, 3.0]})
    cells = next(iter(figures.fig6_phase(phase).to_dict()["datasets"].values()))
    assert len(cells) == 2 and {c["winner"] for c in cells} == {"M", "L"}
    # the letters: white on the darker half of the green scale (gain above the midpoint 1.5), near-black below
    letters = figures.fig6_phase(phase).to_dict()["layer"][1]["encoding"]["color"]
    assert letters["condition"] == {"test": "datum.gain_pct > 1.5", "value": "#ffffff"} and letters["value"] == "#111111"
    with pytest.raises(ValueError, match="no cells"):
        figures.fig6_phase(phase, shape="Qwen3-30B")
    scale = pd.DataFrame({"ep": [8, 32], "skew": [0.0, 1.2], "B": [16, 16], "gain_pct": [0.0, 5.0]})
    assert len(next(iter(figures.fig12_scale(scale).to_dict()["datasets"].values()))) == 2
    with pytest.raises(ValueError, match="columns"):
        figures.fig12_scale(pd.DataFrame({"ep": [8]}))


def _datasets(chart):
    """Every row of every inline dataset of a chart spec."""
    return [r for rows in chart.to_dict()["datasets"].values() for r in rows]


def _fake_recording():
    """A calibration recording with a known max-affine truth: t = max(10 G, 0.1 N) us, plus a
    tile sweep at G = 2 with a 20% step after each 128 tokens."""
    import numpy as np

    rows = []
    for G in (1, 2, 4, 8):
        for n in (1, 4, 16, 64, 256, 1024):
            rows.append({"G": G, "n": n, "N": G * n, "T": G * int(np.ceil(n / 128)), "kind": "grid",
                         "t_us": max(10.0 * G, 0.1 * G * n)})
    for n in (120, 128, 129, 200, 256, 257):
        tiles = int(np.ceil(n / 128))
        rows.append({"G": 2, "n": n, "N": 2 * n, "T": 2 * tiles, "kind": "tile", "t_us": 20.0 * (1 + 0.2 * (tiles - 1))})
    return pd.DataFrame(rows)


def test_calibration_figure_builders_on_a_known_recording():
    import pytest

    from tempo import CostModel
    from tempo.paper import tables
    from tempo.calib import proxy_spreads

    S = _fake_recording()
    truth = CostModel(0.0, 10.0, 0.0, 0.1)
    rows = _datasets(figures.fig2_regimes(S, {"truth": truth}, "fake"))
    measured = [r for r in rows if "t_us" in r]
    assert sorted(r["n"] for r in measured) == [1, 4, 16, 64, 256, 1024]  # G = 1 grid cells only
    line = {r["n"]: r["t"] for r in rows if r.get("fit") == "truth"}
    assert line[1.0] == pytest.approx(10.0) and line[1024.0] == pytest.approx(102.4)
    a, b = figures.fig3_g_driven(S, "fake").to_dict()["vconcat"]   # one panel above the other: fits the column
    assert {r["G"] for r in _datasets(figures.fig3_g_driven(S))} == {1, 2, 4, 8}
    fine = figures.tile_window(S)
    assert set(fine.G) == {2} and fine.n.between(100, 400).all() and 256 in set(fine.n)  # grid cell inside the window
    fig4 = figures.fig4_tile_staircase(fine, truth, truth)
    rows = _datasets(fig4)
    # the lines take the facet's rows (no data of their own), so a panel draws only its own G
    assert "data" not in fig4.to_dict()["spec"]["layer"][0]
    assert {r["series"] for r in rows if "series" in r} == {"measured", "tile-blind (Eq. 1)", "tile-aware (Eq. 2)"}
    with pytest.raises(ValueError, match="tile sweep"):
        figures.fig4_tile_staircase(figures.tile_window(S[S.kind == "grid"]), truth, truth)
    sp = proxy_spreads(S[S.kind == "grid"])
    rows = _datasets(figures.fig9_proxy_spreads(sp, tables.figure(9)))
    ours = {r["set"]: r["value"] for r in rows if r["source"] == "this artifact"}
    # same G = 1, n from 1 to 1024: 102.4 / 10 = 10.24x on the known truth
    assert ours["same G, different N"] == pytest.approx(sp[sp.set == "same G, different N"].spread.max())
    assert max(sp[sp.set == "same G, different N"].spread) == pytest.approx(102.4 / 10.0)
    assert {r["value"] for r in rows if r["source"].startswith("paper")} == {2.5, 7.6, 18.0, 24.0}
    # every bar of the log-scale chart has a width (its baseline is a spread of 1x, not 0)
    import re

    import vl_convert as vlc

    svg = vlc.vegalite_to_svg(figures.fig9_proxy_spreads(sp, tables.figure(9)).to_dict())
    bars = re.search(r'class="mark-rect role-mark[^"]*"[^>]*>(.*?)</g>', svg, re.S).group(1)
    widths = [float(w) for w in re.findall(r'd="M[-\d.e]+,[-\d.e]+h([-\d.e]+)v', bars)]
    assert len(widths) == 6 and min(widths) > 1, widths
    with pytest.raises(ValueError, match="lacks columns"):
        figures.fig2_regimes(pd.DataFrame({"G": [1]}), {})


def test_paper_figure_frames_cite_the_paper_and_draw_every_number():
    import re

    import pytest

    from tempo.paper import tables

    import os
    from pathlib import Path

    # the paper's text, where a checkout has it (not shipped): TEMPO_PAPER_TEXT=/path/to/tempo-paper.txt
    text = Path(os.environ.get("TEMPO_PAPER_TEXT", "/nonexistent"))
    builders = {7: figures.fig7_wallclock, 8: figures.fig8_serving, 10: figures.fig10_stale_placement,
                11: figures.fig11_robustness, 13: figures.fig13_topology}
    for number, builder in builders.items():
        df = tables.figure(number)
        assert (df.figure == number).all()
        # every row states a number, and names its section and line
        assert (df[["value", "lo", "hi"]].notna().any(axis=1)).all(), number
        assert df.source.str.match(r"(Section \d|Fig\. \d+ caption)").all() and df.source.str.contains(r"line \d+").all()
        rows = _datasets(builder(df))
        assert len(rows) == len(df) and {r["who"] for r in rows} == {"paper"}
    got = tables.figure(13).set_index("policy").value
    assert got["tempo_hier"] == 4.1 and got["tempo_flat"] == -3.5 and got["lp"] == 4.0
    f11 = tables.figure(11).set_index(["panel", "policy"])
    assert (f11.loc[("a", "tempo"), "lo"], f11.loc[("a", "tempo"), "hi"]) == (549, 554)
    if text.is_file():  # the quoted sentence fragments are the paper's (unicode minus and dashes normalised)
        paper_txt = text.read_text().replace("\u2212", "-").replace("\u2013", "-")
        for number in builders:
            for src in tables.figure(number).source:
                for num in re.findall(r"[-+]?\d+\.\d+", src.split(":", 1)[1]):
                    assert num.lstrip("+") in paper_txt, (number, num)
    with pytest.raises(ValueError, match="figures"):
        figures.fig8_serving(tables.figure(7))
    with pytest.raises(ValueError, match="no paper figure"):
        tables.figure(12)


def test_epbench_and_servebench_points_known_answers():
    import math

    import pytest

    from tempo.paper import tables

    ep = pd.DataFrame({"step": [0, 0, 0, 0, 1, 1, 1, 1],
                       "policy": ["uniform", "token_lp", "metro", "tempo"] * 2,
                       "layer_us": [120.0, 100.0, 110.0, 90.0, 120.0, 100.0, 110.0, 90.0]})
    pts = figures.epbench_points(ep, "B=32").set_index(["metric", "policy"]).value
    assert pts[("off the best fixed policy", "token_lp")] == pytest.approx(0.0)
    assert pts[("off the best fixed policy", "uniform")] == pytest.approx(20.0)
    assert pts[("off the best fixed policy", "tempo")] == pytest.approx(-10.0)
    assert pts[("TEMPO's gain over the policy", "uniform")] == pytest.approx(25.0)
    with pytest.raises(ValueError, match="fixed policies"):
        figures.epbench_points(ep[ep.policy == "tempo"], "B=32")
    pairs = pd.DataFrame({"window": [0, 1, 2, 0], "workload": ["gov"] * 4, "policy": ["tempo"] * 3 + ["dynamic"],
                          "kept": [True, True, False, True], "throughput_delta_pct": [2.0, 6.0, 50.0, -1.0]})
    sb = figures.servebench_points(pairs).set_index("policy")
    assert sb.loc["tempo", "value"] == 4.0 and (sb.loc["tempo", "lo"], sb.loc["tempo", "hi"]) == (2.0, 6.0)
    assert math.isnan(sb.loc["dynamic", "lo"])  # one window: no range
    rows = _datasets(figures.fig13_topology(tables.figure(13), figures.servebench_points(pairs)))
    assert {r["who"] for r in rows} == {"paper", "this artifact"} and len(rows) == len(tables.figure(13)) + 2


def test_runtime_and_epbench_charts_on_small_frames():
    import pytest

    live = pd.DataFrame({"t_s": [0.0, 0.1, 0.2], "table_vs_uniform": [1.0, 0.9, 0.85], "tables_published": [0, 1, 2]})
    assert [r["table_vs_uniform"] for r in _datasets(figures.live_vs_uniform(live))] == [1.0, 0.9, 0.85]
    summ = pd.DataFrame({"measured_vs_static": [1.0, 0.9], "model_vs_static": [1.0, 0.8]},
                        index=pd.Index(["static", "tempo"], name="policy"))
    rows = _datasets(figures.epbench_model_vs_measured(summ, "4 gloo ranks"))
    got = {(r["policy"], r["series"]): r["vs static"] for r in rows}
    assert got == {("static", "measured_vs_static"): 1.0, ("tempo", "measured_vs_static"): 0.9,
                   ("static", "model_vs_static"): 1.0, ("tempo", "model_vs_static"): 0.8}
    with pytest.raises(ValueError, match="live_run"):
        figures.live_vs_uniform(pd.DataFrame({"t_s": [0.0]}))


def test_recording_choice_fits_and_roofline_table(tmp_path):
    import json

    import pytest

    from tempo.calib.record import recording_fits
    from tempo.measured.catalog import pick as pick_recording
    from tempo.measured.catalog import recordings
    from tempo.calib.shapes import roofline_table, shape

    S = _fake_recording().query("kind == 'grid'")  # the grid follows the known truth exactly
    for name, backend, date in (("dsv3-gpu", "deep_gemm", "2026-01-02"), ("dsv3-cpu", "cpu", "2026-01-03")):
        d = tmp_path / "m" / name
        d.mkdir(parents=True)
        S.to_csv(d / "samples.csv.gz", index=False)
        (d / "fit.json").write_text("{}")
        (d / "manifest.json").write_text(json.dumps({"backend": backend, "shape": "dsv3", "date": date, "cells": len(S),
                                                     "device": "x", "machine": "m"}))
    recs = recordings("calibration", root=tmp_path)
    assert pick_recording(recs, "dsv3").backend == "deep_gemm"  # a GPU recording wins over a newer CPU one
    assert pick_recording(recs[recs.backend == "cpu"], "dsv3").backend == "cpu"
    assert pick_recording(recs, "qwen3-30b") is None
    fits = recording_fits(recs)
    # the known truth t = max(10 G, 0.1 N): b = 10 us, beta = 0.1 us/token, n* = 100
    assert len(fits) == 2 and fits.b_us.iloc[0] == pytest.approx(10.0, rel=1e-3)
    assert fits.beta_us_per_tok.iloc[0] == pytest.approx(0.1, rel=1e-3) and fits.fit_err_pct.iloc[0] < 0.1
    rt = roofline_table(("dsv3",), hbm_tb_s=4.8).iloc[0]
    assert rt["expert MB (fp8)"] == pytest.approx(shape("dsv3").bytes(1.0) / 1e6)
    assert rt["roofline b at 4.8 TB/s (us)"] == pytest.approx(shape("dsv3").bytes(1.0) / 4.8e12 * 1e6)


def test_fig2b_shapes_paper_and_recordings():
    import pytest

    from tempo.paper import tables

    ours = pd.DataFrame({"shape": ["dsv3"], "backend": ["deep_gemm"], "device": ["NVIDIA H200"], "b_us": [11.0],
                         "n_star": [115.0]})
    rows = _datasets(figures.fig2b_shapes(tables.table(6), ours))
    got = {(r["shape"], r["who"], r["quantity"]): r["value"] for r in rows}
    assert got[("dsv3", "paper (Testbed A)", "floor b (us)")] == 14.78
    assert got[("dsv3", "this artifact: NVIDIA H200 deep_gemm", "inflection n* (tokens)")] == 115.0
    assert len(rows) == 2 * (len(tables.table(6)) + 1)
    with pytest.raises(ValueError, match="table\\(6\\)"):
        figures.fig2b_shapes(pd.DataFrame({"shape": ["x"]}))


def test_thm2_probe_and_solver_vs_milp_builders_on_small_frames():
    import pytest

    probe = pd.DataFrame({"kind": ["zipf", "giant"], "params": ["dsv3-offline"] * 2, "experts": [8, 8],
                          "n_gpus": [2, 4], "tokens": [100, 400], "rr_over_opt_min": [1.1, 3.9],
                          "rr_over_bound_lo": [0.9, 0.99], "extra": [0, 0]})
    spec = figures.thm2_probe(probe).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert len(rows) == 2 and "extra" not in rows[0] and spec["encoding"]["x"]["scale"]["type"] == "log"
    with pytest.raises(ValueError, match="thm2_probe"):
        figures.thm2_probe(probe.drop(columns="kind"))
    svm = pd.DataFrame({"tokens_per_gpu": [16, 16, 64], "skew": [0.0, 1.2, 1.2], "replication": [1.25, 1.5, 1.5],
                        "ratio": [1.0, 0.97, 1.01], "milp_optimal": [True, False, True], "chosen": ["local_search"] * 3,
                        "tempo_ms": [0.1, 0.2, 0.3]})
    spec = figures.solver_vs_milp(svm).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert sorted(r["MILP"] for r in rows) == ["proved optimal", "proved optimal", "stopped at its time limit"]
    assert spec["facet"]["column"]["field"] == "replication"
    assert set(spec["spec"]["encoding"]) == {"x", "y", "color", "shape", "tooltip"}
    # the gap in %: against the optimum where proven, the incumbent ratio where no bound column is given
    assert sorted(r["gap"] for r in rows) == pytest.approx([-3.0, 0.0, 1.0])
    y = spec["spec"]["encoding"]["y"]
    assert y["axis"]["format"] == ".2f" and y["scale"]["domain"][0] < -3.0 and y["scale"]["domain"][1] > 1.0
    for channel in ("color", "shape"):                                   # legends below the panels, never clipped
        legend = spec["spec"]["encoding"][channel]["legend"]
        assert legend["orient"] == "bottom" and legend["labelLimit"] == 0
    # float noise reads 0, and an all-zero grid still gets an axis of whole ticks (0 to 0.1 %)
    noise = svm.assign(ratio=[1.0, 0.9999999999999996, 1.0000000000000002], milp_optimal=True,
                       ratio_to_lb=[1.5, 1.5, 1.5])
    spec = figures.solver_vs_milp(noise).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert [r["gap"] for r in rows] == [0.0, 0.0, 0.0]
    lo, hi = spec["spec"]["encoding"]["y"]["scale"]["domain"]
    assert lo < 0 < 0.1 < hi < 0.2
    # where the MILP stopped at its limit the gap is against its lower bound (the ledger's conservative ratio)
    rows = next(iter(figures.solver_vs_milp(noise.assign(milp_optimal=[True, True, False])).to_dict()["datasets"].values()))
    assert [r["gap"] for r in rows] == pytest.approx([0.0, 0.0, 50.0])
    with pytest.raises(ValueError, match="solver_vs_milp"):
        figures.solver_vs_milp(svm.drop(columns="ratio"))


def test_book_ext_drops_repeated_scripts_keeping_the_first():
    from tempo.book.sphinx_ext import unique_scripts

    class JS(str):
        def __new__(cls, filename, **attributes):
            o = super().__new__(cls, filename or "")
            o.filename, o.attributes = filename, attributes
            return o

    thebe = 'const THEBE_JS_URL = "x"; const thebe_selector = ".cell"'
    scripts = [JS("a.js"), JS(None, body=thebe), JS("sphinx-thebe.js", **{"async": "async"}),
               JS("", body=thebe), JS("sphinx-thebe.js", **{"async": "async"}), JS(None, body="other"), "b.js", "b.js"]
    got = unique_scripts(scripts)
    assert [(str(getattr(j, "filename", j)), getattr(j, "attributes", {}).get("body")) for j in got] == [
        ("a.js", None), ("None", thebe), ("sphinx-thebe.js", None), ("None", "other"), ("b.js", None)]
    assert len(unique_scripts([JS(None, body="x"), JS("", body="x")])) == 1   # None and "" are both inline


def test_fit_vs_measured_draws_points_and_the_fitted_lines():
    from tempo import CostModel
    from tempo.book.figures import fit_vs_measured

    s = pd.DataFrame({"G": [1, 1, 8, 8, 3], "n": [1, 512, 1, 512, 4], "N": [1, 512, 8, 4096, 12],
                      "t_us": [10.0, 60.0, 40.0, 400.0, 5.0], "kind": ["grid"] * 4 + ["tile"]})
    m = CostModel(0.0, 10.0, 0.0, 0.1)
    spec = fit_vs_measured(s, m, G=[1, 8], title="t").to_dict()
    rows = spec["datasets"][next(iter(spec["datasets"]))]
    assert [r["fitted (us)"] for r in rows] == pytest.approx([10.0, 51.2, 80.0, 409.6])   # max(bG, beta N)
    assert {l["mark"]["type"] if isinstance(l["mark"], dict) else l["mark"] for l in spec["layer"]} == {"point", "line"}
    with pytest.raises(ValueError, match="no grid cells"):
        fit_vs_measured(s, m, G=[3])
    with pytest.raises(ValueError, match="samples"):
        fit_vs_measured(s.drop(columns="kind"), m)


def test_fit_vs_measured_draws_each_fits_own_formula():
    """A tile-aware fit (Eq. 2) and a three-term fit (Eq. 4) are drawn with their own terms, not
    Eq. 1's two pieces: the known answers below differ from max(a + bG, c + beta N)."""
    from tempo import CostModel
    from tempo.book.figures import fit_vs_measured

    s = pd.DataFrame({"G": [1, 1, 8], "n": [100, 512, 300], "N": [100, 512, 2400], "T": [1, 4, 24],
                      "t_us": [10.0, 60.0, 400.0], "kind": ["grid"] * 3})

    def drawn(model, samples=s):
        spec = fit_vs_measured(samples, model, G=[1, 8]).to_dict()
        return [r["fitted (us)"] for r in spec["datasets"][next(iter(spec["datasets"]))]]

    tile = CostModel(a=1.0, b=10.0, c=0.0, beta=0.01, b2=5.0)
    # a + b G + b2 (T - G) against beta N: 11; 1 + 10 + 5 * 3 = 26; 1 + 80 + 5 * 16 = 161
    assert drawn(tile) == pytest.approx([11.0, 26.0, 161.0])
    # without a T column the tiles are G * ceil(n / 128): the same cells, the same answers
    assert drawn(tile, s.drop(columns="T")) == pytest.approx([11.0, 26.0, 161.0])
    three = CostModel(a=0.0, b=10.0, c=0.0, beta=0.01, c2=5.0, gamma=0.2)
    # max(b G, beta N, c2 + gamma N): 25 (traffic), 107.4 (traffic), 485 (traffic)
    assert drawn(three) == pytest.approx([25.0, 107.4, 485.0])
    plain = CostModel(a=0.0, b=10.0, c=0.0, beta=0.01)
    assert drawn(plain) == pytest.approx([10.0, 10.0, 80.0])


def test_repro_needs_counts_every_item_once():
    from tempo.book import repro
    from tempo.book.figures import repro_needs

    rmap = repro.load_map()
    spec = repro_needs(rmap).to_dict()
    rows = spec["datasets"][next(iter(spec["datasets"]))]
    assert len(rows) == len(rmap)
    assert {r["kind"] for r in rows} == {"Table", "Figure", "text or abstract"}
    assert sum(r["kind"] == "Table" for r in rows) == 11 and sum(r["kind"] == "Figure" for r in rows) == 13
    with pytest.raises(ValueError, match="rmap"):
        repro_needs(rmap.drop(columns="needs"))


def test_ledger_by_chapter_counts_claims_per_chapter_and_status():
    from tempo.book.figures import ledger_by_chapter

    df = pd.DataFrame({"chapter": ["01", "01", "02"], "status": ["reproduced", "reproduced", "deviates"]})
    spec = ledger_by_chapter(df).to_dict()
    rows = spec["datasets"][next(iter(spec["datasets"]))]
    assert sorted((r["chapter"], r["status"], r["claims"]) for r in rows) == [("01", "reproduced", 2), ("02", "deviates", 1)]
    with pytest.raises(ValueError, match="unknown statuses"):
        ledger_by_chapter(df.assign(status="maybe"))
