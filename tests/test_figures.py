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
