"""Microbenchmark backends (paper Appendix B): time one GPU's routed-expert work -- ``G``
activated experts with ``n`` tokens each -- for the calibration grid, and the same work for any
per-expert token counts for the EP microbenchmark.

The interface (:class:`ExpertBackend`; ARCHITECTURE.md, "A GPU backend"):

* class attributes ``name``, ``preference`` (``auto`` picks the highest that can run), ``gpu``,
  ``bytes_per_param``, ``dtype``, ``kernel``, ``numerics_tol``, ``checks`` (gpu-check's grids);
* ``status() -> (ok, reason)``, never raises; construction ``(shape, max_G, max_n, copies=...)``;
* ``region(loads, expected_m=None) -> fn(c)``: enqueues the work for per-slot token counts
  ``loads: int[G]`` on weight copy ``c`` (the one method a new backend writes);
* ``measure(G, n) -> us`` (median device time of a calibration cell);
  ``time_loads(loads, copy, expected_m, mode, spin_us) -> us`` (one epbench sample);
  ``prepare(...) -> run`` and ``time_prepared(run) -> us``;
* ``check_numerics(G, n) -> relative error`` against float32; ``info() -> dict``.

:func:`register_backend` adds one to the registry that :func:`backend_status`, :func:`require`,
:func:`make_backend`, gpu-check and epbench's ``--expert-kernel`` enumerate.  Backends:
``deep_gemm`` (:class:`DeepGemmBackend`, SM90 only), ``torch_bf16`` (a loop over the experts,
Table 6's "bf16 loop") and ``cpu`` (float32 torch).  GPU cells are timed by :class:`GraphTimer`,
over weight copies sized to at least twice the L2 cache; CPU cells by the wall-clock median of
``reps`` calls over two weight copies.
"""
from __future__ import annotations

import math
import platform
import statistics
import sys
import time

from .shapes import ExpertShape

L2_BYTES_DEFAULT = 60 * 2**20  # when the device does not say: H100/H200 L2 is 50-60 MB

#: name -> backend class, filled by :func:`register_backend`
_REGISTRY: dict[str, type] = {}


def register_backend(cls):
    """Class decorator: make a :class:`ExpertBackend` subclass known by its ``name`` to
    :func:`backend_status`, :func:`make_backend`, :func:`require`, gpu-check and epbench."""
    name = getattr(cls, "name", "")
    if not isinstance(name, str) or not name or name in ("auto", "cuda"):
        raise ValueError(f"a backend needs a name other than 'auto' and 'cuda', got {name!r}")
    for attr in ("status", "region", "measure", "time_loads", "check_numerics", "info"):
        if not callable(getattr(cls, attr, None)):
            raise TypeError(f"backend {name!r} lacks {attr}() of the backend interface")
    if not (isinstance(cls.bytes_per_param, (int, float)) and cls.bytes_per_param > 0):
        raise ValueError(f"backend {name!r}: bytes_per_param must be positive, got {cls.bytes_per_param!r}")
    _REGISTRY[name] = cls
    return cls


def unregister_backend(name: str) -> None:
    """Remove a registered backend (tests that register a toy one)."""
    _REGISTRY.pop(name, None)


def backend_names() -> tuple[str, ...]:
    """Registered backends, best first (highest ``preference``)."""
    return tuple(sorted(_REGISTRY, key=lambda n: -_REGISTRY[n].preference))


def backend_class(name: str) -> type:
    if name not in _REGISTRY:
        raise ValueError(f"unknown backend {name!r}; choose from {', '.join(backend_names())} or 'auto'")
    return _REGISTRY[name]


def gpu_backends() -> list[str]:
    """Registered backends that run on a GPU, best first."""
    return [n for n in backend_names() if _REGISTRY[n].gpu]


def backend_status() -> dict:
    """Whether each backend can run here: ``{name: (ok, reason)}``, best first.

    Never raises: an import of ``deep_gemm`` can fail with ``ImportError`` (not installed),
    ``OSError`` (a build against another torch: undefined symbols; a missing CUDA runtime) or
    ``AssertionError`` (no CUDA home for its JIT compiler); each is reported as the reason."""
    try:
        import torch  # noqa: F401
    except Exception as exc:  # noqa: BLE001 -- any import failure means "not here"
        why = f"torch does not import ({type(exc).__name__}: {exc})"
        return {b: (False, why) for b in backend_names()}
    out = {}
    for b in backend_names():
        try:
            ok, why = _REGISTRY[b].status()
        except Exception as exc:  # noqa: BLE001 -- a status() that raises is a reason too
            ok, why = False, f"status check failed: {type(exc).__name__}: {exc}"
        out[b] = (bool(ok), str(why))
    return out


def available_backends() -> list[str]:
    """Backends that can run here, best first (see :func:`backend_status` for why not)."""
    return [b for b, (ok, _) in backend_status().items() if ok]


def require(backend: str) -> None:
    """Raise ``RuntimeError`` naming the missing piece unless ``backend`` can run here.

    ``PROFILE=gpu`` must measure what the paper measured or stop: a missing ``deep_gemm`` is an
    error, never a quiet fallback to ``torch_bf16`` (Section 2.2 fits the fp8 grouped GEMM).
    ``backend``: ``cuda`` (torch with a CUDA GPU) or a registered backend (``cpu``: torch;
    ``torch_bf16``: torch with a CUDA GPU; ``deep_gemm``: that, plus the ``deep_gemm`` module of
    ``sgl-deep-gemm`` on an SM90 GPU)."""
    names = backend_names()
    if backend != "cuda" and backend not in names:
        raise ValueError(f"backend must be cuda or one of {', '.join(names)}, got {backend!r}")
    try:
        import torch
    except ImportError as err:
        raise RuntimeError(f"backend {backend!r} needs torch, which is not importable here ({err}); "
                           "use the GPU environment: conda env create -f environment.yml") from err
    gpu = backend == "cuda" or _REGISTRY[backend].gpu
    if gpu and not torch.cuda.is_available():
        raise RuntimeError(f"backend {backend!r} needs a CUDA GPU, and torch {torch.__version__} sees none "
                           f"(torch.version.cuda={torch.version.cuda}); check the driver and CUDA_VISIBLE_DEVICES")
    if backend == "cuda":
        return
    ok, why = _REGISTRY[backend].status()
    if not ok:
        raise RuntimeError(f"backend {backend!r} cannot run here: {why}")


def detect_backend() -> str:
    found = available_backends()
    if not found:
        raise RuntimeError("no calibration backend: " + backend_status().get("cpu", (False, "none registered"))[1] +
                           "; install torch (pip install torch==2.13.0 for CPU)")
    return found[0]


def make_backend(name: str, shape: ExpertShape, max_G: int, max_n: int, **kw):
    """Construct backend ``name`` (``auto``: :func:`detect_backend`) for cells up to ``max_G``
    experts and ``max_n`` tokens each; ``kw`` are the backend's options."""
    if name == "auto":
        name = detect_backend()
    cls = backend_class(name)
    if int(max_G) < 1 or int(max_n) < 1:
        raise ValueError(f"max_G and max_n must be >= 1, got {max_G}, {max_n}")
    return cls(shape, int(max_G), int(max_n), **kw)


# ---------------------------------------------------------------------------------- DeepGEMM import
_CUDA_HOME_SETUP: dict | None = None


def import_deep_gemm():
    """``import deep_gemm``, after pointing its JIT compiler at an nvcc >= 12.9 in this process.

    ``deep_gemm`` reads ``CUDA_HOME`` (else ``CUDA_PATH``, the nvcc on ``PATH``,
    ``/usr/local/cuda``) once, at import, and never finds the pip-installed toolkit of the GPU
    lock; :func:`tempo.calib.cuda_env.ensure_cuda_home` sets ``os.environ["CUDA_HOME"]`` to it
    when DeepGEMM's own search would find no usable nvcc.  Runs once per process, before the
    first import (:func:`cuda_home_setup` returns what it found); every ``deep_gemm`` import in
    tempo goes through here.  Raises what the import raises."""
    global _CUDA_HOME_SETUP
    if _CUDA_HOME_SETUP is None and sys.modules.get("deep_gemm") is None:
        from .cuda_env import ensure_cuda_home

        _CUDA_HOME_SETUP = ensure_cuda_home()
    import deep_gemm

    return deep_gemm


def cuda_home_setup() -> dict | None:
    """What :func:`import_deep_gemm`'s call of ``ensure_cuda_home`` found (None before the
    first call): ``{"cuda_home", "nvcc", "source", "reason"}``."""
    return _CUDA_HOME_SETUP


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


def deep_gemm_arch_problem(capability) -> str | None:
    """Why this backend's DeepGEMM path cannot run on a GPU of compute ``capability``
    ``(major, minor)``, or None on SM90 (H100/H200/H20, the only architecture it supports).

    SM100 (B200, GB200): DeepGEMM wants UE8M0-packed integer scales there and converts float32
    scales inside every call by keeping their exponent bits (sgl-deep-gemm
    ``csrc/apis/layout.hpp``, the SM100 branch of ``transform_sf_into_required_layout``;
    ``smxx_layout.cuh``): the scales are rounded down to powers of two (wrong numerics) and the
    conversion kernels run inside every timed graph.  This backend builds SM90 float32 scales,
    so it refuses SM100 rather than time something else."""
    major, minor = (int(x) for x in capability)
    if major == 9:
        return None
    if major == 10:
        return (f"the GPU is SM{major}{minor} (Blackwell): DeepGEMM wants UE8M0-packed scales there and would "
                "truncate this backend's float32 scales to powers of two inside every call (wrong numerics, extra "
                "kernels in the timed graph); this backend supports SM90 only -- use torch_bf16, or add an SM100 "
                "backend that quantises with power-of-two scales and packs them once outside the graph")
    return f"DeepGEMM's fp8 masked grouped GEMM has kernels for SM90 and SM100 only; this GPU is SM{major}{minor}"


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


def _cuda_status() -> tuple[bool, str]:
    import torch

    try:
        if torch.cuda.is_available():
            return True, f"torch {torch.__version__}, CUDA {torch.version.cuda}"
        return False, f"torch {torch.__version__} sees no CUDA GPU (CUDA build: {torch.version.cuda})"
    except Exception as exc:  # noqa: BLE001
        return False, f"CUDA query failed ({type(exc).__name__}: {exc})"


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

    def capture_copy(self, fn, c: int):
        """One graph of ``fn`` on weight copy ``c``: warmed up eagerly (JIT compilation and
        autotuning happen here), captured, replayed once (upload)."""
        api = self.api
        api.warm(lambda _i: fn(c), 1, max(1, self.warmup))
        g = api.capture(fn, c)
        g.replay()
        api.synchronize()
        return g

    def time_once(self, run, spin_us: float | None = None) -> float:
        """One sample of ``run()`` (a graph's ``replay``, or an eager function that enqueues
        work) in microseconds: the device is drained, a spin of ``spin_us`` is queued, then the
        start event, ``run()``, the end event.  With a graph the sample is its device time; with
        an eager function the host's launches fall inside unless the spin outlasts them."""
        api = self.api
        spin = self.spin_us if spin_us is None else float(spin_us)
        api.synchronize()
        s, e = api.event(), api.event()
        api.spin(spin)
        s.record()
        run()
        e.record()
        e.synchronize()
        return s.elapsed_time(e) * 1e3

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


# ---------------------------------------------------------------------------------- the interface
class ExpertBackend:
    """The backend interface (see the module docstring).  A subclass sets the class attributes,
    implements ``status`` and ``region`` (and ``check_numerics``, ``info``), sets ``shape``,
    ``max_G``, ``max_n`` and ``copies`` in its constructor (GPU backends also ``timer``, ``l2``,
    ``l2_factor`` and ``expert_bytes``), and registers with :func:`register_backend`."""

    name = ""
    preference = 0          # auto picks the highest that can run
    gpu = True
    bytes_per_param = 2.0   # weight bytes per parameter
    dtype = ""
    kernel = ""             # the label epbench rows carry
    numerics_tol: dict = {}  # part of check_numerics() -> largest acceptable relative error
    checks: tuple = ()      # gpu-check short grids: ((shape name, (G values)), ...)

    @classmethod
    def status(cls) -> tuple[bool, str]:
        raise NotImplementedError

    def region(self, loads, expected_m: int | None = None):
        """``fn(c)``: enqueue the expert work for per-slot token counts ``loads`` on weight copy
        ``c``.  ``fn.key``, when set, says that a graph captured for ``fn`` stays valid for any
        later ``region`` with the same key (the loads live in a device buffer it reads)."""
        raise NotImplementedError

    def check_numerics(self, G: int, n: int) -> dict:
        raise NotImplementedError

    def info(self) -> dict:
        raise NotImplementedError

    # ------------------------------------------------------------------ shared machinery
    @property
    def max_load(self) -> int:
        """The most tokens one slot of a region may hold."""
        return self.max_n

    def _check_loads(self, loads) -> list[int]:
        try:
            out = [int(x) for x in loads]
        except (TypeError, ValueError):
            raise TypeError(f"loads must be a sequence of token counts, got {loads!r}") from None
        if not 1 <= len(out) <= self.max_G:
            raise ValueError(f"loads must hold 1..{self.max_G} slots (max_G), got {len(out)}")
        if min(out) < 0 or max(out) > self.max_load:
            raise ValueError(f"loads must lie in [0, {self.max_load}] tokens per slot, got {min(out)}..{max(out)}")
        return out

    def cell_copies(self, G: int) -> int:
        """Weight copies a cell of ``G`` experts rotates through: enough to span ``l2_factor`` x L2."""
        return min(self.copies, copies_for(self.expert_bytes * G, self.l2, self.l2_factor))

    def measure(self, G: int, n: int) -> float:
        """Median device time (us) of ``G`` experts with ``n`` tokens each (a calibration cell)."""
        _check_cell(self, G, n)
        return self.timer.time(self.region([n] * int(G), expected_m=int(n)), self.cell_copies(G))

    def _graph(self, fn, c: int):
        key = getattr(fn, "key", None)
        cache = self.__dict__.setdefault("_graphs", {})
        if key is not None and (key, c) in cache:
            return cache[(key, c)]
        g = self.timer.capture_copy(fn, c)
        if key is not None:
            cache[(key, c)] = g
        return g

    def prepare(self, loads, copy: int = 0, expected_m: int | None = None, mode: str = "graph"):
        """A callable that enqueues the region for per-slot ``loads`` on weight copy ``copy`` (modulo
        ``copies``): a captured graph's ``replay`` (``mode="graph"``; captured once per key and
        copy, after an eager warm-up) or the eager launches (``"eager"``, warmed up once per key
        so JIT compilation stays outside every sample).  CPU backends: the eager function.  All
        the host-side preparation (capture, the ``masked_m`` upload) happens here, not in the
        callable's time."""
        if mode not in ("graph", "eager"):
            raise ValueError(f"mode must be 'graph' or 'eager', got {mode!r}")
        c = int(copy) % self.copies
        fn = self.region(loads, expected_m)
        if not self.gpu:
            return lambda: fn(c)
        if mode == "eager":
            key = (getattr(fn, "key", None) or tuple(self._check_loads(loads)) + (expected_m,), c)
            warmed = self.__dict__.setdefault("_warmed", set())
            if key not in warmed:
                fn(c)
                self.timer.api.synchronize()
                warmed.add(key)
            return lambda: fn(c)
        return self._graph(fn, c).replay

    def time_prepared(self, run, spin_us: float | None = None) -> float:
        """One sample (us) of ``run`` (:meth:`prepare`): behind a spin of ``spin_us`` (default: the
        timer's) between CUDA events -- device time only when the spin outlasts the host's
        launching -- or, on CPU, the wall clock of one call."""
        if not self.gpu:
            t0 = time.perf_counter()
            run()
            return 1e6 * (time.perf_counter() - t0)
        return self.timer.time_once(run, spin_us)

    def time_loads(self, loads, copy: int = 0, expected_m: int | None = None, mode: str = "graph",
                   spin_us: float | None = None) -> float:
        """epbench's timed call: one sample (us) of the region for per-slot ``loads`` on weight
        copy ``copy`` (:meth:`prepare`, then :meth:`time_prepared`)."""
        return self.time_prepared(self.prepare(loads, copy, expected_m, mode), spin_us)


@register_backend
class CpuBackend(ExpertBackend):
    """The expert FFN (gate/up, SiLU-and-mul, down) in float32 torch on CPU, so the whole
    pipeline runs and is tested without a GPU."""

    name = "cpu"
    preference = 0
    gpu = False
    bytes_per_param = 4.0
    dtype = "float32"
    kernel = "loop"
    numerics_tol = {"ffn": 1e-4}

    @classmethod
    def status(cls):
        import torch

        return True, f"torch {torch.__version__} on CPU"

    def __init__(self, shape: ExpertShape, max_G: int, max_n: int, reps: int = 5, copies: int = 2,
                 threads: int | None = None, seed: int = 0):
        import torch

        if threads:
            torch.set_num_threads(threads)
        self.shape, self.reps, self.copies = shape, reps, max(1, int(copies))
        g = torch.Generator().manual_seed(seed)
        d, f = shape.d_model, shape.d_ff
        self.w13 = torch.randn(self.copies, max_G, 2 * f, d, generator=g) / d ** 0.5
        self.w2 = torch.randn(self.copies, max_G, d, f, generator=g) / f ** 0.5
        self.x = torch.randn(max_G, max_n, d, generator=g)
        self.max_G, self.max_n = max_G, max_n
        self._gen = g
        self._i = 0

    def region(self, loads, expected_m=None, keep=None):
        import torch

        loop = _ffn_loop(self, self._check_loads(loads), keep)

        def fn(c):
            with torch.inference_mode():
                loop(c)
        return fn

    def measure(self, G: int, n: int) -> float:
        """Median wall-clock microseconds of ``reps`` calls for ``G`` experts with ``n`` tokens
        each, rotating the weight copies."""
        _check_cell(self, G, n)
        fn = self.region([n] * int(G))
        fn(0)  # warm-up
        times = []
        for _ in range(self.reps):
            self._i = (self._i + 1) % self.copies
            t0 = time.perf_counter()
            fn(self._i)
            times.append(time.perf_counter() - t0)
        return 1e6 * statistics.median(times)

    def check_numerics(self, G: int, n: int) -> dict:
        """``{"ffn": |out - ref| / |ref|}`` against float64 on the same inputs."""
        import torch

        _check_cell(self, G, n)
        keep = []
        self.region([n] * int(G), keep=keep)(0)
        f = self.shape.d_ff
        return {"ffn": _rel_err([(keep[e].double(), _ffn_ref(self.x[e, :n].double(), self.w13[0, e].double(),
                                                             self.w2[0, e].double(), f, torch))
                                 for e in range(int(G))])}

    def info(self) -> dict:
        import torch

        return {"device": cpu_model(), "torch": torch.__version__, "threads": torch.get_num_threads(),
                "dtype": "float32", "timing": f"wall-clock median of {self.reps}, {self.copies} weight copies rotated"}


def _ffn_loop(be, loads: list, keep=None):
    """``fn(c)``: the expert FFN (gate/up, SiLU-and-mul, down) of every slot with tokens, one expert
    after another, on weight copy ``c`` of ``be.w13`` / ``be.w2`` and the rows of ``be.x``
    (the loop backends); outputs appended to ``keep`` when given."""
    import torch

    f = be.shape.d_ff

    def fn(c):
        for e, n in enumerate(loads):
            if n:
                h = be.x[e, :n] @ be.w13[c, e].T
                y = (torch.nn.functional.silu(h[:, :f]) * h[:, f:]) @ be.w2[c, e].T
                if keep is not None:
                    keep.append(y)
    return fn


def _ffn_ref(x, w13, w2, f, torch):
    h = x @ w13.T
    return (torch.nn.functional.silu(h[:, :f]) * h[:, f:]) @ w2.T


def _rel_err(pairs) -> float:
    """sqrt(sum |got - ref|^2 / sum |ref|^2) over ``(got, ref)`` pairs; inf when a value is
    not finite (a row left unwritten)."""
    import torch

    num = den = 0.0
    for got, ref in pairs:
        got = got.double()
        if not bool(torch.isfinite(got).all()):
            return float("inf")
        num += float(((got - ref.double()) ** 2).sum())
        den += float((ref.double() ** 2).sum())
    return math.sqrt(num / den) if den > 0 else float("nan")


@register_backend
class TorchBf16Backend(ExpertBackend):
    """bf16 expert FFN on GPU, a loop over the experts (Table 6 "bf16 loop")."""

    name = "torch_bf16"
    preference = 1
    bytes_per_param = 2.0
    dtype = "bfloat16"
    kernel = "loop"
    numerics_tol = {"ffn": 1e-2}
    checks = (("qwen3-30b", (1, 8)),)

    @classmethod
    def status(cls):
        return _cuda_status()

    def __init__(self, shape: ExpertShape, max_G: int, max_n: int, replays: int = 30, seed: int = 0,
                 spin_us: float = 50.0, l2_factor: float = 2.0, l2: int | None = None, copies: int | None = None):
        import torch

        ok, why = _cuda_status()
        if not ok:
            raise RuntimeError("torch_bf16 needs a CUDA GPU: " + why)
        self.shape, self.timer = shape, GraphTimer(replays, spin_us=spin_us)
        self.max_G, self.max_n = max_G, max_n
        self.l2, self.l2_factor = int(l2 or l2_bytes()), l2_factor
        d, f = shape.d_model, shape.d_ff
        self.expert_bytes = shape.bytes(self.bytes_per_param)
        self.copies = max(copies_for(self.expert_bytes, self.l2, l2_factor), int(copies or 1))  # enough for G = 1
        torch.manual_seed(seed)
        self.w13 = torch.randn(self.copies, max_G, 2 * f, d, device="cuda", dtype=torch.bfloat16) / d ** 0.5
        self.w2 = torch.randn(self.copies, max_G, d, f, device="cuda", dtype=torch.bfloat16) / f ** 0.5
        self.x = torch.randn(max_G, max_n, d, device="cuda", dtype=torch.bfloat16)

    def region(self, loads, expected_m=None, keep=None):
        return _ffn_loop(self, self._check_loads(loads), keep)

    def check_numerics(self, G: int, n: int) -> dict:
        """``{"ffn": |out - ref| / |ref|}``: the bf16 FFN against float32 on the same (bf16-rounded)
        inputs, over all ``G`` experts."""
        import torch

        _check_cell(self, G, n)
        keep = []
        self.region([n] * int(G), keep=keep)(0)
        f = self.shape.d_ff
        return {"ffn": _rel_err([(keep[e].float(), _ffn_ref(self.x[e, :n].float(), self.w13[0, e].float(),
                                                            self.w2[0, e].float(), f, torch)) for e in range(int(G))])}

    def info(self) -> dict:
        return _gpu_info(self, "bfloat16")


@register_backend
class DeepGemmBackend(ExpertBackend):
    """DeepGEMM's fp8 masked grouped GEMM (``sgl-deep-gemm``) in SGLang's decode layout:
    gate/up ``[G, cap, d] x [G, 2f, d] -> [G, cap, 2f]``, masked SiLU-and-mul with fp8
    quantisation of the real rows (:mod:`tempo.calib.act`), down ``[G, cap, f] x [G, d, f] ->
    [G, cap, d]``; 1x128 activation and 128x128 weight block scales; ``masked_m: int[G]`` on the
    device (real rows per group), ``cap`` a multiple of the 128-row M tile.  SM90 only
    (:meth:`status` says why not on SM100, see GPU.md)."""
    # cap a multiple of the M tile: the kernel's full-tile stores never reach the next group's rows.
    # Activation scales are put in the MN-major TMA layout once, outside every timed graph (else
    # DeepGEMM transposes them in each call); a warm-up call precedes every capture, so DeepGEMM's
    # JIT never runs inside a timed region.  On SM100 DeepGEMM packs scales to UE8M0 by truncation.

    name = "deep_gemm"
    preference = 2
    bytes_per_param = 1.0
    dtype = "fp8 e4m3 (1x128 / 128x128 scales), masked capacity layout"
    kernel = "deep_gemm_fp8_masked"
    # the GEMMs: fp32 accumulation of exact fp8 products, bf16 output (1.7e-3 measured on an H200);
    # the activation: e4m3 rounding of SiLU-and-mul (3 mantissa bits: a few % RMS)
    numerics_tol = {"up": 1e-2, "act": 6e-2, "down": 1e-2}
    checks = (("dsv3", (1, 8, 16)), ("qwen3-30b", (1, 8, 16)))

    @classmethod
    def status(cls):
        ok, why = _cuda_status()
        if not ok:
            return False, why
        import torch

        problem = deep_gemm_arch_problem(torch.cuda.get_device_capability())
        if problem:
            return False, problem
        try:
            dg = import_deep_gemm()
            gemm_fn(dg)
        except Exception as exc:  # noqa: BLE001 -- ImportError, OSError (ABI), AssertionError (no CUDA home)
            return False, (f"needs DeepGEMM (pip: sgl-deep-gemm, see requirements-gpu.txt), which failed to import: "
                           f"{type(exc).__name__}: {str(exc)[:300]}")
        return True, f"deep_gemm {deep_gemm_version(dg)}"

    def __init__(self, shape: ExpertShape, max_G: int, max_n: int, replays: int = 30, seed: int = 0,
                 spin_us: float = 50.0, l2_factor: float = 2.0, l2: int | None = None, device: str = "cuda",
                 deep_gemm_module=None, copies: int | None = None, act: bool = True):
        import torch

        if str(device).startswith("cuda"):
            problem = deep_gemm_arch_problem(torch.cuda.get_device_capability())
            if problem:
                raise RuntimeError(f"deep_gemm backend unavailable: {problem}")
        if deep_gemm_module is None:
            ok, why = self.status()
            if not ok:
                raise RuntimeError(f"deep_gemm backend unavailable: {why}")
            deep_gemm_module = import_deep_gemm()
        self.device, self.act = device, bool(act)
        self.dg, self.gemm = deep_gemm_module, gemm_fn(deep_gemm_module)
        self.shape, self.timer = shape, GraphTimer(replays, spin_us=spin_us)
        self.max_G, self.max_n = max_G, max_n
        self.l2 = int(l2 or (l2_bytes() if device != "cpu" else L2_BYTES_DEFAULT))
        self.l2_factor = l2_factor
        d, f = shape.d_model, shape.d_ff
        self.cap = capacity(max_n)
        self.expert_bytes = shape.bytes(self.bytes_per_param)
        self.copies = max(copies_for(self.expert_bytes, self.l2, l2_factor), int(copies or 1))
        self.up = [random_fp8_weights(max_G, 2 * f, d, device, seed + c) for c in range(self.copies)]
        self.down = [random_fp8_weights(max_G, d, f, device, seed + 1000 + c) for c in range(self.copies)]
        to_mn = getattr(self.dg, "get_mn_major_tma_aligned_tensor", None) or mn_major_tma_aligned
        q, s = random_fp8_activations(max_G, self.cap, d, device, seed + 7)
        self.a_up = (q, to_mn(s))
        q, s = random_fp8_activations(max_G, self.cap, f, device, seed + 8)
        self.a_down = (q, to_mn(s))  # the activation step overwrites the real rows of each group
        self.out_up = torch.empty(max_G, self.cap, 2 * f, device=device, dtype=torch.bfloat16)
        self.out_down = torch.empty(max_G, self.cap, d, device=device, dtype=torch.bfloat16)
        self._masked: dict = {}
        self._sync()

    @property
    def max_load(self) -> int:
        return self.cap

    def _sync(self):
        if self.device != "cpu":
            import torch

            torch.cuda.synchronize()

    def _act(self, h, a, masked_m):
        from .act import silu_mul_quant, silu_mul_quant_reference

        (silu_mul_quant_reference if self.device == "cpu" else silu_mul_quant)(h, a[0], a[1], masked_m)

    def region(self, loads, expected_m: int | None = None):
        """Gate/up GEMM, the masked SiLU-and-mul with fp8 quantisation (``act``), down GEMM, for
        ``masked_m = loads`` (one group per slot, idle slots 0).  ``expected_m`` (DeepGEMM's tuning
        key): default the mean of the non-zero loads.  ``masked_m`` is a device buffer per
        ``(G, expected_m)``, rewritten here, so a graph captured for one region replays any
        later loads of the same key."""
        import torch

        ls = self._check_loads(loads)
        G = len(ls)
        live = [x for x in ls if x]
        em = int(expected_m) if expected_m is not None else max(1, -(-sum(live) // max(1, len(live))))
        if em < 1:
            raise ValueError(f"expected_m must be >= 1, got {expected_m}")
        key = (G, em)
        mm = self._masked.get(key)
        if mm is None:
            mm = self._masked[key] = torch.zeros(G, device=self.device, dtype=torch.int32)
        mm.copy_(torch.tensor(ls, dtype=torch.int32))  # before the spin: never inside a sample
        a1 = (self.a_up[0][:G], self.a_up[1][:G])
        a2 = (self.a_down[0][:G], self.a_down[1][:G])
        o1, o2 = self.out_up[:G], self.out_down[:G]

        def fn(c):
            self.gemm(a1, (self.up[c][0][:G], self.up[c][1][:G]), o1, mm, em)
            if self.act:
                self._act(o1, a2, mm)
            self.gemm(a2, (self.down[c][0][:G], self.down[c][1][:G]), o2, mm, em)
        fn.key = ("masked", G, em)
        fn.masked_m = mm
        return fn

    def measure(self, G: int, n: int) -> float:
        _check_cell(self, G, n)
        fn = self.region([n] * int(G), expected_m=int(n))  # expected_m = n: the tuner's key, fixed per cell
        fn(0)  # JIT compile / tune outside the timed region
        self._sync()
        return self.timer.time(fn, self.cell_copies(G))

    def check_numerics(self, G: int, n: int) -> dict:
        """Relative errors over every group's real rows (``n`` each): ``up`` and ``down``, each
        GEMM against the float32 product of its dequantised operands; ``act``, the fp8 output of
        the activation step (dequantised) against SiLU-and-mul of the up GEMM's output in
        float32 (with ``act`` off, the down GEMM reads the fixed random activations)."""
        import torch

        from .fp8 import dequant_per_block, dequant_per_token

        _check_cell(self, G, n)
        self.out_up.fill_(float("nan"))
        self.out_down.fill_(float("nan"))
        self.region([n] * int(G), expected_m=int(n))(0)
        self._sync()
        f = self.shape.d_ff
        out = {}
        for part, a, (bq, bs), o in (("up", self.a_up, self.up[0], self.out_up),
                                     ("down", self.a_down, self.down[0], self.out_down)):
            pairs = []
            for g in range(int(G)):
                x = dequant_per_token(a[0][g, :n], a[1][g, :n].contiguous())
                pairs.append((o[g, :n].float(), x @ dequant_per_block(bq[g], bs[g]).T))
            out[part] = _rel_err(pairs)
        if self.act:
            pairs = []
            for g in range(int(G)):
                h = self.out_up[g, :n].float()
                pairs.append((dequant_per_token(self.a_down[0][g, :n], self.a_down[1][g, :n].contiguous()),
                              torch.nn.functional.silu(h[:, :f]) * h[:, f:]))
            out["act"] = _rel_err(pairs)
        return out

    def info(self) -> dict:
        region = ("gate/up GEMM, masked SiLU-and-mul with fp8 quantisation of the real rows, down GEMM" if self.act
                  else "gate/up GEMM, down GEMM (no activation step)")
        return _gpu_info(self, self.dtype, {"deep_gemm": deep_gemm_version(self.dg), "capacity_rows": self.cap,
                                            "region": region})
