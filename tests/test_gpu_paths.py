"""The GPU code paths' logic, checked on CPU: backend detection with a broken deep_gemm, the
DeepGEMM capacity layout and its host-side checks (a stand-in module that asserts what the real
``sgl-deep-gemm`` asserts and computes the product from dequantised operands), the weight
rotation sized in bytes, and the graph timer against a simulated CUDA stream (a fake clock)."""
import sys
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tempo.calib import backends as B  # noqa: E402
from tempo.calib.fp8 import dequant_per_block, dequant_per_token  # noqa: E402
from tempo.calib.shapes import shape  # noqa: E402


# ------------------------------------------------------------------ detection
@pytest.mark.parametrize("error", ["OSError('undefined symbol: _ZN3c104cuda19CUDAErrorLogCaptureC1Ev')",
                                   "AssertionError()", "ImportError('no module')"])
def test_detection_reports_a_broken_deep_gemm(monkeypatch, tmp_path, error):
    pkg = tmp_path / "deep_gemm"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(f"raise {error}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "deep_gemm", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))  # an H200
    st = B.backend_status()
    assert st["deep_gemm"][0] is False
    assert error.split("(")[0] in st["deep_gemm"][1]
    assert st["torch_bf16"][0] is True and st["cpu"][0] is True
    assert B.available_backends() == ["torch_bf16", "cpu"]
    assert B.detect_backend() == "torch_bf16"
    with pytest.raises(RuntimeError, match="backend 'deep_gemm' cannot run here: needs DeepGEMM.*failed to import: "
                       + error.split("(")[0]):
        B.require("deep_gemm")
    B.require("torch_bf16")  # the GPU is there: no error


def test_detection_without_cuda_names_the_reason():
    st = B.backend_status()
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert st["torch_bf16"] == (False, st["deep_gemm"][1]) and "no CUDA GPU" in st["torch_bf16"][1]
    with pytest.raises(ValueError, match="backend must be"):
        B.require("tpu")


# ------------------------------------------------------------------ layouts
def test_mn_major_tma_aligned_layout():
    sf = torch.rand(3, 10, 5)
    out = B.mn_major_tma_aligned(sf)
    assert out.shape == (3, 10, 5) and torch.equal(out, sf)
    assert out.stride() == (12 * 5, 1, 12)  # M padded to 12 (16 bytes of float32)
    assert B.mn_major_tma_aligned(sf[0]).stride() == (1, 12)
    with pytest.raises(ValueError, match="scales"):
        B.mn_major_tma_aligned(torch.rand(2, 2, 2, 2))


def test_capacity_and_copies_in_bytes():
    assert [B.capacity(n) for n in (1, 128, 129, 4096)] == [128, 128, 256, 4096]
    l2 = 50 * 10**6
    q30 = shape("qwen3-30b").bytes(1.0)  # 4.7 MB fp8
    assert B.copies_for(q30, l2) == 22  # 2 x 50 MB / 4.72 MB, rounded up: far past the old cap of 8
    assert B.copies_for(q30, l2) * q30 >= 2 * l2
    assert B.copies_for(shape("dsv3").bytes(1.0) * 8, l2) == 2  # at least two copies
    with pytest.raises(ValueError):
        B.copies_for(0, l2)


class FakeDeepGemm(types.SimpleNamespace):
    """Stand-in for ``deep_gemm``: asserts the host-side checks of sgl-deep-gemm's masked
    grouped GEMM (csrc/apis/gemm.hpp, csrc/utils/layout.hpp) and of SGLang's capacity layout,
    then computes the real rows from the dequantised operands."""

    def __init__(self):
        super().__init__(calls=0)

    def m_grouped_fp8_gemm_nt_masked(self, a, b, d, masked_m, expected_m):
        self.calls += 1
        for t in (a[0], b[0], d):
            assert t.stride(0) == t.size(-2) * t.size(-1), "major_check: group stride"
        assert d.dtype == torch.bfloat16 and d.stride(-1) == 1
        assert a[0].dtype == b[0].dtype == torch.float8_e4m3fn
        assert masked_m.dtype == torch.int32 and masked_m.is_contiguous() and expected_m > 0
        G, M, K = a[0].shape
        assert M % 128 == 0, "capacity layout: whole 128-row tiles per group"
        sfa = a[1]
        assert sfa.shape == (G, M, -(-K // 128)) and sfa.stride(-2) == 1 and sfa.stride(-1) == -(-M // 4) * 4, \
            "activation scales must already be MN-major and TMA-aligned (no transpose inside the call)"
        assert b[1].is_contiguous() and b[1].dtype == torch.float32
        for g in range(G):
            m = int(masked_m[g])
            x = dequant_per_token(a[0][g, :m], a[1][g, :m].contiguous())
            w = dequant_per_block(b[0][g], b[1][g])
            d[g, :m] = (x @ w.T).to(torch.bfloat16)


def test_deep_gemm_backend_layout_and_numerics_on_cpu():
    fake = FakeDeepGemm()
    be = B.DeepGemmBackend(shape("tiny"), 3, 20, device="cpu", deep_gemm_module=fake, l2=3 * 10**5)
    assert be.cap == 128 and be.copies == B.copies_for(shape("tiny").bytes(1.0), 3 * 10**5) == 7
    for G, n in ((1, 1), (3, 20), (2, 7)):
        err = be.check_numerics(G, n)
        assert set(err) == {"up", "act", "down"}
        assert err["up"] < 1e-2 and err["down"] < 1e-2, (G, n, err)  # bf16 output of exact fp8 products
        assert 1e-3 < err["act"] < be.numerics_tol["act"], (G, n, err)  # e4m3 rounding of SiLU-and-mul
    assert fake.calls == 6
    with pytest.raises(ValueError, match="outside the prepared range"):
        be.check_numerics(4, 1)


def test_deep_gemm_numerics_check_catches_unwritten_rows():
    class Lazy(FakeDeepGemm):
        def m_grouped_fp8_gemm_nt_masked(self, a, b, d, masked_m, expected_m):
            super().m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, expected_m)
            d[-1, 0] = float("nan")  # a real row of the last group left unwritten

    be = B.DeepGemmBackend(shape("tiny"), 2, 8, device="cpu", deep_gemm_module=Lazy(), l2=10**5)
    assert be.check_numerics(2, 8)["down"] == float("inf")


def test_fp8_operands_round_trip():
    q, s = B.random_fp8_weights(2, 256, 300, "cpu", 0)
    assert q.shape == (2, 256, 300) and s.shape == (2, 2, 3)
    w = torch.randn(2 * 256, 300, generator=torch.Generator().manual_seed(0)) / 300 ** 0.5
    back = torch.stack([dequant_per_block(q[g], s[g]) for g in range(2)]).view(512, 300)
    assert float((back - w).norm() / w.norm()) < 0.05  # e4m3 has a 3-bit mantissa
    with pytest.raises(ValueError, match="multiple of 128"):
        B.random_fp8_weights(1, 100, 128, "cpu", 0)


# ------------------------------------------------------------------ the timer, on a fake clock
class FakeStream:
    """A CUDA stream in miniature: host and device clocks (us).  Each enqueue costs host time;
    an operation starts when the device is free and the host has finished enqueuing it."""

    def __init__(self, launch_us=8.0, record_us=1.0, spin_launch_us=2.0):
        self.host = self.dev = 0.0
        self.launch_us, self.record_us, self.spin_launch_us = launch_us, record_us, spin_launch_us
        self.replayed = []

    def _enqueue(self, host_cost, dur):
        self.host += host_cost
        self.dev = max(self.dev, self.host) + dur
        return self.dev

    # the CudaApi surface
    def warm(self, fn, copies, warmup):
        for c in range(copies):
            for _ in range(warmup):
                fn(c)

    def capture(self, fn, c):
        api = self

        class Graph:
            def replay(self_):
                api.replayed.append(c)
                api._enqueue(api.launch_us, fn(c))
        return Graph()

    def event(self):
        api = self

        class Event:
            def record(self_):
                self_.t = api._enqueue(api.record_us, 0.0)

            def synchronize(self_):
                api.host = max(api.host, self_.t)

            def elapsed_time(self_, other):
                return (other.t - self_.t) / 1e3  # milliseconds, as torch reports
        return Event()

    def spin(self, us):
        if us > 0:
            self._enqueue(self.spin_launch_us, us)

    def synchronize(self):
        self.host = self.dev = max(self.host, self.dev)


def test_timer_keeps_host_launch_out_of_the_sample():
    kernel = {0: 5.0, 1: 5.0, 2: 5.0}
    api = FakeStream()
    t = B.GraphTimer(replays=9, warmup=1, spin_us=50, api=api)
    assert t.time(lambda c: kernel[c], copies=3) == pytest.approx(5.0)
    assert api.replayed[3:] == [0, 1, 2] * 3  # one upload replay per graph, then round-robin
    naive = B.GraphTimer(replays=9, warmup=1, spin_us=0, api=FakeStream())
    # without the spin the graph launch (8 us) falls between the two events
    assert naive.time(lambda c: kernel[c], copies=3) == pytest.approx(5.0 + 8.0)
    # a spin shorter than the host's work ahead of the graph leaves part of the launch inside
    short = B.GraphTimer(replays=5, warmup=0, spin_us=4, api=FakeStream())
    assert 5.0 < short.time(lambda c: 5.0, copies=1) < 14.0


def test_timer_back_to_back_agrees_with_spin_timing():
    api = FakeStream()
    t = B.GraphTimer(replays=4, warmup=0, spin_us=50, api=api)
    graphs = t.capture(lambda c: 20.0, 2)  # kernels longer than the launch: replays queue up
    assert t.back_to_back(graphs, k=10) == pytest.approx(20.0)
    assert t.time_graphs(graphs) == pytest.approx(20.0)
    assert t.time_graphs(graphs, spin_us=0) == pytest.approx(28.0)


def test_timer_rejects_bad_arguments():
    with pytest.raises(ValueError):
        B.GraphTimer(replays=0)
    with pytest.raises(ValueError):
        B.GraphTimer(spin_us=float("nan"))
