"""Calibration: grid planning, fitting (known answers on synthetic data), fp8 layouts, the CPU
backend and the recording format."""
import json

import numpy as np
import pytest
from conftest import optional_module

from tempo import CostModel
from tempo.calib import bootstrap, fit_cost_model, fit_error, plan_grid, proxy_spreads, roofline_us, shape
from tempo.calib.grid import log_ladder, tile_sweep, tiles


def _synthetic(model, seed, noise=0.05, G=range(1, 41), per_octave=2):
    g = plan_grid(G=G, fine=False, per_octave=per_octave)
    g["T"] = g.G * tiles(g.n)
    rng = np.random.default_rng(seed)
    g["t_us"] = model.time(g.G, g.N, g["T"]) * (1 + noise * rng.standard_normal(len(g)))
    return g


def test_fit_recovers_known_parameters_with_5pct_noise():
    """Table 7's DSv3 full-pipeline parameters, the full calibration grid (G 1..40 x tokens per
    expert 1..4096, two points per octave), 5% multiplicative noise: the median over seeds of
    each parameter's relative error is within 3% (a, b, c, beta) and within 5% for n*."""
    true = CostModel(a=358, b=16.59, c=266, beta=0.358)
    errs = []
    for seed in range(9):
        m = fit_cost_model(_synthetic(true, seed)).model
        errs.append([abs(getattr(m, k) / getattr(true, k) - 1) for k in ("a", "b", "c", "beta")]
                    + [abs(m.n_star / true.n_star - 1)])
    med = np.median(errs, axis=0)
    assert np.all(med[:4] < 0.03), med
    assert med[4] < 0.05, med


@pytest.mark.parametrize("params", ["dsv3-offline", "qwen3-30b-offline", "dsv3-bf16-offline"])
def test_zero_intercept_fit_recovers_table6(params):
    true = CostModel.named(params)
    for seed in range(3):
        f = fit_cost_model(_synthetic(true, seed), intercept=False)
        assert f.model.a == 0 and f.model.c == 0
        assert f.model.b == pytest.approx(true.b, rel=0.03)
        assert f.model.beta == pytest.approx(true.beta, rel=0.03)
        assert f.model.n_star == pytest.approx(true.n_star, rel=0.05)
        assert 0.03 < f.error < 0.05  # 5% Gaussian noise: mean |e| = 0.05 * sqrt(2/pi) = 0.040


def test_noise_free_fits_are_exact():
    true = CostModel.named("dsv3-testbedb-tile").without("traffic")
    s = _synthetic(true, 0, noise=0.0)
    f = fit_cost_model(s, "tile")
    assert f.error < 1e-6
    assert f.model.b2 == pytest.approx(true.b2, rel=1e-4)
    # both N-pieces active somewhere (the steeper one is reported as the traffic piece)
    three = CostModel(a=16.4, b=2.99, c=60.0, beta=0.0179, c2=5.0, gamma=0.10)
    f3 = fit_cost_model(_synthetic(three, 0, noise=0.0), "three_term")
    assert f3.error < 1e-3
    assert f3.model.gamma == pytest.approx(0.10, rel=1e-3) and f3.model.beta == pytest.approx(0.0179, rel=1e-2)
    assert f3.model.c2 == pytest.approx(5.0, rel=1e-2) and f3.model.c == pytest.approx(60.0, rel=1e-2)


def test_tile_term_cuts_error_on_a_staircase():
    true = CostModel.named("dsv3-testbedb-tile").without("traffic")
    g = plan_grid(G=[1, 4, 8], n_max=1024)
    g["T"] = g.G * tiles(g.n)
    g["t_us"] = true.time(g.G, g.N, g["T"])
    blind, tile = fit_cost_model(g, "max_affine"), fit_cost_model(g, "tile")
    assert tile.error < 0.01 < blind.error
    model, err = tile  # unpacks like (model, error)
    assert err == tile.error and fit_error(model, g) == pytest.approx(err)


def test_fit_input_errors():
    g = _synthetic(CostModel.named("dsv3-offline"), 0)
    with pytest.raises(ValueError, match="form"):
        fit_cost_model(g, "quadratic")
    with pytest.raises(ValueError, match="column"):
        fit_cost_model(g.drop(columns="T"), "tile")
    with pytest.raises(ValueError, match="at least 6"):
        fit_cost_model(g.head(3))


def test_grid_plan():
    assert log_ladder(1, 4096) == [2**k for k in range(13)]
    assert {128, 129, 256, 257} <= set(tile_sweep())
    g = plan_grid(max_tokens=4096)
    assert g.N.max() <= 4096 and g.G.max() == 40 and g.n.min() == 1
    assert set(g.kind) == {"grid", "tile"} and not g.duplicated(["G", "n"]).any()
    assert tiles([1, 128, 129, 256, 257]).tolist() == [1, 1, 2, 2, 3]


def test_roofline_known_answers():
    # Section 2.2: 44.0 / 8.7 / 4.7 MB at fp8; floors 13.1 / 2.6 / 1.4 us on Testbed A (H100 SXM, 3.35 TB/s)
    assert shape("dsv3").bytes(1) / 1e6 == pytest.approx(44.0, abs=0.05)
    assert shape("dsv2-lite").bytes(1) / 1e6 == pytest.approx(8.7, abs=0.05)
    assert shape("qwen3-30b").bytes(1) / 1e6 == pytest.approx(4.7, abs=0.05)
    assert [round(roofline_us(s, 3.35), 1) for s in ("dsv3", "dsv2-lite", "qwen3-30b")] == [13.1, 2.6, 1.4]
    assert roofline_us("dsv3", 4.8) == pytest.approx(9.2, abs=0.05)  # the chapter's exercise
    with pytest.raises(ValueError):
        shape("gpt-5")


def test_bootstrap_and_spreads():
    s = _synthetic(CostModel.named("dsv3-offline"), 0, G=[1, 2, 4, 8, 13, 20], per_octave=1)
    bs = bootstrap(s, n_boot=20)
    assert len(bs) == 20 and bs.beta.between(0.08, 0.11).all()
    sp = proxy_spreads(s)
    assert set(sp["set"]) == {"same N, different G", "same G, different N"}
    assert (sp.spread >= 1).all()
    # same G, different N on the flat-then-linear curve: the G = 1 column spans n = 1..4096
    g1 = sp[(sp["set"] == "same G, different N") & (sp.key == 1)].spread.iloc[0]
    assert g1 == pytest.approx(s[s.G == 1].t_us.max() / s[s.G == 1].t_us.min())


torch = optional_module("torch")


@pytest.mark.needs("torch")
def test_fp8_layouts_round_trip():
    from tempo.calib.fp8 import (dequant_per_block, dequant_per_token, grouped_masked_inputs,
                                 per_block_cast_to_fp8, per_token_cast_to_fp8)

    x = torch.randn(5, 300)
    q, s = per_token_cast_to_fp8(x)
    assert q.dtype == torch.float8_e4m3fn and q.shape == (5, 300) and s.shape == (5, 3)
    assert torch.allclose(s[:, 0], x[:, :128].abs().amax(1) / 448)
    err = (dequant_per_token(q, s) - x).abs().max() / x.abs().max()
    assert err < 0.07
    w = torch.randn(200, 260)
    q, s = per_block_cast_to_fp8(w)
    assert s.shape == (2, 3)
    assert torch.allclose(s[1, 2], w[128:, 256:].abs().max() / 448)
    assert (dequant_per_block(q, s) - w).abs().max() / w.abs().max() < 0.07
    (a, a_s), (b, b_s) = grouped_masked_inputs(3, 16, 256, 384)
    assert a.shape == (3, 16, 384) and a_s.shape == (3, 16, 3)
    assert b.shape == (3, 256, 384) and b_s.shape == (3, 2, 3)
    with pytest.raises(ValueError):
        per_token_cast_to_fp8(torch.randn(2, 3, 4))


@pytest.mark.needs("torch")
def test_cpu_backend_and_recording(tmp_path):
    from tempo.calib.backends import available_backends, make_backend
    from tempo.calib.record import calibrate
    from tempo.measured.catalog import load_recording, recordings

    assert "cpu" in available_backends()
    with pytest.raises(ValueError, match="backend"):
        make_backend("tpu", shape("tiny"), 2, 2)
    be = make_backend("cpu", shape("tiny"), 4, 64, reps=2)
    assert be.measure(2, 8) > 0
    with pytest.raises(ValueError, match="outside"):
        be.measure(5, 8)
    grid = plan_grid(G=[1, 2, 4], n_max=64, fine=False)
    # an interrupted earlier run: one cell already measured (with an unmistakable value)
    folder = tmp_path / "amd-test"
    out = calibrate("cpu", "tiny", grid, out_root=tmp_path, progress=False, date="2026-01-01", reps=2)
    samples, fits, man = load_recording(out)
    assert len(samples) == len(grid) and (samples.t_us > 0).all()
    assert list(samples.columns) == ["G", "n", "N", "T", "kind", "t_us"]
    assert {"max_affine", "tile", "three_term", "max_affine_no_intercept"} == set(fits)
    assert man["backend"] == "cpu" and man["shape"] == "tiny" and man["cells"] == len(grid) and man["duration_s"] >= 0
    assert not (out / "samples.partial.csv").exists()
    # resume: a partial file's cells are kept, not re-measured
    partial = out / "samples.partial.csv"
    partial.write_text("G,n,kind,t_us\n1,1,grid,12345.0\n")
    out2 = calibrate("cpu", "tiny", grid, out_root=tmp_path, progress=False, date="2026-01-01", reps=2)
    s2, _, _ = load_recording(out2)
    assert s2[(s2.G == 1) & (s2.n == 1)].t_us.iloc[0] == 12345.0
    rec = recordings("calibration", root=tmp_path)
    assert len(rec) == 1 and rec["shape"].iloc[0] == "tiny"
    assert json.loads((out / "manifest.json").read_text())["device"]
    del folder


def test_committed_cpu_recording_is_readable():
    from tempo.measured.catalog import load_recording, recordings

    rec = recordings("calibration", backend="cpu")
    assert len(rec) >= 1
    s, fits, man = load_recording(rec.path.iloc[0])
    assert man["cells"] == len(s) and fits["max_affine"]["error"] < 0.5


def test_tile_steps_and_regime_evidence():
    from tempo.calib.fit import regime_evidence, tile_steps

    true = CostModel.named("dsv3-testbedb-tile").without("traffic")
    g = plan_grid(G=[1, 8], n_max=512)
    g["T"] = g.G * tiles(g.n)
    g["t_us"] = true.time(g.G, g.N, g["T"])
    st = tile_steps(g)
    assert set(st.boundary) == {128, 256} and set(st.G) == {1, 8}
    # G = 1 at 128 -> 129 tokens: the flat piece gains one b2 tile (37.1 + 8.32 + 2.65 over 37.1 + 8.32)
    s1 = st[(st.G == 1) & (st.boundary == 128)].step_pct.iloc[0]
    assert s1 == pytest.approx(100 * 2.65 / (37.1 + 8.32))
    assert tile_steps(g[g.n != 129]).query("boundary == 128").empty
    m = CostModel.named("dsv3-offline")
    s = plan_grid(G=[1], fine=False, per_octave=2)
    s["t_us"] = m.time(s.G, s.N)
    ev = regime_evidence(s, m.n_star)
    assert ev["flat_variation"] == pytest.approx(0.0, abs=1e-12)
    assert ev["linear_slope"] == pytest.approx(m.beta, rel=1e-9)
    assert ev["t_one"] == pytest.approx(m.b)


def test_host_copy_bandwidth_is_a_rate_and_checks_its_arguments():
    from tempo.calib.shapes import host_copy_bandwidth

    bw = host_copy_bandwidth(nbytes=2**20, reps=3)
    assert 1e7 < bw < 1e13          # 10 MB/s .. 10 TB/s: any real machine's memory
    for bad in (dict(nbytes=4), dict(nbytes=1.5e6), dict(reps=0), dict(reps=True)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            host_copy_bandwidth(**bad)
