"""The wall-clock EP microbenchmark: gloo on CPU processes (as CI can run it), the one-device
emulation, and its helpers."""
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tempo.benchmarks import epbench


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
                        "tiny", "--steps", "3", "--warmup", "1"], capture_output=True, text=True, timeout=480)
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


def test_policy_order_is_shuffled_per_step_and_rank_invariant():
    pols = list(epbench.DEFAULT_POLICIES)
    orders = [tuple(epbench.policy_order(pols, 0, s)) for s in range(20)]
    assert all(sorted(o) == sorted(pols) for o in orders)
    assert len(set(orders)) > 5  # the order changes from step to step
    assert sum(o[0] == "static" for o in orders) < 20  # static is not always first
    assert orders == [tuple(epbench.policy_order(pols, 0, s)) for s in range(20)]  # every rank draws the same
    assert orders != [tuple(epbench.policy_order(pols, 1, s)) for s in range(20)]


def test_emulated_rows_record_order_kernel_and_seed():
    args = {"device": "cpu", "world_size": 2, "shape": "tiny", "experts": None, "top_k": 4, "tokens": 8, "steps": 3,
            "warmup": 0, "skew": 1.0, "replication": 1.25, "params": "dsv3-offline",
            "policies": ["static", "uniform", "tempo"], "seed": 3, "expert_kernel": "loop"}
    df = epbench.run_emulated(args)
    assert set(df.kernel) == {"loop"} and set(df.order_seed) == {3}
    for step, g in df.groupby("step"):
        assert sorted(g.order) == [0, 1, 2]
        assert list(g.sort_values("order").policy) == epbench.policy_order(args["policies"], 3, step)


def test_expert_kernel_choice_fails_clearly_without_gpu():
    from tempo.calib.shapes import shape

    with pytest.raises(RuntimeError, match="fp8 needs --device cuda"):
        epbench.make_expert_backend("fp8", shape("tiny"), 4, 16, "cpu")
    with pytest.raises(ValueError, match="auto, loop or fp8"):
        epbench.make_expert_backend("int4", shape("tiny"), 4, 16, "cpu")
    with pytest.raises(RuntimeError, match="torch_bf16 needs --device cuda"):
        epbench.expert_backend_name("torch_bf16", "cpu")
    be = epbench.make_expert_backend("auto", shape("tiny"), 4, 16, "cpu", copies=3)
    assert be.kernel == "loop" and be.name == "cpu" and be.copies == 3  # one weight copy per emulated rank


def test_sglang_expected_m_is_the_mean_slot_load():
    # SGLang's DeepEP low-latency dispatch: (T * group * K + E) // E
    assert epbench.sglang_expected_m(64, 8, 8, 160) == (64 * 8 * 8 + 160) // 160 == 26
    assert epbench.sglang_expected_m(1, 8, 8, 320) == 1
    assert epbench.slot_loads([5, 3], 4) == [5, 3, 0, 0]
    with pytest.raises(ValueError, match="slots"):
        epbench.slot_loads([1, 2, 3], 2)


def test_fp8_region_masks_by_slot_load_and_reuses_one_graph_per_copy():
    import torch

    from tempo.calib.backends import DeepGemmBackend
    from tempo.calib.shapes import shape
    from test_gpu_paths import FakeDeepGemm, FakeStream

    fake = FakeDeepGemm()
    be = DeepGemmBackend(shape("tiny"), 4, 100, device="cpu", deep_gemm_module=fake, copies=3, l2=10**5)
    assert be.copies >= 3 and be.max_load == 128
    fn = be.region([5, 0, 37, 0], expected_m=11)
    assert fn.masked_m.tolist() == [5, 0, 37, 0] and fn.key == ("masked", 4, 11)
    fn(1)
    assert fake.calls == 2  # gate/up and down
    again = be.region([1, 2, 3, 4], expected_m=11)
    assert again.masked_m is fn.masked_m and fn.masked_m.tolist() == [1, 2, 3, 4]  # same buffer: a graph replays it
    with pytest.raises(ValueError, match="tokens per slot"):
        be.region([300], expected_m=11)
    # graph mode: one capture per (key, weight copy), then replays with new loads
    be.gpu = True  # drive the GPU path on the fake clock
    api = FakeStream()
    be.timer._api = api
    captured = []
    orig = be.timer.capture_copy
    be.timer.capture_copy = lambda f, c: captured.append(c) or orig(lambda cc: f(cc) or 5.0, c)
    for r in (0, 1, 0, 1):
        be.time_loads([r + 1, 0, 0, 0], copy=r, expected_m=11)
    assert captured == [0, 1]


@pytest.mark.needs("torch")
def test_run_here_on_gpus_stops_without_one():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: run_here(gpu=True) would run the benchmark")
    with pytest.raises(RuntimeError, match="CUDA GPU"):
        epbench.run_here(gpu=True)
