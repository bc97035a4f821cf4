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
        name, version = line.split("==")
        out[re.sub(r"\[.*\]", "", name).lower().replace("_", "-")] = version.strip()
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
