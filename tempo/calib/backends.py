"""Microbenchmark backends (paper Appendix B): time one GPU's routed-expert work -- ``G``
activated experts with ``n`` tokens each -- for the calibration grid.

* ``deep_gemm``: DeepGEMM fp8 masked grouped GEMM (``sgl-deep-gemm``), the kernel SGLang and
  DeepEP use in decode: gate/up GEMM ``[G, n, d] x [G, 2f, d]`` and down GEMM ``[G, n, f] x
  [G, d, f]``, per-token 1x128 activation scales and 128x128 weight block scales,
  ``expected_m = n`` fixed per cell and a warm-up call before capture, so the JIT tuner never
  runs inside a timed region.
* ``torch_bf16``: bf16 on GPU, a loop over the experts (Table 6's "bf16 loop").
* ``cpu``: the same expert FFN (gate/up, SiLU-and-mul, down) in float32 torch on CPU, so the
  whole pipeline runs and is tested on a machine without a GPU.

GPU timing: each cell is captured in CUDA graphs, one per weight copy, and replayed
round-robin (30 timed replays, CUDA events, median), rotating through enough copies of the
weights that consecutive replays never find them in L2.  CPU timing: wall-clock median of
``reps`` calls, rotating two weight copies.
"""
from __future__ import annotations

import platform
import statistics
import time

from .shapes import ExpertShape

L2_BYTES = 60 * 2**20  # H100/H200 L2 is 50-60 MB; rotate well past it


def available_backends() -> list[str]:
    """Backends that can run here, best first."""
    out = []
    try:
        import torch
    except ImportError:
        return out
    if torch.cuda.is_available():
        try:
            import deep_gemm  # noqa: F401

            out.append("deep_gemm")
        except ImportError:
            pass
        out.append("torch_bf16")
    out.append("cpu")
    return out


def require(backend: str) -> None:
    """Raise ``RuntimeError`` naming the missing piece unless ``backend`` can run here.

    ``PROFILE=gpu`` must measure what the paper measured or stop: a missing ``deep_gemm`` is an
    error, never a quiet fallback to ``torch_bf16`` (Section 2.2 fits the fp8 grouped GEMM).
    ``backend``: ``cpu`` (torch), ``cuda`` or ``torch_bf16`` (torch with a CUDA GPU), ``deep_gemm``
    (that, plus the ``deep_gemm`` module of ``sgl-deep-gemm``)."""
    if backend not in ("cpu", "cuda", "torch_bf16", "deep_gemm"):
        raise ValueError(f"backend must be cpu, cuda, torch_bf16 or deep_gemm, got {backend!r}")
    try:
        import torch
    except ImportError as err:
        raise RuntimeError(f"backend {backend!r} needs torch, which is not importable here ({err}); "
                           "use the GPU environment: conda env create -f environment.yml") from err
    if backend == "cpu":
        return
    if not torch.cuda.is_available():
        raise RuntimeError(f"backend {backend!r} needs a CUDA GPU, and torch {torch.__version__} sees none "
                           f"(torch.version.cuda={torch.version.cuda}); check the driver and CUDA_VISIBLE_DEVICES")
    if backend == "deep_gemm":
        try:
            import deep_gemm  # noqa: F401
        except Exception as err:  # an ImportError, or a JIT/ABI failure raised while loading
            raise RuntimeError(f"backend 'deep_gemm' needs DeepGEMM (pip: sgl-deep-gemm, see requirements-gpu.txt), "
                               f"which failed to import: {type(err).__name__}: {err}") from err


def detect_backend() -> str:
    found = available_backends()
    if not found:
        raise RuntimeError("no calibration backend: install torch (pip install torch==2.13.0 for CPU)")
    return found[0]


def make_backend(name: str, shape: ExpertShape, max_G: int, max_n: int, **kw):
    classes = {"cpu": CpuBackend, "torch_bf16": TorchBf16Backend, "deep_gemm": DeepGemmBackend}
    if name == "auto":
        name = detect_backend()
    if name not in classes:
        raise ValueError(f"unknown backend {name!r}; choose from {', '.join(classes)} or 'auto'")
    return classes[name](shape, max_G, max_n, **kw)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_driver() -> str:
    """The NVIDIA driver version (``nvidia-smi``), or "unknown"."""
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


class CpuBackend:
    """float32 expert FFN on CPU with torch (see module docstring)."""

    name = "cpu"

    def __init__(self, shape: ExpertShape, max_G: int, max_n: int, reps: int = 5, copies: int = 2,
                 threads: int | None = None, seed: int = 0):
        import torch

        if threads:
            torch.set_num_threads(threads)
        self.shape, self.reps, self.copies = shape, reps, copies
        g = torch.Generator().manual_seed(seed)
        d, f = shape.d_model, shape.d_ff
        self.w13 = torch.randn(copies, max_G, 2 * f, d, generator=g) / d ** 0.5
        self.w2 = torch.randn(copies, max_G, d, f, generator=g) / f ** 0.5
        self.max_G, self.max_n = max_G, max_n
        self._gen = g
        self._i = 0

    def _run(self, x, c: int):
        import torch

        f = self.shape.d_ff
        out = []
        for e in range(x.shape[0]):
            h = x[e] @ self.w13[c, e].T
            a = torch.nn.functional.silu(h[:, :f]) * h[:, f:]
            out.append(a @ self.w2[c, e].T)
        return out

    def measure(self, G: int, n: int) -> float:
        """Median microseconds for ``G`` experts with ``n`` tokens each."""
        import torch

        if not (1 <= G <= self.max_G and 1 <= n <= self.max_n):
            raise ValueError(f"cell (G={G}, n={n}) outside the prepared range G<={self.max_G}, n<={self.max_n}")
        x = torch.randn(G, n, self.shape.d_model, generator=self._gen)
        with torch.inference_mode():
            self._run(x, 0)  # warm-up
            times = []
            for _ in range(self.reps):
                self._i = (self._i + 1) % self.copies
                t0 = time.perf_counter()
                self._run(x, self._i)
                times.append(time.perf_counter() - t0)
        return 1e6 * statistics.median(times)

    def info(self) -> dict:
        import torch

        return {"device": cpu_model(), "torch": torch.__version__, "threads": torch.get_num_threads(),
                "dtype": "float32", "timing": f"wall-clock median of {self.reps}, {self.copies} weight copies rotated"}


class _CudaGraphTimer:
    """Capture ``fn(copy)`` once per weight copy as CUDA graphs; time ``replays`` replays
    round-robin over the copies with CUDA events; return the median in microseconds."""

    @staticmethod
    def time(fn, copies: int, replays: int = 30, warmup: int = 3) -> float:
        import torch

        graphs = []
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for c in range(copies):
                for _ in range(warmup):
                    fn(c)
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        for c in range(copies):
            gr = torch.cuda.CUDAGraph()
            with torch.cuda.graph(gr):
                fn(c)
            graphs.append(gr)
        for gr in graphs:
            gr.replay()
        torch.cuda.synchronize()
        times = []
        for i in range(replays):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            graphs[i % copies].replay()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) * 1e3)
        del graphs
        return statistics.median(times)


def _copies_for(bytes_per_copy: float, at_least: int = 2, cap: int = 8) -> int:
    return int(min(cap, max(at_least, -(-2 * L2_BYTES // max(bytes_per_copy, 1)))))


class TorchBf16Backend:
    """bf16 expert FFN on GPU, a loop over the experts (Table 6 "bf16 loop")."""

    name = "torch_bf16"

    def __init__(self, shape: ExpertShape, max_G: int, max_n: int, replays: int = 30, seed: int = 0):
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch_bf16 needs a CUDA GPU")
        self.shape, self.replays = shape, replays
        self.max_G, self.max_n = max_G, max_n
        d, f = shape.d_model, shape.d_ff
        self.copies = _copies_for(shape.bytes(2.0) * 1)  # at G = 1; cells with more experts rotate more bytes
        torch.manual_seed(seed)
        self.w13 = torch.randn(self.copies, max_G, 2 * f, d, device="cuda", dtype=torch.bfloat16) / d ** 0.5
        self.w2 = torch.randn(self.copies, max_G, d, f, device="cuda", dtype=torch.bfloat16) / f ** 0.5
        self.x = torch.randn(max_G, max_n, d, device="cuda", dtype=torch.bfloat16)

    def measure(self, G: int, n: int) -> float:
        import torch

        f = self.shape.d_ff
        x = self.x[:G, :n]

        def fn(c):
            for e in range(G):
                h = x[e] @ self.w13[c, e].T
                a = torch.nn.functional.silu(h[:, :f]) * h[:, f:]
                a @ self.w2[c, e].T

        copies = min(self.copies, _copies_for(self.shape.bytes(2.0) * G))
        return _CudaGraphTimer.time(fn, copies, self.replays)

    def info(self) -> dict:
        import torch

        return {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
                "driver": gpu_driver(), "dtype": "bfloat16", "timing": f"CUDA graphs, {self.replays}-replay median, weight copies rotated"}


class DeepGemmBackend:
    """DeepGEMM fp8 masked grouped GEMM (see module docstring)."""

    name = "deep_gemm"

    def __init__(self, shape: ExpertShape, max_G: int, max_n: int, replays: int = 30, seed: int = 0):
        import torch

        import deep_gemm

        from .fp8 import grouped_masked_inputs

        if not torch.cuda.is_available():
            raise RuntimeError("deep_gemm needs a CUDA GPU")
        self.dg = deep_gemm
        self.gemm = (getattr(deep_gemm, "m_grouped_fp8_gemm_nt_masked", None)
                     or getattr(deep_gemm, "m_grouped_gemm_fp8_fp8_bf16_nt_masked"))
        self.shape, self.replays = shape, replays
        self.max_G, self.max_n = max_G, max_n
        d, f = shape.d_model, shape.d_ff
        self.copies = _copies_for(shape.bytes(1.0))
        # weights: copies x (gate/up [G, 2f, d], down [G, d, f]); activations: one set
        self.up, self.down = [], []
        for c in range(self.copies):
            _, b = grouped_masked_inputs(max_G, 1, 2 * f, d, device="cuda", seed=seed + c)
            self.up.append(b)
            _, b = grouped_masked_inputs(max_G, 1, d, f, device="cuda", seed=seed + 100 + c)
            self.down.append(b)
        self.a_up, _ = grouped_masked_inputs(max_G, max_n, 1, d, device="cuda", seed=seed + 7)
        self.a_down, _ = grouped_masked_inputs(max_G, max_n, 1, f, device="cuda", seed=seed + 8)
        self.out_up = torch.empty(max_G, max_n, 2 * f, device="cuda", dtype=torch.bfloat16)
        self.out_down = torch.empty(max_G, max_n, d, device="cuda", dtype=torch.bfloat16)

    def measure(self, G: int, n: int) -> float:
        import torch

        masked_m = torch.full((G,), n, device="cuda", dtype=torch.int32)
        a1 = (self.a_up[0][:G, :n].contiguous(), self.a_up[1][:G, :n].contiguous())
        a2 = (self.a_down[0][:G, :n].contiguous(), self.a_down[1][:G, :n].contiguous())
        o1, o2 = self.out_up[:G, :n], self.out_down[:G, :n]

        def fn(c):
            up = (self.up[c][0][:G], self.up[c][1][:G])
            down = (self.down[c][0][:G], self.down[c][1][:G])
            self.gemm(a1, up, o1, masked_m, n)  # expected_m = n: the tuner's key, fixed per cell
            self.gemm(a2, down, o2, masked_m, n)

        fn(0)  # JIT compile / tune outside the timed region
        torch.cuda.synchronize()
        copies = min(self.copies, _copies_for(self.shape.bytes(1.0) * G))
        return _CudaGraphTimer.time(fn, copies, self.replays)

    def info(self) -> dict:
        import torch

        return {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
                "driver": gpu_driver(), "deep_gemm": getattr(self.dg, "__version__", "unknown"), "dtype": "fp8 e4m3 (1x128 / 128x128 scales)",
                "timing": f"CUDA graphs, {self.replays}-replay median, weight copies rotated"}
