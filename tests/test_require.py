"""tempo.calib.backends.require: PROFILE=gpu stops, naming the missing piece, instead of
measuring something else."""
import sys

import pytest

from tempo.calib.backends import require


def test_unknown_backend_is_an_argument_error():
    with pytest.raises(ValueError, match="backend must be"):
        require("tpu")


def test_missing_torch_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    with pytest.raises(RuntimeError, match="needs torch"):
        require("cpu")


def test_gpu_backends_need_cuda_and_deep_gemm(monkeypatch):
    torch = pytest.importorskip("torch")
    require("cpu")  # torch alone is enough for the CPU backend
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for b in ("cuda", "torch_bf16", "deep_gemm"):
        with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
            require(b)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    require("torch_bf16")
    monkeypatch.setitem(sys.modules, "deep_gemm", None)
    with pytest.raises(RuntimeError, match="needs DeepGEMM.*sgl-deep-gemm"):
        require("deep_gemm")
