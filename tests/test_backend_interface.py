"""The GPU-backend interface (tempo.calib.backends.ExpertBackend): one class plus its test adds
a backend, and calibration, gpu-check and epbench pick it up; DeepGEMM's architecture check
(SM90 runs, SM100 is refused with the reason); one timed sample with and without the host's
launches inside (a fake clock); the masked SiLU-and-mul kernel under the Triton interpreter."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tempo.calib import backends as B  # noqa: E402
from tempo.calib.shapes import shape  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from test_gpu_paths import FakeStream  # noqa: E402


class ToyGpuBackend(B.ExpertBackend):
    """A GPU backend in a few lines: 'runs' its region on the fake clock (each slot one kernel
    of 2 + n/100 us), numerics always 0."""

    name = "toy_gpu"
    preference = 5
    bytes_per_param = 0.5
    dtype = "int4"
    kernel = "toy"
    numerics_tol = {"ffn": 1e-3}
    checks = (("tiny", (1, 2)),)
    api = None

    @classmethod
    def status(cls):
        return True, "toy: always"

    def __init__(self, shape, max_G, max_n, replays=5, copies=None, l2_factor=2.0, seed=0, **kw):
        self.shape, self.max_G, self.max_n = shape, max_G, max_n
        self.timer = B.GraphTimer(replays, warmup=0, spin_us=50, api=self.api)
        self.l2, self.l2_factor = 10**6, l2_factor
        self.expert_bytes = shape.bytes(self.bytes_per_param)
        self.copies = max(B.copies_for(self.expert_bytes, self.l2, l2_factor), int(copies or 1))

    def region(self, loads, expected_m=None):
        ls = self._check_loads(loads)
        return lambda c: sum(2.0 + n / 100 for n in ls if n)  # the fake clock's kernel duration

    def check_numerics(self, G, n):
        return {"ffn": 0.0}

    def info(self):
        return {"device": "toy"}


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    monkeypatch.setitem(sys.modules, "deep_gemm", None)  # DeepGEMM absent: the toy is the best GPU backend
    monkeypatch.setattr(B.TorchBf16Backend, "status", classmethod(lambda cls: (False, "a CPU torch")))
    ToyGpuBackend.api = FakeStream(launch_us=8.0)
    B.register_backend(ToyGpuBackend)
    yield ToyGpuBackend
    B.unregister_backend("toy_gpu")


def test_a_new_backend_is_one_class(toy):
    from tempo.benchmarks import epbench, gpucheck

    assert B.backend_names()[0] == "toy_gpu" and "toy_gpu" in B.gpu_backends()
    assert B.backend_status()["toy_gpu"] == (True, "toy: always")
    assert B.detect_backend() == "toy_gpu"
    B.require("toy_gpu")
    be = B.make_backend("auto", shape("tiny"), 4, 128)
    assert isinstance(be, toy) and be.measure(2, 100) == pytest.approx(6.0)  # the spin keeps the launch out
    assert be.time_loads([100, 0, 50], copy=3) == pytest.approx(2 + 1 + 2 + 0.5)
    assert ("toy_gpu", "tiny", (1, 2)) in gpucheck.grids()
    assert epbench.expert_backend_name("toy_gpu", "cuda") == "toy_gpu"
    assert epbench.expert_backend_name("auto", "cuda") == "toy_gpu"
    ctx = {"failed": []}
    out = gpucheck.section_numerics(ctx)
    assert out["toy_gpu/dsv3"]["G=8,n=200"] == {"ffn": 0.0} and ctx["failed"] == []
    toy.check_numerics = lambda self, G, n: {"ffn": 0.5}
    gpucheck.section_numerics(ctx)
    assert any(m.startswith("toy_gpu/qwen3-30b G=1,n=1: ffn error 0.5 > 0.001") for m in ctx["failed"])


def test_registration_checks_the_interface():
    class NoRegion(B.ExpertBackend):
        name = "broken"
        region = None

    with pytest.raises(TypeError, match="lacks region"):
        B.register_backend(NoRegion)

    class Auto(ToyGpuBackend):
        name = "auto"

    with pytest.raises(ValueError, match="name"):
        B.register_backend(Auto)
    assert "broken" not in B.backend_names()


def test_backend_loads_are_checked():
    be = B.make_backend("cpu", shape("tiny"), 3, 16)
    with pytest.raises(ValueError, match="1..3 slots"):
        be.region([1, 2, 3, 4])
    with pytest.raises(ValueError, match=r"\[0, 16\]"):
        be.region([17])
    with pytest.raises(TypeError, match="token counts"):
        be.region(5)
    with pytest.raises(ValueError, match="mode"):
        be.prepare([1], mode="lazy")
    assert be.time_loads([3, 0, 16], copy=5) > 0
    assert be.check_numerics(2, 5)["ffn"] < be.numerics_tol["ffn"]


# ------------------------------------------------------------------ SM100 and other architectures
@pytest.mark.parametrize("cap, words", [((10, 0), ["SM100", "UE8M0", "truncate"]),
                                        ((8, 0), ["SM90 and SM100 only", "SM80"])])
def test_deep_gemm_refuses_other_architectures(monkeypatch, cap, words):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: cap)
    ok, why = B.backend_status()["deep_gemm"]
    assert ok is False and all(w in why for w in words)
    with pytest.raises(RuntimeError, match="deep_gemm' cannot run here: .*" + words[0]):
        B.require("deep_gemm")
    with pytest.raises(RuntimeError, match="unavailable: .*" + words[0]):  # before any allocation on the GPU
        B.DeepGemmBackend(shape("tiny"), 1, 1, device="cuda", deep_gemm_module=object())
    assert B.deep_gemm_arch_problem((9, 0)) is None


# ------------------------------------------------------------------ one sample, graph or eager
def test_one_sample_keeps_or_shows_the_host_launches():
    api = FakeStream(launch_us=8.0)
    t = B.GraphTimer(replays=1, warmup=0, spin_us=50, api=api)
    g = t.capture_copy(lambda c: 12.0, 0)
    assert t.time_once(g.replay) == pytest.approx(12.0)
    assert t.time_once(g.replay, spin_us=0) == pytest.approx(20.0)  # the graph launch inside

    def eager():  # three kernels launched one by one, 8 us of host work each
        for _ in range(3):
            api._enqueue(8.0, 1.0)
    assert t.time_once(eager, spin_us=2) > 3.0 + 8.0  # a short spin leaves launches inside
    assert t.time_once(eager, spin_us=2000) == pytest.approx(3.0)  # a long one covers them


# ------------------------------------------------------------------ the activation step
ACT_CHECK = r'''
import json, torch
from tempo.calib.act import silu_mul_quant, silu_mul_quant_reference
from tempo.calib.backends import mn_major_tma_aligned
torch.manual_seed(0)
G, cap, f = 3, 128, 256
h = torch.randn(G, cap, 2 * f).to(torch.bfloat16)
mm = torch.tensor([5, 0, 77], dtype=torch.int32)
q1, q2 = torch.full((G, cap, f), -7.0), torch.full((G, cap, f), -7.0)
s1 = mn_major_tma_aligned(torch.full((G, cap, f // 128), -1.0))
s2 = mn_major_tma_aligned(torch.full((G, cap, f // 128), -1.0))
silu_mul_quant_reference(h, q1, s1, mm)
silu_mul_quant(h, q2, s2, mm, block_m=32)
real = torch.zeros(G, cap, dtype=torch.bool)
for g, m in enumerate(mm.tolist()):
    real[g, :m] = True
print(json.dumps({"scale_close": torch.allclose(s1, s2, rtol=1e-5, atol=0), "q_close": torch.allclose(q1, q2, rtol=1e-4, atol=1e-3),
                  "untouched": bool((q2[~real] == -7).all() and (s2[~real] == -1).all()),
                  "written": bool((s2[real] > 0).all()), "max_abs_q": float(q2[real].abs().max()),
                  "strides": list(s2.stride())}))
'''


def test_masked_silu_quant_kernel_under_the_triton_interpreter():
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed")
    env = dict(os.environ, TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, "-c", ACT_CHECK], env=env, capture_output=True, text=True, timeout=300,
                       cwd=Path(__file__).resolve().parent.parent)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["scale_close"] and res["q_close"], res  # the values before fp8 rounding, and the scales
    assert res["untouched"] and res["written"]  # real rows only; the scales land in the MN-major layout
    assert res["max_abs_q"] == pytest.approx(448.0, rel=1e-4) and res["strides"] == [256, 1, 128]


def test_masked_silu_quant_reference_matches_fp8_dequant():
    from tempo.calib.act import silu_mul_quant_reference
    from tempo.calib.fp8 import dequant_per_token

    h = torch.randn(2, 128, 512).to(torch.bfloat16)
    q = torch.zeros(2, 128, 256, dtype=torch.float8_e4m3fn)
    s = torch.zeros(2, 128, 2)
    silu_mul_quant_reference(h, q, s, torch.tensor([9, 128], dtype=torch.int32))
    x = h[1].float()
    ref = torch.nn.functional.silu(x[:, :256]) * x[:, 256:]
    back = dequant_per_token(q[1], s[1])
    assert float((back - ref).norm() / ref.norm()) < 0.06  # e4m3: 3 mantissa bits
    assert float(s[0, 9:].abs().sum()) == 0.0  # rows past masked_m untouched
    with pytest.raises(ValueError, match="multiple of 128"):
        silu_mul_quant_reference(torch.zeros(1, 128, 100), q, s, torch.tensor([1]))
