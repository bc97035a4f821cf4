"""The wall-clock EP microbenchmark: gloo on CPU processes (as CI can run it), the one-device
emulation, and its helpers."""
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tempo.serving import epbench


def test_integer_split_keeps_expert_totals():
    shares = np.array([[2.5, 2.5, 0.0], [0.2, 0.3, 0.5], [7.0, 0.0, 0.0]])
    out = epbench.integer_split(shares)
    assert out.sum(axis=1).tolist() == [5, 1, 7] and (out >= 0).all()
    assert out[2].tolist() == [7, 0, 0]


def test_transfer_metrics():
    rows = []
    for step in range(3):
        for p, meas, model in (("static", 100, 10), ("a", 80, 8), ("b", 60, 9), ("c", 99, 9.95)):
            rows.append({"step": step, "policy": p, "layer_us": meas, "expert_us": meas, "model_us": model})
    tr = epbench.transfer(pd.DataFrame(rows))
    # pairs outside 3% noise: static-a, static-b, a-b, a-c, b-c (static-c is inside); only a-b disagrees
    assert tr["pairs"] == 5 and tr["agreement"] == pytest.approx(4 / 5)
    # gains vs static: measured 20/40/1 p, modeled 20/10/0.5 p
    assert tr["gain_transfer_error_p"] == pytest.approx((0 + 30 + 0.5) / 3)


@pytest.mark.needs("torch")
def test_gloo_epbench_cli_runs_on_cpu():
    r = subprocess.run([sys.executable, "-m", "tempo", "epbench", "--device", "cpu", "--world-size", "4", "--shape",
                        "tiny", "--steps", "3", "--warmup", "1"], capture_output=True, text=True, timeout=170)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    assert "4 ranks (gloo)" in out
    for p in epbench.DEFAULT_POLICIES:
        assert p in out
    assert "pairwise ranking agreement" in out


@pytest.mark.needs("torch")
def test_emulated_mode_on_cpu():
    args = {"device": "cpu", "world_size": 4, "shape": "tiny", "experts": None, "top_k": 4, "tokens": 16, "steps": 2,
            "warmup": 0, "skew": 1.0, "replication": 1.25, "params": "dsv3-offline",
            "policies": ["static", "tempo"], "seed": 0}
    df = epbench.run_emulated(args)
    assert len(df) == 4 and (df.layer_us > 0).all()
    s = epbench.summarize(df)
    assert s.loc["static", "model_vs_static"] == 1.0
    assert s.loc["tempo", "model_us"] <= s.loc["static", "model_us"]


@pytest.mark.needs("torch")
def test_cli_rejects_bad_arguments(capsys):
    with pytest.raises(SystemExit):
        epbench.main(["--policies", "static,nonsense"])
    assert "--policies: unknown ['nonsense']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        epbench.main(["--world-size", "1"])
    with pytest.raises(SystemExit):
        epbench.main(["--shape", "gpt-9"])
