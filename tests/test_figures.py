import pandas as pd
import pytest

from tempo import experiments, figures


@pytest.mark.needs('altair', 'vl_convert')
def test_chart_html_is_offline_and_has_static_copy(tmp_path, monkeypatch):
    from tempo import paths

    monkeypatch.setattr(paths, "BUILD", tmp_path)
    df = experiments.run("toy_sweep", {"b_values": [0.0, 15.0], "beta_values": [0.1, 0.2]}, "smoke")
    chart = figures.toy_explorer(df)
    html = figures.chart_html(chart)
    assert "vegaEmbed" in html and "cdn" not in html.lower() and "<svg" in html
    assert "tempo-chart-static" in html
    # sliders are bound to both parameters
    spec = chart.to_dict()
    assert {p["name"] for p in spec["params"]} == {"b_us", "beta_us"}


@pytest.mark.needs('altair', 'vl_convert')
def test_toy_winner_map_never_below_one(tmp_path, monkeypatch):
    from tempo import paths

    monkeypatch.setattr(paths, "BUILD", tmp_path)
    df = experiments.run("toy_sweep", {"b_values": [0.0, 10.0, 30.0], "beta_values": [0.02, 0.3]}, "smoke")
    tempo_ms = df[df.policy == "tempo"].set_index(["b", "beta"]).makespan_us
    best_proxy = df[df.policy != "tempo"].groupby(["b", "beta"]).makespan_us.min()
    assert (best_proxy >= tempo_ms * (1 - 1e-9)).all()
    figures.toy_winner_map(df).to_dict()


def test_paper_table_charts_draw_every_cell_and_reject_wrong_frames():
    import pytest

    from tempo import paper

    for number, builder, n_cells in [(5, figures.table5_attribution, 6 * 4), (11, figures.table11_topology, 3 * 6),
                                     (3, figures.table3_measured, 7 * 2)]:
        spec = builder(paper.table(number)).to_dict()
        values = next(iter(spec["datasets"].values()))
        assert len(values) == n_cells, number
    t5 = figures.table5_attribution(paper.table(5)).to_dict()
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
    with pytest.raises(ValueError, match="no cells"):
        figures.fig6_phase(phase, shape="Qwen3-30B")
    scale = pd.DataFrame({"ep": [8, 32], "skew": [0.0, 1.2], "B": [16, 16], "gain_pct": [0.0, 5.0]})
    assert len(next(iter(figures.fig12_scale(scale).to_dict()["datasets"].values()))) == 2
    with pytest.raises(ValueError, match="columns"):
        figures.fig12_scale(pd.DataFrame({"ep": [8]}))


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
    assert sorted(r["MILP"] for r in rows) == ["reported optimal", "reported optimal", "time limit"]
    assert spec["facet"]["column"]["field"] == "replication"
    assert set(spec["spec"]["encoding"]) == {"x", "y", "color", "shape", "tooltip"}
    with pytest.raises(ValueError, match="solver_vs_milp"):
        figures.solver_vs_milp(svm.drop(columns="ratio"))
