"""Microbenchmark backends (paper Appendix B): time one GPU's routed-expert work -- ``G``
activated experts with ``n`` tokens each -- for the calibration grid.

* ``deep_gemm``: DeepGEMM's fp8 masked grouped GEMM (``sgl-deep-gemm``), the kernel SGLang
  runs for decode with DeepEP's low-latency layout: gate/up ``[G, cap, d] x [G, 2f, d]`` and
  down ``[G, cap, f] x [G, d, f]``, per-token 1x128 activation scales and 128x128 weight block
  scales.  The layout is SGLang's capacity layout: every group holds ``cap`` rows, a multiple
  of DeepGEMM's 128-row M tile, of which ``masked_m = n`` are real, so the kernel's full-tile
  stores never reach the next group's rows; outputs are whole ``[G, cap, N]`` tensors
  (contiguous along the group dimension, as DeepGEMM asserts); the activation scales are put
  in the MN-major TMA-aligned layout once per backend, outside every timed graph (otherwise
  DeepGEMM transposes them inside each call); ``expected_m = n`` per cell and a warm-up call
  before capture, so DeepGEMM's JIT compiler never runs inside a timed region.
* ``torch_bf16``: bf16 on GPU, a loop over the experts (Table 6's "bf16 loop").
* ``cpu``: the same expert FFN (gate/up, SiLU-and-mul, down) in float32 torch on CPU, so the
  whole pipeline runs and is tested on a machine without a GPU.

GPU timing (:class:`GraphTimer`): each cell is captured in CUDA graphs, one per weight copy,
and replayed round-robin; each sample is bracketed by CUDA events, with a spin kernel queued
ahead of the start event so that the host has finished launching the graph before the device
reaches the start event (otherwise the host's launch latency, a few microseconds, is inside
every sample -- see :meth:`GraphTimer.time`; ``python -m tempo gpu-check`` measures the
difference).  The weight copies rotated through are sized in bytes: at least twice the
device's L2 cache for the cell's ``G`` experts, so consecutive replays never find their
weights in L2.  CPU timing: wall-clock median of ``reps`` calls, rotating two weight copies.
"""
from __future__ import annotations

import math
import platform
import statistics
import time

from .shapes import ExpertShape

L2_BYTES_DEFAULT = 60 * 2**20  # when the device does not say: H100/H200 L2 is 50-60 MB
BACKENDS = ("deep_gemm", "torch_bf16", "cpu")


def backend_status() -> dict:
    """Whether each backend can run here: ``{name: (ok, reason)}``.

    Never raises: an import of ``deep_gemm`` can fail with ``ImportError`` (not installed),
    ``OSError`` (a build against another torch: undefined symbols; a missing CUDA runtime) or
    ``AssertionError`` (no CUDA home for its JIT compiler); each is reported as the reason."""
    out = {}
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 -- any import failure means "not here"
        why = f"torch does not import ({type(exc).__name__}: {exc})"
        return {b: (False, why) for b in BACKENDS}
    out["cpu"] = (True, f"torch {torch.__version__} on CPU")
    try:
        cuda = bool(torch.cuda.is_available())
        why_cuda = "" if cuda else f"torch {torch.__version__} sees no CUDA GPU (CUDA build: {torch.version.cuda})"
    except Exception as exc:  # noqa: BLE001
        cuda, why_cuda = False, f"CUDA query failed ({type(exc).__name__}: {exc})"
    out["torch_bf16"] = (True, f"torch {torch.__version__}, CUDA {torch.version.cuda}") if cuda else (False, why_cuda)
    if not cuda:
        out["deep_gemm"] = (False, why_cuda)
    else:
        try:
            import deep_gemm

            gemm_fn(deep_gemm)
            out["deep_gemm"] = (True, f"deep_gemm {deep_gemm_version(deep_gemm)}")
        except Exception as exc:  # noqa: BLE001
            out["deep_gemm"] = (False, f"import deep_gemm failed: {type(exc).__name__}: {str(exc)[:300]}")
    return {b: out[b] for b in BACKENDS}


def available_backends() -> list[str]:
    """Backends that can run here, best first (see :func:`backend_status` for why not)."""
    return [b for b, (ok, _) in backend_status().items() if ok]


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
        raise RuntimeError("no calibration backend: " + backend_status()["cpu"][1] +
                           "; install torch (pip install torch==2.13.0 for CPU)")
    return found[0]


def make_backend(name: str, shape: ExpertShape, max_G: int, max_n: int, **kw):
    classes = {"cpu": CpuBackend, "torch_bf16": TorchBf16Backend, "deep_gemm": DeepGemmBackend}
    if name == "auto":
        name = detect_backend()
    if name not in classes:
        raise ValueError(f"unknown backend {name!r}; choose from {', '.join(classes)} or 'auto'")
    if int(max_G) < 1 or int(max_n) < 1:
        raise ValueError(f"max_G and max_n must be >= 1, got {max_G}, {max_n}")
    return classes[name](shape, int(max_G), int(max_n), **kw)


def gemm_fn(deep_gemm):
    """DeepGEMM's fp8 masked grouped GEMM (``m_grouped_fp8_gemm_nt_masked`` in sgl-deep-gemm;
    ``m_grouped_fp8_fp4_gemm_nt_masked`` is the same function)."""
    for name in ("m_grouped_fp8_gemm_nt_masked", "m_grouped_fp8_fp4_gemm_nt_masked", "fp8_m_grouped_gemm_nt_masked"):
        fn = getattr(deep_gemm, name, None)
        if fn is not None:
            return fn
    raise AttributeError("deep_gemm has no fp8 masked grouped GEMM (m_grouped_fp8_gemm_nt_masked)")


def deep_gemm_version(deep_gemm) -> str:
    v = getattr(deep_gemm, "__version__", None)
    if v:
        return str(v)
    try:
        from importlib.metadata import version

        return version("sgl-deep-gemm")
    except Exception:  # noqa: BLE001
        return "unknown"


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


# ---------------------------------------------------------------------------------- GPU timing
class CudaApi:
    """The few CUDA operations :class:`GraphTimer` uses, over ``torch.cuda`` (a fake with the
    same methods drives the timer's logic in the CPU tests)."""

    def __init__(self):
        import torch

        self.torch = torch
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        self.clock_khz = getattr(props, "clock_rate", 0) or 1_980_000  # for the spin kernel's cycle count

    def warm(self, fn, copies: int, warmup: int) -> None:
        torch = self.torch
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for c in range(copies):
                for _ in range(warmup):
                    fn(c)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()

    def capture(self, fn, c: int):
        g = self.torch.cuda.CUDAGraph()
        with self.torch.cuda.graph(g):
            fn(c)
        return g

    def event(self):
        return self.torch.cuda.Event(enable_timing=True)

    def spin(self, us: float) -> None:
        if us > 0:
            self.torch.cuda._sleep(int(us * self.clock_khz / 1e3))

    def synchronize(self) -> None:
        self.torch.cuda.synchronize()


class GraphTimer:
    """Times a captured CUDA graph the way the expert time is defined: device time from the
    first kernel's start to the last kernel's end, without the host's launch latency.

    ``time(fn, copies)``: ``fn(c)`` enqueues the work on weight copy ``c``; each copy is
    warmed up eagerly (``warmup`` calls: JIT compilation and autotuning happen here), captured
    as a CUDA graph and replayed once (graph upload); then ``replays`` samples round-robin over
    the copies.  A sample is: a spin kernel of ``spin_us`` queued first, then the start event,
    the graph replay, the end event, a synchronise.  While the device runs the spin, the host
    enqueues the start event and launches the graph, so the device reaches the start event with
    the graph already queued behind it: the sample is the graph's device time alone.  Without
    the spin (``spin_us=0``) the start event is timestamped as soon as it is enqueued on the
    idle device, and the host's graph-launch latency falls between the two events.  Returns
    the median sample in microseconds; ``samples`` keeps the last call's samples.

    ``back_to_back(fn, k)`` is the independent check: ``k`` replays of one graph between two
    events, divided by ``k`` (the launches overlap the execution of the previous replay).
    """

    def __init__(self, replays: int = 30, warmup: int = 3, spin_us: float = 50.0, api=None):
        if replays < 1 or warmup < 0 or not spin_us >= 0:
            raise ValueError(f"need replays >= 1, warmup >= 0, spin_us >= 0; got {replays}, {warmup}, {spin_us}")
        self.replays, self.warmup, self.spin_us = int(replays), int(warmup), float(spin_us)
        self._api = api
        self.samples: list[float] = []

    @property
    def api(self):
        if self._api is None:
            self._api = CudaApi()
        return self._api

    def capture(self, fn, copies: int) -> list:
        api = self.api
        api.warm(fn, copies, self.warmup)
        graphs = [api.capture(fn, c) for c in range(copies)]
        for g in graphs:
            g.replay()
        api.synchronize()
        return graphs

    def time_graphs(self, graphs: list, spin_us: float | None = None) -> float:
        api = self.api
        spin = self.spin_us if spin_us is None else float(spin_us)
        times = []
        for i in range(self.replays):
            s, e = api.event(), api.event()
            api.spin(spin)
            s.record()
            graphs[i % len(graphs)].replay()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) * 1e3)
        self.samples = times
        return statistics.median(times)

    def time(self, fn, copies: int) -> float:
        graphs = self.capture(fn, max(1, int(copies)))
        try:
            return self.time_graphs(graphs)
        finally:
            del graphs

    def back_to_back(self, graphs: list, k: int = 50) -> float:
        """Mean device time per replay over ``k`` back-to-back replays (round-robin)."""
        api = self.api
        api.synchronize()
        s, e = api.event(), api.event()
        api.spin(self.spin_us)
        s.record()
        for i in range(k):
            graphs[i % len(graphs)].replay()
        e.record()
        e.synchronize()
        return s.elapsed_time(e) * 1e3 / k


def l2_bytes() -> int:
    """The current CUDA device's L2 cache size in bytes (``L2_BYTES_DEFAULT`` if unknown)."""
    try:
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return int(getattr(props, "L2_cache_size", 0)) or L2_BYTES_DEFAULT
    except Exception:  # noqa: BLE001
        return L2_BYTES_DEFAULT


def copies_for(bytes_per_copy: float, l2: int, factor: float = 2.0, at_least: int = 2) -> int:
    """Weight copies to rotate through so that the rotation spans ``factor`` x the L2 cache:
    ``ceil(factor * l2 / bytes_per_copy)``, at least ``at_least``.  No cap: a cell whose
    weights are small (Qwen3-30B fp8 at G = 1: 4.7 MB) needs many copies."""
    if bytes_per_copy <= 0 or l2 <= 0 or factor <= 0:
        raise ValueError(f"bytes_per_copy, l2 and factor must be positive, got {bytes_per_copy}, {l2}, {factor}")
    return int(max(at_least, math.ceil(factor * l2 / bytes_per_copy)))


def _check_cell(be, G: int, n: int) -> None:
    if not (1 <= int(G) <= be.max_G and 1 <= int(n) <= be.max_n):
        raise ValueError(f"cell (G={G}, n={n}) outside the prepared range G<={be.max_G}, n<={be.max_n}")


def _gpu_info(be, dtype: str, extra: dict | None = None) -> dict:
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "driver": gpu_driver(), "l2_bytes": be.l2, "sms": props.multi_processor_count, "dtype": dtype,
            **(extra or {}),
            "timing": (f"CUDA graphs, {be.timer.replays}-replay median, spin {be.timer.spin_us:g} us ahead of the "
                       f"start event, weight copies rotated over >= {be.l2_factor:g}x L2 "
                       f"({be.copies} copies allocated at G = 1)")}


class TorchBf16Backend:
    """bf16 expert FFN on GPU, a loop over the experts (Table 6 "bf16 loop")."""

    name = "torch_bf16"

    def __init__(self, shape: ExpertShape, max_G: int, max_n: int, replays: int = 30, seed: int = 0,
                 spin_us: float = 50.0, l2_factor: float = 2.0, l2: int | None = None):
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch_bf16 needs a CUDA GPU: " + backend_status()["torch_bf16"][1])
        self.shape, self.timer = shape, GraphTimer(replays, spin_us=spin_us)
        self.max_G, self.max_n = max_G, max_n
        self.l2, self.l2_factor = int(l2 or l2_bytes()), l2_factor
        d, f = shape.d_model, shape.d_ff
        self.expert_bytes = shape.bytes(2.0)
        self.copies = copies_for(self.expert_bytes, self.l2, l2_factor)  # enough for G = 1
        torch.manual_seed(seed)
        self.w13 = torch.randn(self.copies, max_G, 2 * f, d, device="cuda", dtype=torch.bfloat16) / d ** 0.5
        self.w2 = torch.randn(self.copies, max_G, d, f, device="cuda", dtype=torch.bfloat16) / f ** 0.5
        self.x = torch.randn(max_G, max_n, d, device="cuda", dtype=torch.bfloat16)

    def _fn(self, G: int, n: int, keep=None):
        import torch

        f = self.shape.d_ff
        x = self.x[:G, :n]

        def fn(c):
            for e in range(G):
                h = x[e] @ self.w13[c, e].T
                a = torch.nn.functional.silu(h[:, :f]) * h[:, f:]
                y = a @ self.w2[c, e].T
                if keep is not None:
                    keep.append(y)
        return fn

    def cell_copies(self, G: int) -> int:
        return min(self.copies, copies_for(self.expert_bytes * G, self.l2, self.l2_factor))

    def measure(self, G: int, n: int) -> float:
        _check_cell(self, G, n)
        return self.timer.time(self._fn(G, n), self.cell_copies(G))

    def check_numerics(self, G: int, n: int) -> float:
        """Relative error ``|out - ref| / |ref|`` of the bf16 FFN against float32 on the same
        (bf16-rounded) inputs, over all ``G`` experts."""
        import torch

        _check_cell(self, G, n)
        keep = []
        self._fn(G, n, keep)(0)
        f = self.shape.d_ff
        num = den = 0.0
        for e in range(G):
            x = self.x[e, :n].float()
            h = x @ self.w13[0, e].float().T
            ref = (torch.nn.functional.silu(h[:, :f]) * h[:, f:]) @ self.w2[0, e].float().T
            num += float(((keep[e].float() - ref) ** 2).sum())
            den += float((ref ** 2).sum())
        return math.sqrt(num / den) if den > 0 else float("nan")

    def info(self) -> dict:
        return _gpu_info(self, "bfloat16")


def mn_major_tma_aligned(sf):
    """Activation scales ``[G, M, K/128]`` in the layout DeepGEMM's SM90 kernels read without a
    transpose: MN-major with the M stride padded to 4 floats (16 bytes, TMA alignment), i.e.
    strides ``(align(M, 4) * K/128, 1, align(M, 4))`` -- ``deep_gemm.get_mn_major_tma_aligned_tensor``
    in plain torch (used when that function is missing; tested on CPU)."""
    import torch

    squeeze = sf.dim() == 2
    if squeeze:
        sf = sf[None]
    if sf.dim() != 3:
        raise ValueError(f"scales must be [G, M, K/128] or [M, K/128], got shape {tuple(sf.shape)}")
    G, M, Kb = sf.shape
    Ma = -(-M // 4) * 4
    buf = torch.empty(G, Kb, Ma, dtype=sf.dtype, device=sf.device)
    buf[:, :, :M] = sf.transpose(1, 2)
    if Ma > M:
        buf[:, :, M:] = 0
    out = buf.transpose(1, 2)[:, :M, :]
    return out[0] if squeeze else out


def capacity(max_n: int, tile: int = 128) -> int:
    """Rows per group of the masked (capacity) layout: ``max_n`` rounded up to DeepGEMM's M tile."""
    if max_n < 1:
        raise ValueError(f"max_n must be >= 1, got {max_n}")
    return -(-int(max_n) // tile) * tile


def random_fp8_weights(G: int, n_out: int, k: int, device: str, seed: int):
    """``G`` random weight matrices ``[n_out, k]`` (std 1/sqrt(k)) as DeepGEMM's fp8 operand:
    ``(fp8 [G, n_out, k], float32 [G, n_out/128, k/128])``, quantised on ``device``."""
    import torch

    from .fp8 import BLOCK, per_block_cast_to_fp8

    if n_out % BLOCK:
        raise ValueError(f"weight rows must be a multiple of {BLOCK}, got {n_out}")
    g = torch.Generator(device=device).manual_seed(seed)
    w = torch.randn(G * n_out, k, generator=g, device=device) / k ** 0.5
    q, s = per_block_cast_to_fp8(w)
    return q.view(G, n_out, k), s.view(G, n_out // BLOCK, -(-k // BLOCK)).contiguous()


def random_fp8_activations(G: int, cap: int, k: int, device: str, seed: int):
    """Activations in the capacity layout: ``(fp8 [G, cap, k], float32 [G, cap, k/128])``
    (scales row-major; see :func:`mn_major_tma_aligned`)."""
    import torch

    from .fp8 import per_token_cast_to_fp8

    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(G * cap, k, generator=g, device=device)
    q, s = per_token_cast_to_fp8(x)
    return q.view(G, cap, k), s.view(G, cap, -1)


class DeepGemmBackend:
    """DeepGEMM fp8 masked grouped GEMM (see module docstring)."""

    name = "deep_gemm"

    def __init__(self, shape: ExpertShape, max_G: int, max_n: int, replays: int = 30, seed: int = 0,
                 spin_us: float = 50.0, l2_factor: float = 2.0, l2: int | None = None, device: str = "cuda",
                 deep_gemm_module=None):
        import torch

        if deep_gemm_module is None:
            ok, why = backend_status()["deep_gemm"]
            if not ok:
                raise RuntimeError(f"deep_gemm backend unavailable: {why}")
            import deep_gemm as deep_gemm_module
        self.device = device
        self.dg, self.gemm = deep_gemm_module, gemm_fn(deep_gemm_module)
        self.shape, self.timer = shape, GraphTimer(replays, spin_us=spin_us)
        self.max_G, self.max_n = max_G, max_n
        self.l2 = int(l2 or (l2_bytes() if device == "cuda" else L2_BYTES_DEFAULT))
        self.l2_factor = l2_factor
        d, f = shape.d_model, shape.d_ff
        self.cap = capacity(max_n)
        self.expert_bytes = shape.bytes(1.0)
        self.copies = copies_for(self.expert_bytes, self.l2, l2_factor)
        self.up = [random_fp8_weights(max_G, 2 * f, d, device, seed + c) for c in range(self.copies)]
        self.down = [random_fp8_weights(max_G, d, f, device, seed + 1000 + c) for c in range(self.copies)]
        to_mn = getattr(self.dg, "get_mn_major_tma_aligned_tensor", None) or mn_major_tma_aligned
        q, s = random_fp8_activations(max_G, self.cap, d, device, seed + 7)
        self.a_up = (q, to_mn(s))
        q, s = random_fp8_activations(max_G, self.cap, f, device, seed + 8)
        self.a_down = (q, to_mn(s))
        self.out_up = torch.empty(max_G, self.cap, 2 * f, device=device, dtype=torch.bfloat16)
        self.out_down = torch.empty(max_G, self.cap, d, device=device, dtype=torch.bfloat16)
        self._sync()

    def _sync(self):
        if self.device != "cpu":
            import torch

            torch.cuda.synchronize()

    def _fn(self, G: int, n: int):
        import torch

        masked_m = torch.full((G,), n, device=self.device, dtype=torch.int32)
        a1 = (self.a_up[0][:G], self.a_up[1][:G])
        a2 = (self.a_down[0][:G], self.a_down[1][:G])
        o1, o2 = self.out_up[:G], self.out_down[:G]

        def fn(c):
            up = (self.up[c][0][:G], self.up[c][1][:G])
            down = (self.down[c][0][:G], self.down[c][1][:G])
            self.gemm(a1, up, o1, masked_m, n)  # expected_m = n: the tuner's key, fixed per cell
            self.gemm(a2, down, o2, masked_m, n)
        fn.masked_m = masked_m
        return fn

    def cell_copies(self, G: int) -> int:
        return min(self.copies, copies_for(self.expert_bytes * G, self.l2, self.l2_factor))

    def measure(self, G: int, n: int) -> float:
        _check_cell(self, G, n)
        fn = self._fn(G, n)
        fn(0)  # JIT compile / tune outside the timed region
        self._sync()
        return self.timer.time(fn, self.cell_copies(G))

    def check_numerics(self, G: int, n: int) -> float:
        """Relative error of both GEMMs' real rows (``n`` per group, every group) against the
        float32 product of the dequantised operands."""
        import torch

        from .fp8 import dequant_per_block, dequant_per_token

        _check_cell(self, G, n)
        self.out_up.fill_(float("nan"))
        self.out_down.fill_(float("nan"))
        self._fn(G, n)(0)
        self._sync()
        num = den = 0.0
        for a, (bq, bs), out in ((self.a_up, self.up[0], self.out_up), (self.a_down, self.down[0], self.out_down)):
            for g in range(G):
                x = dequant_per_token(a[0][g, :n], a[1][g, :n].contiguous())
                w = dequant_per_block(bq[g], bs[g])
                ref = x @ w.T
                got = out[g, :n].float()
                if not torch.isfinite(got).all():
                    return float("inf")  # a real row was not written
                num += float(((got - ref) ** 2).sum())
                den += float((ref ** 2).sum())
        return math.sqrt(num / den) if den > 0 else float("nan")

    def info(self) -> dict:
        return _gpu_info(self, "fp8 e4m3 (1x128 / 128x128 scales), masked capacity layout",
                         {"deep_gemm": deep_gemm_version(self.dg), "capacity_rows": self.cap})
