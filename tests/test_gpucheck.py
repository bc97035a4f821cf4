"""``python -m tempo gpu-check`` on a machine without a GPU: clear refusals, and the summary a
person pastes into a note, built from a results record."""
import subprocess
import sys

import pytest

from tempo.benchmarks import gpucheck


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
    a = gpucheck._fresh(tmp_path / "2026-11-30-gpu-check")
    b = gpucheck._fresh(tmp_path / "2026-11-30-gpu-check")
    c = gpucheck._fresh(tmp_path / "2026-11-30-gpu-check")
    assert [p.name for p in (a, b, c)] == ["2026-11-30-gpu-check", "2026-11-30-gpu-check-2", "2026-11-30-gpu-check-3"]
    assert all(p.is_dir() for p in (a, b, c))


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
    c = gpucheck.checks(tmp_path)
    assert [p.name for p in c.path] == ["2026-01-02-gpu-check-2", "2026-01-02-gpu-check", "2026-01-01-gpu-check"]
    res, md, files = gpucheck.load_check(c.path[0])
    assert res["date"] == "2026-01-02" and md.startswith("# gpu-check 2026-01-02") and list(files) == ["timer"]


def test_newest_check_is_the_first_listed(tmp_path):
    import json

    assert gpucheck.newest_check(gpucheck.checks(tmp_path)) is None
    d = tmp_path / "gpu-x" / "2026-01-01-gpu-check"
    d.mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps({"machine": "gpu-x", "date": "2026-01-01", "sections": ["env"]}))
    (d / "results.json").write_text(json.dumps({"date": "2026-01-01", "seconds": {"env": 1.0}, "env": {"error": "x"}}))
    res, md, files = gpucheck.newest_check(gpucheck.checks(tmp_path))
    assert res["date"] == "2026-01-01" and files == {}
