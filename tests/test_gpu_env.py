"""The GPU lock stays the CPU lock plus SGLang 0.5.23's set (GPU.md): a bump of a CPU pin that is
not carried into requirements-gpu.txt, or a GPU pin that drifts from requirements-gpu.in, fails."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pins(path):
    out = {}
    for line in (ROOT / path).read_text().splitlines():
        line = line.split(" #")[0].strip()
        if not line or line.startswith(("#", "-")):
            continue
        name, version = re.split(r"={2,3}", line)
        out[re.sub(r"\[.*\]", "", name).lower().replace("_", "-").replace(".", "-")] = version.strip()
    return out


def norm(version):
    """PEP 440 release equality for plain releases: 13.0.3 == 13.0.3.0."""
    return re.sub(r"(\.0)+$", "", version)


def test_gpu_lock_is_cpu_lock_plus_gpu_pins():
    cpu, gpu, top = pins("requirements.txt"), pins("requirements-gpu.txt"), pins("requirements-gpu.in")
    # the CPU pins SGLang 0.5.23 forces to change; triton follows torch, llvmlite follows numba
    assert set(top) & set(cpu) == {"numpy", "python-dateutil", "torch", "numba"}
    for name, version in cpu.items():
        if name not in top and name not in ("triton", "llvmlite"):
            assert gpu.get(name) == version, f"{name}: CPU lock {version}, GPU lock {gpu.get(name)}"
    for name, version in top.items():
        assert name in gpu and norm(gpu[name]) == norm(version), f"{name}: .in {version}, lock {gpu.get(name)}"
    # the versions GPU.md explains go together
    assert gpu["torch"] == "2.14.1" and gpu["sgl-deep-gemm"] == "0.2.3.post2" and gpu["sglang"] == "0.5.23"
    assert gpu["triton"].startswith("3.8.") and cpu["triton"] == "3.7.1" and cpu["torch"] == "2.13.0"
    assert tuple(map(int, gpu["nvidia-cuda-nvcc"].split(".")[:2])) >= (12, 9)


def test_environment_uses_the_gpu_lock_only():
    env = (ROOT / "environment.yml").read_text()
    assert "-r requirements-gpu.txt" in env and "-r requirements.txt" not in env


def test_torch_pin_is_exact_and_the_index_named():
    """``torch==2.14.1`` also matches 2.14.1+cu126 from an extra index (a local version
    sorts higher); ``===`` matches the string "2.14.1" only, and the lock names its index."""
    lock = (ROOT / "requirements-gpu.txt").read_text().splitlines()
    assert "torch===2.14.1" in lock and not any(l.startswith("torch==2") for l in lock)
    assert "--index-url https://pypi.org/simple" in lock
    assert "torch===2.14.1" in (ROOT / "requirements-gpu.in").read_text()


def test_sglang_test_environment_keeps_sglangs_pins():
    """tests/sglang/requirements.txt (make sglang-test) pins every package to the GPU lock's version
    -- the resolution of sglang 0.5.23's own requirements -- including the GPU lock's overrides of
    CPU pins that sglang forces; torch and triton stay the .venv's (see the file's header)."""
    sgl, gpu = pins("tests/sglang/requirements.txt"), pins("requirements-gpu.txt")
    assert sgl["sglang"] == "0.5.23"
    for name, version in sgl.items():
        if name.startswith("opentelemetry-") and name not in gpu:
            continue  # not pinned by sglang (its tracing extra)
        assert gpu.get(name) == version, f"{name}: sglang-test {version}, GPU lock {gpu.get(name)}"
    # sglang 0.5.23's own == pins (its METADATA) and the CPU pins it forces
    for name in ("transformers", "compressed-tensors", "openai", "apache-tvm-ffi", "tokenizers", "sentencepiece",
                 "numba", "numpy", "python-dateutil", "llvmlite"):
        assert name in sgl, name
    assert sgl["transformers"] == "5.19.0" and sgl["apache-tvm-ffi"] == "0.1.11" and sgl["numba"] == "0.65.1"
    assert "torch" not in sgl and "triton" not in sgl
