"""``python -m tempo gpu-check`` on a machine without a GPU: clear refusals, and the summary a
person pastes into a note, built from a results record."""
import subprocess
import time
import sys

import pytest

from tempo.benchmarks import gpucheck
from tempo.measured import catalog


def test_gpu_check_argument_errors(capsys):
    with pytest.raises(SystemExit) as e:
        gpucheck.main(["--sections", "env,warp"])
    assert e.value.code == 2 and "--sections: unknown ['warp']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        gpucheck.main(["--budget-s", "0"])


def test_gpu_check_refuses_without_a_gpu(tmp_path):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    r = subprocess.run([sys.executable, "-m", "tempo", "gpu-check", "--out", str(tmp_path)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1 and "needs a CUDA GPU" in r.stderr
    assert not any(tmp_path.iterdir())


def test_summary_reads_like_a_note():
    res = {"date": "2026-11-30", "seconds": {"env": 3.0, "triton": 10.0, "grids": 100.0},
           "env": {"device": "NVIDIA H200", "driver": "580.1", "torch": "2.11.0", "torch_cuda": "13.0", "triton": "3.6.0",
                   "nvcc": "release 13.0", "cuda_home": "/usr/local/cuda", "sms": 132, "l2_bytes": 60 * 2**20,
                   "memory_gib": 139.8, "copy_tb_s": 4.3, "nvidia_smi": {"clocks.sm": "345 MHz", "clocks.max.sm": "1980 MHz"},
                   "backends": {"deep_gemm": {"ok": False, "why": "import deep_gemm failed: OSError: undefined symbol"},
                                "torch_bf16": {"ok": True, "why": "torch 2.11.0"}, "cpu": {"ok": True, "why": "cpu"}}},
           "triton": {"cases": 30, "counts_exact": 30, "ids_agree_min": 0.9995, "dtype_ok": 30, "graph_replays": 8,
                      "graph_counts_exact": 8, "graph_ids_agree_min": 1.0, "speed_4096x8_us": 12.5, "speed_mpairs_s": 2621.4},
           "grids": {"deep_gemm/dsv3": {"skipped": "import deep_gemm failed"},
                     "torch_bf16/qwen3-30b": {"cells": 24, "of": 24, "seconds": 40.0, "b_us": 4.1, "beta_us": 0.01,
                                              "n_star": 410.0, "fit_error": 0.05, "roofline_datasheet_us": 3.93,
                                              "roofline_measured_copy_us": 4.39}}}
    md = gpucheck.summary_md(res)
    assert md.startswith("# gpu-check 2026-11-30 on NVIDIA H200")
    assert "backend deep_gemm: unavailable (import deep_gemm failed: OSError" in md
    assert "counts exact in 30/30 cases" in md and "2621.4 M pairs/s" in md
    assert "grid deep_gemm/dsv3: skipped" in md
    assert "b = 4.1 us" in md and "3.93 us at 4.8 TB/s" in md
    assert "total 113 s" in md


def test_cuda_home_follows_deep_gemm_rules(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_HOME", "/opt/cuda-x")
    assert gpucheck.cuda_home() == "/opt/cuda-x"
    monkeypatch.delenv("CUDA_HOME")
    monkeypatch.delenv("CUDA_PATH", raising=False)
    (tmp_path / "bin").mkdir()
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\n")
    nvcc.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert gpucheck.cuda_home() == str(tmp_path)


def test_a_second_run_never_overwrites_the_first(tmp_path):
    from tempo.measured import store

    got = [store.write("m", "2026-11-30-gpu-check", {"results.json": f'{{"run": {i}}}'.encode()}, {}, tmp_path).path
           for i in range(3)]
    assert [p.name for p in got] == ["2026-11-30-gpu-check", "2026-11-30-gpu-check-2", "2026-11-30-gpu-check-3"]
    assert [(p / "results.json").read_text() for p in got] == ['{"run": 0}', '{"run": 1}', '{"run": 2}']


def test_checks_lists_gpu_check_folders_newest_first(tmp_path):
    import json

    import pandas as pd

    for name, date in (("2026-01-01-gpu-check", "2026-01-01"), ("2026-01-02-gpu-check", "2026-01-02"),
                       ("2026-01-02-gpu-check-2", "2026-01-02")):
        d = tmp_path / "gpu-x" / name
        d.mkdir(parents=True)
        (d / "manifest.json").write_text(json.dumps({"machine": "gpu-x", "date": date, "device": "GPU X",
                                                     "sections": ["env", "timer"]}))
        (d / "results.json").write_text(json.dumps({"date": date, "seconds": {"env": 1.0}, "env": {"error": "x"}}))
        pd.DataFrame({"method": ["a"], "us": [1.0]}).to_csv(d / "timer.csv.gz", index=False)
    rec = tmp_path / "gpu-x" / "2026-01-03-deep_gemm-dsv3"  # a calibration recording: not a check
    rec.mkdir()
    (rec / "manifest.json").write_text(json.dumps({"date": "2026-01-03", "backend": "deep_gemm", "shape": "dsv3"}))
    c = catalog.recordings("gpu-check", root=tmp_path)
    assert [p.name for p in c.path] == ["2026-01-02-gpu-check-2", "2026-01-02-gpu-check", "2026-01-01-gpu-check"]
    res, md, files = gpucheck.load_check(c.path[0])
    assert res["date"] == "2026-01-02" and md.startswith("# gpu-check 2026-01-02") and list(files) == ["timer"]


def test_newest_check_is_the_first_listed(tmp_path):
    import json

    assert gpucheck.newest_check(catalog.recordings("gpu-check", root=tmp_path)) is None
    d = tmp_path / "gpu-x" / "2026-01-01-gpu-check"
    d.mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps({"machine": "gpu-x", "date": "2026-01-01", "sections": ["env"]}))
    (d / "results.json").write_text(json.dumps({"date": "2026-01-01", "seconds": {"env": 1.0}, "env": {"error": "x"}}))
    res, md, files = gpucheck.newest_check(catalog.recordings("gpu-check", root=tmp_path))
    assert res["date"] == "2026-01-01" and files == {}


# ------------------------------------------------------------------ exit status
def _fake_gpu(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Fake GPU")


def _sections(monkeypatch, **funcs):
    def env(ctx):
        ctx["machine"] = "fake-gpu"
        return {"device": "Fake GPU", "backends": {}}

    monkeypatch.setattr(gpucheck, "FUNCS", {**{k: (lambda ctx: {}) for k in gpucheck.SECTIONS}, "env": env, **funcs})


def test_exit_status_names_each_failed_section(monkeypatch, tmp_path, capsys):
    import json

    _fake_gpu(monkeypatch)

    def numerics(ctx):  # a check that does not hold: the section fails, and keeps its results
        gpucheck._expect(ctx, True, "never shown")
        gpucheck._expect(ctx, False, "deep_gemm/dsv3 G=1,n=1: up error 0.5 > 0.01")
        return {"deep_gemm/dsv3": {"G=1,n=1": {"up": 0.5}}}

    def grids(ctx):  # a section that raises
        raise RuntimeError("no fp8 kernel")

    def epbench(ctx):  # a flag is not a failure
        gpucheck._flag(ctx, "epbench: 1.4x the fit")
        return {}

    _sections(monkeypatch, numerics=numerics, grids=grids, epbench=epbench)
    rc = gpucheck.main(["--out", str(tmp_path), "--sections", "triton,numerics,grids,epbench"])
    out, err = capsys.readouterr()
    assert rc == 1
    assert "FAILED sections: numerics: deep_gemm/dsv3 G=1,n=1: up error 0.5 > 0.01; grids: RuntimeError: no fp8 kernel" \
        in err
    assert "triton" not in err and "epbench" not in err and "never shown" not in out + err
    assert "flags: epbench: 1.4x the fit" in out
    folder = next(tmp_path.glob("*-gpu-check"))
    res = json.loads((folder / "results.json").read_text())
    assert gpucheck.failed_sections(res) == {"numerics": ["deep_gemm/dsv3 G=1,n=1: up error 0.5 > 0.01"],
                                             "grids": ["RuntimeError: no fp8 kernel"]}
    assert json.loads((folder / "manifest.json").read_text())["failed_sections"] == ["grids", "numerics"]
    md = (folder / "summary.md").read_text()
    assert "CHECK FAILED: deep_gemm/dsv3" in md and "- grids: FAILED (RuntimeError: no fp8 kernel)" in md
    assert "FLAG: epbench: 1.4x the fit" in md


def test_exit_status_is_zero_when_every_section_passes(monkeypatch, tmp_path, capsys):
    _fake_gpu(monkeypatch)
    _sections(monkeypatch)
    assert gpucheck.main(["--out", str(tmp_path), "--sections", "triton,timer"]) == 0
    assert "Failed sections: none." in capsys.readouterr().out


def test_record_goes_under_the_machine(monkeypatch, tmp_path):
    _fake_gpu(monkeypatch)
    _sections(monkeypatch)
    assert gpucheck.main(["--record", "--out", str(tmp_path), "--sections", "env"]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["fake-gpu"]
    assert len(list((tmp_path / "fake-gpu").glob("*-gpu-check/manifest.json"))) == 1


def test_default_budget_covers_every_section():
    assert set(gpucheck.BUDGET) == set(gpucheck.SECTIONS) and sum(gpucheck.BUDGET.values()) == 420


# ------------------------------------------------------------------ the new sections' logic on CPU
@pytest.mark.needs("torch")
def test_serving_section_logic_on_cpu():
    r = gpucheck.serving_check("cpu", replays=300, seed=1)
    assert r["graphs"] == 0 and r["replays"] == 300
    assert r["slots"] - r["experts"] + 1 == 33  # the table width of DSv3 on EP8 with 32 redundant experts
    assert r["bad_picks"] == 0 and r["count_errors"] == 0
    assert r["pointers_unchanged"] == {"phys": True, "prob": True, "counts": True}
    assert 0 < r["picks_only_valid_under_new_map"] <= r["moved_layer_picks"]


@pytest.mark.needs("torch")
def test_serving_check_catches_wrong_picks_and_counts(monkeypatch):
    real = gpucheck.serving_runtime

    def broken(*a, **kw):
        rt = real(*a, **kw)
        dispatch = rt.dispatch

        def off_by_one(layer, ids, *x, **k):
            out = dispatch(layer, ids, *x, **k)
            return out.where(out < 0, (out + 1) % 64)  # 64 physical slots in the check
        rt.dispatch = off_by_one
        return rt

    monkeypatch.setattr(gpucheck, "serving_runtime", broken)
    r = gpucheck.serving_check("cpu", replays=40, seed=2)
    assert r["bad_picks"] > 0

    def uncounted(*a, **kw):
        rt = real(*a, **kw)
        rt.dispatch = lambda layer, ids, *x, **k: rt.__class__.dispatch(rt, layer, ids.clone().fill_(-1), *x, **k)
        return rt

    monkeypatch.setattr(gpucheck, "serving_runtime", uncounted)
    r = gpucheck.serving_check("cpu", replays=40, seed=2)
    assert r["count_errors"] > 0


@pytest.mark.needs("torch")
def test_collectives_on_one_gloo_rank():
    r = gpucheck.collectives_check("gloo", "cpu")
    assert all(r[k] is True for k in ("all_gather", "barrier", "all_to_all_single", "all_reduce_max"))
    assert r["worker_rows"] == 4 and r["worker_expert_us"] > 0 and r["worker_kernel"] == "loop"


@pytest.mark.needs("torch")
def test_rowmask_section_logic_under_the_triton_interpreter(tmp_path):
    import importlib.util
    import json
    import os
    from pathlib import Path

    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed")
    code = ("import json\nfrom tempo.benchmarks.gpucheck import rowmask_check\n"
            "r = rowmask_check('cpu'); r.pop('table'); print(json.dumps(r))\n")
    env = dict(os.environ, TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                       cwd=Path(__file__).resolve().parent.parent)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    n = res["eager_cases"]
    assert n == 7 and res["masks_ok"] == res["counts_exact"] == res["ids_exact"] == n
    assert res["graph_replays"] == 0 and res["graph"].startswith("skipped: no CUDA device")


# ------------------------------------------------------------------ epbench beside the fit
class FitBackend:
    """A stand-in backend for the comparison: its 'measured' time of a rank's loads is
    ``factor`` x a known cost model's, plus ``launch_us`` when timed eagerly."""

    gpu, name, kernel, copies = False, "fake", "fake", 8

    def __init__(self, model, factor, max_G, launch_us=0.0):
        self.model, self.factor, self.max_G, self.launch_us = model, factor, max_G, launch_us

    def time_loads(self, loads, copy=0, expected_m=None, mode="graph", spin_us=None):
        from tempo.benchmarks.epbench import rank_features

        t = self.factor * float(self.model.time(*rank_features(loads, self.model.tile)))
        return t + (self.launch_us if mode == "eager" and (spin_us or 0) < 100 else 0.0)


def _fits_of(model):
    p = {"a": model.a, "b": model.b, "c": model.c, "beta": model.beta}
    return {"max_affine": {"params": p, "error": 0.03}, "tile": {"params": {**p, "b2": 1.0}, "error": 0.2}}


@pytest.mark.needs("torch")
@pytest.mark.parametrize("factor, disagree", [(1.0, False), (1.1, False), (1.3, True), (0.7, True)])
def test_epbench_beside_the_calibrated_fit(factor, disagree):
    from tempo.benchmarks import epbench
    from tempo.core.cost import CostModel

    model = CostModel(a=9.6, b=1.4, c=9.6, beta=0.0084)
    args = {"device": "cpu", "world_size": 4, "shape": "tiny", "experts": None, "top_k": 4, "tokens": 32, "steps": 3,
            "warmup": 0, "skew": 1.0, "replication": 1.25, "params": "dsv3-offline", "policies": ["static", "tempo"],
            "seed": 0}
    df = epbench.run_emulated(args, backend=FitBackend(model, factor, 20))
    assert set(df.backend) == {"fake"} and set(df.timing) == {"graph"}
    cmp = gpucheck.fit_comparison(df, _fits_of(model))
    assert cmp["form"] == "max_affine"  # the smaller grid error
    assert cmp["ratio_median"] == pytest.approx(factor) and cmp["rank_ratio_median"] == pytest.approx(factor)
    assert cmp["rank_corr"] == pytest.approx(1.0) and cmp["disagree"] is disagree
    assert gpucheck.fit_comparison(df, None)["skipped"].startswith("no calibrated fit")


@pytest.mark.needs("torch")
def test_three_ways_expose_host_launch_time():
    import json

    from tempo.benchmarks import epbench
    from tempo.core.cost import CostModel

    model = CostModel(a=9.6, b=1.4, c=9.6, beta=0.0084)
    be = FitBackend(model, 1.0, 6, launch_us=40.0)
    loads = [[[30, 2], [7]], [[1, 1, 1], [64, 64]]]
    three = epbench.time_three_ways(be, loads, expected_m=8)
    med = three.groupby("way").expert_us.median()
    assert med["eager, spin 30 us"] == pytest.approx(med["graph"] + 40.0)  # the launches inside the events
    assert med["eager, spin 2000 us"] == pytest.approx(med["graph"])
    assert json.loads(three.loads.iloc[0]) == loads[0]
    cmp = gpucheck.fit_comparison(three[three.way == "graph"].reset_index(drop=True), _fits_of(model))
    assert cmp["ratio_median"] == pytest.approx(1.0)


@pytest.mark.needs("torch")
@pytest.mark.parametrize("factor", [1.0, 1.4])
def test_epbench_section_flags_a_gap_to_the_fit(monkeypatch, factor):
    """The epbench section wired end to end on CPU: a stand-in backend whose time is factor x the
    grid's fit; beyond 15% the section flags it (a flag, not a failure), and the summary shows
    the three timings and the fit side by side."""
    import time

    from tempo.benchmarks import epbench
    from tempo.core.cost import CostModel

    model = CostModel(a=9.6, b=1.4, c=9.6, beta=0.0084)
    made = []
    monkeypatch.setattr(epbench, "make_expert_backend",
                        lambda kind, sh, G, n, device, seed=0, copies=None: made.append(kind) or
                        FitBackend(model, factor, G, launch_us=25.0))
    monkeypatch.setattr(gpucheck, "_best_gpu_backend", lambda ctx: "deep_gemm")
    monkeypatch.setattr(FitBackend, "name", "deep_gemm")
    ctx = {"files": {}, "deadline": time.time() + 600, "fits": {("deep_gemm", "qwen3-30b"): _fits_of(model)},
           "failed": [], "flags": []}
    r = gpucheck.section_epbench(ctx)
    assert made == ["auto"] and ctx["failed"] == []
    assert r["vs_fit"]["ratio_median"] == pytest.approx(factor) and r["vs_fit"]["disagree"] is (factor > 1.15)
    assert bool(ctx["flags"]) is (factor > 1.15)
    assert r["three_ways_vs_graph"]["eager, spin 2000 us"] == pytest.approx(1.0)
    assert r["three_ways_vs_graph"]["eager, spin 30 us"] > 1.0
    assert set(ctx["files"]) == {"epbench.csv", "epbench_ways.csv"}
    md = gpucheck.summary_md({"date": "2026-12-01", "seconds": {"epbench": 1.0}, "epbench": {**r, "flags": ctx["flags"]}})
    assert "beside the calibrated fit (max_affine" in md and "three ways" in md
    assert ("DISAGREES" in md) is (factor > 1.15)


def test_an_installed_deep_gemm_that_does_not_load_fails_the_check(monkeypatch):
    """Not installed: a backend that is not here (skipped).  Installed but not loading (an ABI
    mismatch with torch): the numerics section fails, so gpu-check exits 1."""
    import importlib.util

    import tempo.calib.backends as backends

    real_find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "deep_gemm" else real_find(name, *a))
    assert gpucheck.deep_gemm_broken() is None
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "deep_gemm" else real_find(name, *a))

    def fail():
        raise OSError("undefined symbol: _ZN3c10")

    monkeypatch.setattr(backends, "import_deep_gemm", fail)
    assert gpucheck.deep_gemm_broken() == "OSError: undefined symbol: _ZN3c10"
    monkeypatch.setattr(backends, "backend_status", lambda: {})
    monkeypatch.setattr(backends, "gpu_backends", lambda: [])
    ctx = {"files": {}, "deadline": time.time() + 60}
    out = gpucheck.section_numerics(ctx)
    assert "does not load" in out["deep_gemm_installed"]["error"]
    assert ctx["failed"] and "DeepGEMM is installed but does not load" in ctx["failed"][0]
