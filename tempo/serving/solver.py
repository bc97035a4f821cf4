"""The out-of-process solver (paper Section 4.4): a numpy-only worker process that turns
window counts into dispatch tables, and the server-side handle that talks to it.

The worker is a separate *process* (``multiprocessing`` with the ``spawn`` start method, so it
inherits no torch, CUDA or server threads): solving in a thread of the server costs 8-10% end
to end through GIL contention (Section 5.11).  Windows and tables travel through shared
memory; the pipe carries only small control messages with a request id, so a reply that
arrives after its deadline is recognised and dropped, and no pipe can fill (see
:class:`SolverProcess` for the protocol and its fault handling).
"""
from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import sys
import threading
import time
import types
import weakref
from dataclasses import dataclass, field

import numpy as np

log = logging.getLogger("tempo.serving")

TOPOLOGIES = ("flat", "hier")


def servable() -> tuple[str, ...]:
    """The policies a solve may run: every registered policy whose spec says ``servable``
    (:func:`tempo.policies.select`)."""
    from ..policies import select

    return tuple(select(servable=True))


def check_counts(window, n_layers: int, n_experts: int) -> np.ndarray:
    """Validate one window of counts: an integer array ``[L, E]`` of non-negative values that
    fit int64.  Counts never pass through float (a float array is refused, not rounded).
    Raises ``ValueError`` naming what is wrong (never applied, only logged by the refresher)."""
    w = np.asarray(window)
    if w.shape != (n_layers, n_experts):
        raise ValueError(f"window counts have shape {w.shape}, expected (L, E) = {(n_layers, n_experts)}")
    if w.dtype == bool or not np.issubdtype(w.dtype, np.integer):
        raise ValueError(f"window counts must be an integer array, got dtype {w.dtype}")
    if np.issubdtype(w.dtype, np.unsignedinteger):
        if w.size and w.max() > np.iinfo(np.int64).max:
            raise ValueError("window counts are too large for int64 (>= 2^63)")
    elif w.size and w.min() < 0:
        raise ValueError(f"window counts are negative for {int((w < 0).sum())} (layer, expert) entries")
    return w.astype(np.int64)


def replica_gpus(phys: np.ndarray, n_slots: int, n_gpus: int) -> np.ndarray:
    """int64[L, E, R]: the GPU of every replica column of ``phys`` (physical slots laid out
    GPU-major, ``n_slots / n_gpus`` per GPU, as :meth:`tempo.Instance.from_placement`), -1
    on padding."""
    if isinstance(n_gpus, bool) or not isinstance(n_gpus, (int, np.integer)) or n_gpus < 1 or n_slots % n_gpus:
        raise ValueError(f"n_gpus must be a positive divisor of the {n_slots} physical slots, got {n_gpus!r}")
    phys = np.asarray(phys, np.int64)
    return np.where(phys >= 0, phys // (n_slots // int(n_gpus)), -1)


def probabilities(shares: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Routing rows from shares (``[..., R]``): each row normalised, an idle row uniform over
    its replicas (:meth:`tempo.Dispatch.probabilities`, for many rows at once)."""
    s = np.where(valid, np.clip(shares, 0.0, None), 0.0)
    rows = s.sum(axis=-1, keepdims=True)
    uniform = valid / np.maximum(valid.sum(axis=-1, keepdims=True), 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(rows > 0, s / np.where(rows > 0, rows, 1.0), uniform)


class TableSolver:
    """Solves windows into dispatch tables for one placement (Section 4.4's worker body).

    ``solve(window)`` returns ``float32[N, L, E, R]``: one table per source node (``N = 1``
    for the flat topology; ``hier``: the same-node-first split of Section 4.3), ``R`` replica
    columns (``width``, default the most replicas any expert has), columns following
    :func:`~tempo.serving.tables.replica_map`.  Every layer is solved in one call of
    :func:`tempo.policies.solve_batch`: the policy registry's checks, tempo batched and
    compiled, every layer's shares validated.  :meth:`set_placement` moves it to a new
    placement (an EPLB rebalance) without rebuilding anything else.

    Pricing (the cost model prices one forward step's batch, Section 3): a window sums many
    forward steps.  ``batch_tokens``, when given, rescales each layer's counts to that many
    token-expert pairs; otherwise ``solve(window, steps=n)`` divides them by the ``n`` forward
    steps the window spans, in integers (rounded half up; the server's default); with neither
    the window is priced as one batch.
    """

    def __init__(self, physical_to_logical_map, n_gpus: int, model, policy: str = "tempo",
                 topology: str = "flat", gpus_per_node: int | None = None, batch_tokens: int | None = None,
                 width: int | None = None, n_logical: int | None = None, **options):
        from ..core.cost import CostModel

        if policy not in servable():
            raise ValueError(f"policy must be a servable policy {servable()} for a solve, got {policy!r}")
        if topology not in TOPOLOGIES:
            raise ValueError(f"topology must be one of {TOPOLOGIES}, got {topology!r}")
        if topology == "hier" and not gpus_per_node:
            raise ValueError("topology='hier' needs gpus_per_node")
        if topology == "hier" and (n_gpus % gpus_per_node):
            raise ValueError(f"gpus_per_node={gpus_per_node} does not divide n_gpus={n_gpus}")
        self.model = CostModel.named(model) if isinstance(model, str) else model
        self.policy, self.topology, self.options = policy, topology, options
        self.batch_tokens = batch_tokens
        self.n_gpus = int(n_gpus)
        self.gpus_per_node = gpus_per_node if topology == "hier" else None
        self.n_nodes = self.n_gpus // gpus_per_node if topology == "hier" else 1
        self.n_logical = n_logical
        self.width = width
        self.set_placement(physical_to_logical_map)

    def set_placement(self, physical_to_logical_map) -> None:
        """Solve for a new placement from now on (``ValueError`` before anything changes)."""
        from .tables import padded_replica_map, replica_map

        p2l = np.asarray(physical_to_logical_map)
        phys = replica_map(p2l, self.n_logical) if self.width is None else \
            padded_replica_map(p2l, self.n_logical, self.width)
        rep = replica_gpus(phys, p2l.shape[-1], self.n_gpus)
        self.p2l, self.phys, self.rep = p2l, phys, rep
        if self.width is None:
            self.width = phys.shape[-1]

    @property
    def shape(self) -> tuple:
        """The tables' shape ``(N, L, E, R)``."""
        return (self.n_nodes,) + self.phys.shape

    def solve(self, window, steps: int | None = None) -> np.ndarray:
        from ..core.instance import Dispatch, Instance
        from ..core.topology import same_node_first
        from ..policies import solve_batch

        L, E, R = self.phys.shape
        w = check_counts(window, L, E)
        if self.batch_tokens:
            tot = w.sum(axis=1, keepdims=True)
            w = np.where(tot > 0, np.rint(w * (self.batch_tokens / np.where(tot > 0, tot, 1))), w).astype(np.int64)
        elif steps is not None and steps > 1:  # price one forward step's batch, in integers
            w = (w + int(steps) // 2) // int(steps)
        shares = solve_batch(w, self.rep, self.n_gpus, self.model, self.policy, self.gpus_per_node, **self.options)
        valid = self.rep >= 0
        if self.topology == "flat":
            return probabilities(shares, valid)[None].astype(np.float32)
        out = np.zeros(self.shape, np.float32)
        for layer in range(L):
            inst = Instance(w[layer], self.rep[layer], self.n_gpus, self.gpus_per_node)
            out[:, layer] = probabilities(same_node_first(inst, Dispatch(shares[layer])).shares, valid[layer])
        return out


def solve_tables(window, physical_to_logical_map, n_gpus: int, model, policy: str = "tempo",
                 topology: str = "flat", gpus_per_node: int | None = None, batch_tokens: int | None = None,
                 **options) -> np.ndarray:
    """One-shot :class:`TableSolver` (see there)."""
    return TableSolver(physical_to_logical_map, n_gpus, model, policy, topology, gpus_per_node, batch_tokens,
                       **options).solve(window)


_MAIN_LOCK = threading.Lock()


@contextlib.contextmanager
def _bare_main():
    """Start a spawn child without re-importing the launcher's ``__main__``.

    ``Process.start()`` pickles "preparation data" that tells the child to re-run the
    parent's ``__main__`` (by module name or by path) before unpickling the target.  In an
    SGLang scheduler that main module drags in torch and most of sglang; the worker needs
    neither.  While the child is started, ``sys.modules['__main__']`` is a bare module with no
    ``__spec__`` and no ``__file__``, so the preparation data names no main module at all.
    """
    with _MAIN_LOCK:
        saved = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            if saved is not None:
                sys.modules["__main__"] = saved
            else:
                sys.modules.pop("__main__", None)


def _build_lock_path() -> str:
    """One lock file per user and numba cache (``NUMBA_CACHE_DIR``, else the cache beside this
    installation's sources): the ranks of a server share it and take it in turn."""
    import hashlib
    import tempfile

    uid = os.getuid() if hasattr(os, "getuid") else 0
    where = os.environ.get("NUMBA_CACHE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    key = hashlib.sha256(os.path.abspath(where).encode()).hexdigest()[:12]
    return os.path.join(tempfile.gettempdir(), f"tempo-solver-build-{uid}-{key}.lock")


@contextlib.contextmanager
def build_lock():
    """Held while the solver's compiled code is built or its cache refreshed: ranks of one
    machine starting at once compile in turn into numba's cache (the first compiles, the others
    then load what it wrote), never two writers at once."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): nothing to serialise with
        yield
        return
    with open(_build_lock_path(), "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _build_main(conn, static: dict) -> None:
    """Child of :func:`build_solver_code`: one warm-up solve under the build lock; says
    ``("locked", waited)`` once it holds the lock, then ``("built", seconds, waited, error)``."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    t0 = time.perf_counter()
    waited = 0.0
    try:
        with build_lock():
            waited = time.perf_counter() - t0
            conn.send(("locked", waited))
            solver = TableSolver(static["p2l"], static["n_gpus"], static["model"], static["policy"],
                                 static["topology"], static.get("gpus_per_node"), static.get("batch_tokens"),
                                 width=static["out_shape"][-1], n_logical=static["win_shape"][1])
            L, E, _ = solver.phys.shape
            solver.solve(np.full((L, E), 8, np.int64))
        conn.send(("built", time.perf_counter() - t0, waited, None))
    except Exception as exc:  # reported to the parent, which falls back to the long bound
        conn.send(("built", time.perf_counter() - t0, waited, f"{type(exc).__name__}: {exc}"[:2000]))


_BUILT: set = set()
_BUILT_LOCK = threading.Lock()


def build_solver_code(static: dict, timeout_s: float, stall_s: float | None = None) -> bool:
    """Build the solver's compiled code before serving starts: a spawned child runs one
    warm-up solve of ``static``'s policy under :func:`build_lock` (numba compiles into its
    cache, or loads it when another rank got there first) and this waits for it: at most
    ``timeout_s`` in all, and, once the child holds the lock, at most ``stall_s`` (default
    :data:`~tempo.serving.settings.WARMUP_TIMEOUT_S`) without CPU progress (a stopped or wedged
    build).  Once per policy and process.  Returns whether the code is built (False: the build
    failed or ran out of time; workers then build it themselves, under the lock)."""
    from .settings import WARMUP_TIMEOUT_S

    stall_s = WARMUP_TIMEOUT_S if stall_s is None else float(stall_s)
    key = (static["policy"], static["topology"])
    with _BUILT_LOCK:
        if key in _BUILT:
            return True
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_build_main, args=(child, static), daemon=True, name="tempo-solver-build")
        with _bare_main():
            proc.start()
        child.close()
        t0 = time.monotonic()
        msg, why, locked = None, None, False
        last = (t0, _cpu_seconds(proc.pid))
        try:
            while msg is None and why is None:
                if parent.poll(0.5):
                    m = parent.recv()
                    if m[0] == "locked":
                        locked, last = True, (time.monotonic(), _cpu_seconds(proc.pid))
                    else:
                        msg = m
                    continue
                now = time.monotonic()
                if not proc.is_alive():
                    why = f"its process died (exit code {proc.exitcode})"
                elif now - t0 > timeout_s:
                    why = f"it took over {timeout_s:g} s (TEMPO_STARTUP_TIMEOUT_S)"
                elif locked:
                    cpu = _cpu_seconds(proc.pid)
                    if cpu is None or last[1] is None or cpu - last[1] >= 0.05:
                        last = (now, cpu)
                    elif now - last[0] > stall_s:
                        why = f"it made no progress for {stall_s:g} s (TEMPO_WARMUP_TIMEOUT_S)"
        except (EOFError, OSError):
            why = "its pipe broke"
        finally:
            proc.join(timeout=5 if msg is not None else 0)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=10)
            if not proc.is_alive():
                proc.close()  # its sentinel fd now, not when the object is collected
            parent.close()
        if msg is None:
            log.warning("tempo solver: building the compiled code failed: %s; workers build it themselves", why)
            return False
        _, seconds, waited, error = msg
        if error is not None:
            log.warning("tempo solver: building the compiled code failed (%s); workers build it themselves", error)
            return False
        log.info("tempo solver: compiled code ready in %.1f s (%.1f s waiting for another rank's build)", seconds,
                 waited)
        _BUILT.add(key)
        return True


def _cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) of process ``pid`` from /proc, None where unreadable."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _worker_main(conn, static: dict, win_buf, out_buf) -> None:
    """Worker loop.

    The window of each request is read from the shared buffer ``win_buf`` (``int64[l, E]``)
    and the table written into ``out_buf`` (``float32[N, l, E, R]``); the pipe carries
    only small messages: ``("ready", setup_error)`` once, then for each request
    ``(req_id, options)`` a reply ``("ok", req_id, seconds)`` or ``("error", req_id,
    message)``; ``None`` stops it.  ``options["placement"]`` (this worker's rows of a new
    ``physical_to_logical_map``, after an EPLB rebalance) moves the solver to the new placement
    before the solve.  The server keeps at most one request in flight per worker and writes
    ``win_buf`` only while none is, so neither side ever blocks on a full pipe and a buffer is
    never written while the other side reads it.
    """
    import os
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server's Ctrl-C is the server's business
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    window = np.frombuffer(win_buf, np.int64).reshape(static["win_shape"])
    out = np.frombuffer(out_buf, np.float32).reshape(static["out_shape"])
    solver = None
    try:
        solver = TableSolver(static["p2l"], static["n_gpus"], static["model"], static["policy"], static["topology"],
                             static.get("gpus_per_node"), static.get("batch_tokens"), width=static["out_shape"][-1],
                             n_logical=static["win_shape"][1])
        L, E, _ = solver.phys.shape
        with build_lock() if not static.get("built") else contextlib.nullcontext():
            solver.solve(np.full((L, E), 8, np.int64))  # warm up so the first real refresh meets its deadline
    except Exception as exc:  # reported on every request instead
        setup_error = f"{type(exc).__name__}: {exc}"
    else:
        setup_error = None
    try:
        conn.send(("ready", setup_error))
    except (OSError, ValueError):
        return
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        req_id, opts = msg
        t0 = time.perf_counter()
        try:
            if opts.get("delay_s"):  # fault injection for tests: a slow solve
                time.sleep(opts["delay_s"])
            if solver is None:
                raise RuntimeError(f"solver setup failed: {setup_error}")
            if opts.get("placement") is not None:
                solver.set_placement(opts["placement"])
            out[...] = solver.solve(window.copy(), steps=opts.get("steps"))
            reply = ("ok", req_id, time.perf_counter() - t0)
        except Exception as exc:  # reported, never fatal for the worker
            reply = ("error", req_id, f"{type(exc).__name__}: {exc}"[:2000])
        try:
            conn.send(reply)
        except (OSError, ValueError):
            return


class SolverClosedError(RuntimeError):
    """Raised by :class:`SolverProcess` when it is used after :meth:`SolverProcess.close`."""


def _stop_workers(procs: list, conns: list) -> None:
    """Stop every worker of a :class:`SolverProcess` (asked first, killed if it does not stop
    within a second) and close the pipes; the finalizer of a dropped one, and its ``close``."""
    for conn in conns:
        if conn is not None:
            try:
                conn.send(None)
            except (OSError, ValueError):
                pass
    end = time.monotonic() + 1.0
    for p in procs:
        if p is None:
            continue
        try:
            p.join(timeout=max(0.0, end - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join(timeout=10)
        except (AssertionError, ValueError):  # not started, or already closed
            pass
    for conn in conns:
        if conn is not None:
            try:
                conn.close()
            except OSError:
                pass


@dataclass(eq=False)
class SolverProcess:
    """Server-side handle of the solver worker process(es); the ``process`` solver backend.

    ``submit(window int64[L, E]) -> req_id``; ``result(req_id, timeout)`` returns
    ``("ok", table float32[N, L, E, width], seconds)``, ``("error", message)``, ``("timeout",)``,
    ``("died",)``, ``("cancelled",)`` or ``("unknown",)``; :meth:`solve` does both.  With
    ``workers > 1`` the layers are split into contiguous slices solved concurrently.
    :meth:`set_placement` moves the workers to a new placement with the next request.
    :meth:`ensure_alive` replaces a worker that died, missed ``max_misses`` deadlines in a row,
    made no CPU progress for ``warmup_timeout_s`` before ready, or did not come up within
    ``startup_timeout_s``.  Raises ValueError on a bad argument; after :meth:`close`,
    ``submit`` and ``result`` raise :class:`SolverClosedError`.
    """
    # Windows and tables travel through shared memory, the pipe carries only small control
    # messages and each worker has at most one request in flight (a window submitted while the
    # worker is busy with an abandoned request waits here, newest only), so nothing can fill a
    # pipe and no call blocks on one.  A worker is reported ``died`` only once confirmed dead
    # (killed if needed, joined).  A handle dropped without close() stops its workers (finalizer).

    physical_to_logical_map: np.ndarray
    n_gpus: int
    model: object = "proxy-serving"
    policy: str = "tempo"
    topology: str = "flat"
    gpus_per_node: int | None = None
    batch_tokens: int | None = None
    workers: int = 1
    max_misses: int = 3
    startup_timeout_s: float | None = None
    width: int | None = None
    n_logical: int | None = None
    warmup_timeout_s: float | None = None
    restarts: int = field(default=0, init=False)
    kind = "process"

    def __post_init__(self):
        from .settings import STARTUP_TIMEOUT_S, WARMUP_TIMEOUT_S

        if self.startup_timeout_s is None:
            self.startup_timeout_s = STARTUP_TIMEOUT_S
        if self.warmup_timeout_s is None:
            self.warmup_timeout_s = WARMUP_TIMEOUT_S
        for name in ("startup_timeout_s", "warmup_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        if self.policy not in servable():
            raise ValueError(f"the solver process runs a servable policy {servable()}, got policy {self.policy!r}")
        if self.topology not in TOPOLOGIES:
            raise ValueError(f"topology must be one of {TOPOLOGIES}, got {self.topology!r}")
        if int(self.max_misses) < 1:
            raise ValueError(f"max_misses must be >= 1, got {self.max_misses}")
        # a bad n_gpus, model, topology or placement fails here, in the caller, not on every request
        probe = TableSolver(self.physical_to_logical_map, self.n_gpus, self.model, self.policy, self.topology,
                            self.gpus_per_node, self.batch_tokens, width=self.width, n_logical=self.n_logical)
        self.physical_to_logical_map = probe.p2l
        self.width = probe.width
        self._n_nodes, L, E, R = probe.shape
        self._shape = probe.shape
        if not 1 <= int(self.workers) <= L:
            raise ValueError(f"workers must lie in [1, n_layers = {L}], got {self.workers}")
        self._slices = [sl for sl in np.array_split(np.arange(L), int(self.workers))]
        self._ctx = mp.get_context("spawn")
        n = len(self._slices)
        self._win = [self._ctx.RawArray("b", 8 * len(sl) * E) for sl in self._slices]
        self._out = [self._ctx.RawArray("b", 4 * self._n_nodes * len(sl) * E * R) for sl in self._slices]
        self._procs = [None] * n
        self._conns = [None] * n
        self._inflight = [None] * n   # request id the worker is solving, or None
        self._pending = [None] * n    # (req_id, window slice, opts) waiting for the worker
        self._ready = [False] * n
        self._broken = [False] * n    # death confirmed: restart at the next ensure_alive
        self._misses = [0] * n
        self._started = [0.0] * n
        self._moved = [False] * n     # a new placement not yet sent to this worker
        self._lost: set = set()       # request ids lost with a worker that died
        self.setup_error: str | None = None
        self._closed = False
        self._next_id = 0
        # a handle dropped without close() still stops its workers (the lists are updated in place)
        self._finalizer = weakref.finalize(self, _stop_workers, self._procs, self._conns)
        self._progress = [(0.0, None)] * n  # (when, CPU seconds) of a worker's last progress before ready
        # the compiled code is built before any worker starts, so a worker only loads it
        self.built = build_solver_code(self._static(0), self.startup_timeout_s, self.warmup_timeout_s)
        for i in range(n):
            self._start(i)

    def _static(self, i: int) -> dict:
        sl = self._slices[i]
        N, L, E, R = self._shape
        return {"p2l": np.asarray(self.physical_to_logical_map)[sl], "n_gpus": self.n_gpus, "model": self.model,
                "policy": self.policy, "topology": self.topology, "gpus_per_node": self.gpus_per_node,
                "batch_tokens": self.batch_tokens, "win_shape": (len(sl), E), "out_shape": (N, len(sl), E, R),
                "built": getattr(self, "built", False)}

    def _start(self, i: int) -> None:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=_worker_main, args=(child, self._static(i), self._win[i], self._out[i]),
                                 daemon=True, name=f"tempo-solver-{i}")
        with _bare_main():
            proc.start()
        child.close()
        self._procs[i], self._conns[i] = proc, parent
        self._inflight[i] = self._pending[i] = None
        self._ready[i] = self._broken[i] = self._moved[i] = False
        self._misses[i] = 0
        self._started[i] = time.monotonic()
        self._progress[i] = (self._started[i], _cpu_seconds(proc.pid))

    # ------------------------------------------------------------------ placement
    def set_placement(self, physical_to_logical_map) -> None:
        """Solve for a new placement from the next request on (the workers are not restarted;
        a reply to an earlier request is for the old one).  ``ValueError`` before anything
        changes when the map does not fit (shape, an expert with no replica, more replicas
        than ``width``)."""
        from .tables import padded_replica_map

        p2l = np.asarray(physical_to_logical_map)
        if p2l.shape != np.shape(self.physical_to_logical_map):
            raise ValueError(f"physical_to_logical_map has shape {p2l.shape}, the solver's "
                             f"{np.shape(self.physical_to_logical_map)}")
        padded_replica_map(p2l, self._shape[2], self.width)
        self.physical_to_logical_map = p2l.copy()
        self._moved = [True] * len(self._slices)

    # ------------------------------------------------------------------ liveness
    @property
    def pid(self) -> int | None:
        return self._procs[0].pid if self._procs[0] else None

    @property
    def pids(self) -> list:
        return [p.pid for p in self._procs if p is not None]

    @property
    def closed(self) -> bool:
        return self._closed

    def alive(self) -> bool:
        return not self._closed and all(p is not None and p.is_alive() and not b
                                        for p, b in zip(self._procs, self._broken))

    def _reap(self, i: int) -> None:
        """Make worker ``i`` dead for certain: kill it unless it has exited, then join it."""
        p = self._procs[i]
        if p is not None:
            p.join(timeout=0.5)
            if p.is_alive():
                p.kill()  # SIGKILL also ends a stopped (SIGSTOP) process
                p.join(timeout=10)
        if self._conns[i] is not None:
            try:
                self._conns[i].close()
            except OSError:
                pass
        self._broken[i] = True
        for req in (self._inflight[i], self._pending[i][0] if self._pending[i] else None):
            if req is not None:
                self._lost.add(req)
        self._inflight[i] = self._pending[i] = None

    def _wedged(self, i: int) -> str | None:
        if self._ready[i] and self._misses[i] >= self.max_misses:
            return f"missed {self._misses[i]} deadlines in a row"
        if self._ready[i]:
            return None
        now = time.monotonic()
        if now - self._started[i] > self.startup_timeout_s:
            return f"not ready after {self.startup_timeout_s:g} s (startup_timeout_s, TEMPO_STARTUP_TIMEOUT_S)"
        if not self.built:  # a worker that compiles may take the long bound
            return None
        # warming up on built code: replaced after warmup_timeout_s with no CPU progress (a
        # stopped or wedged process); a worker slowed by a busy machine still progresses
        when, cpu = self._progress[i]
        cpu_now = _cpu_seconds(self._procs[i].pid)
        if cpu_now is None:  # no /proc: the bound from the start
            stalled = now - self._started[i]
        else:
            if cpu is None or cpu_now - cpu >= 0.05:
                self._progress[i] = (now, cpu_now)
                when = now
            stalled = now - when
        if stalled > self.warmup_timeout_s:
            return (f"not ready and no progress for {stalled:.0f} s (warmup_timeout_s, TEMPO_WARMUP_TIMEOUT_S = "
                    f"{self.warmup_timeout_s:g})")
        return None

    def ensure_alive(self) -> bool:
        """Replace every worker that is dead, whose pipe broke, or that is wedged (missed
        ``max_misses`` deadlines in a row, or never came up); True when one was replaced.
        A closed solver restarts nothing and returns False."""
        if self._closed:
            return False
        restarted = False
        for i, p in enumerate(self._procs):
            why = None
            if self._broken[i] or p is None:
                why = "died"
            elif not p.is_alive():
                why = "died"
            else:
                why = self._wedged(i)
            if why is None:
                continue
            pid = p.pid if p is not None else None
            self._reap(i)  # confirmed dead (killed if wedged, joined) before we say so
            log.warning("tempo solver process %s %s (exit code %s); restarting it", pid, why,
                        p.exitcode if p is not None else None)
            self._start(i)
            self.restarts += 1
            restarted = True
        return restarted

    def wait_ready(self, timeout: float) -> bool:
        """Wait until every worker has started and warmed up (at most ``timeout`` seconds);
        True when all are ready.  A refresh before that may miss its deadline."""
        self._check_open("wait_ready")
        end = time.monotonic() + timeout
        for i in range(len(self._procs)):
            while not self._ready[i] and not self._broken[i]:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                msg = self._recv(i, min(left, 0.1))
                if msg is None:
                    if not self._procs[i].is_alive():
                        self._reap(i)
                    continue
                if msg[0] != "died":
                    self._handle(i, msg)
        return all(self._ready) and not any(self._broken)

    # ------------------------------------------------------------------ protocol
    def _check_open(self, what: str) -> None:
        if self._closed:
            raise SolverClosedError(f"SolverProcess.{what}() called after close(); create a new SolverProcess")

    def _send(self, i: int) -> None:
        """Send worker ``i``'s pending request (it has none in flight)."""
        req_id, window, opts = self._pending[i]
        if self._moved[i]:
            opts = dict(opts, placement=np.asarray(self.physical_to_logical_map)[self._slices[i]])
        np.frombuffer(self._win[i], np.int64).reshape(window.shape)[...] = window
        try:
            self._conns[i].send((req_id, opts))
        except (OSError, ValueError):
            self._reap(i)
            return
        self._moved[i] = False
        self._pending[i], self._inflight[i] = None, req_id

    def _recv(self, i: int, wait: float):
        """One message from worker ``i`` within ``wait`` seconds, None if none; a broken
        pipe confirms the death and returns ``("died",)``."""
        conn = self._conns[i]
        try:
            if not conn.poll(max(0.0, wait)):
                return None
            return conn.recv()
        except (EOFError, OSError, ValueError):
            self._reap(i)
            return ("died",)

    def _handle(self, i: int, msg):
        """Bookkeeping of one message; returns the message unless it was control traffic."""
        if msg[0] == "ready":
            self._ready[i] = True
            self.setup_error = msg[1]
            return None
        if msg[0] in ("ok", "error"):
            if msg[1] == self._inflight[i]:
                self._inflight[i] = None
            if self._pending[i] is not None and self._inflight[i] is None and not self._broken[i]:
                self._send(i)
        return msg

    def submit(self, window, **opts) -> int:
        self._check_open("submit")
        w = check_counts(window, *self._shape[1:3])
        self._next_id += 1
        for i, sl in enumerate(self._slices):
            if self._broken[i]:
                self._lost.add(self._next_id)
                continue  # result() reports it as died; ensure_alive() replaces it
            self._pending[i] = (self._next_id, np.ascontiguousarray(w[sl]), dict(opts))
            while self._inflight[i] is not None:  # drain a late reply that is already there
                msg = self._recv(i, 0.0)
                if msg is None or msg[0] == "died":
                    break
                msg = self._handle(i, msg)
                if msg is not None:
                    log.info("tempo solver: dropped late reply to request %s", msg[1])
            if self._inflight[i] is None and self._pending[i] is not None and not self._broken[i]:
                self._send(i)
        return self._next_id

    def _one(self, i: int, req_id: int, end: float | None, cancel):
        while True:
            if self._broken[i]:
                return ("died",)
            if self._inflight[i] != req_id and (self._pending[i] is None or self._pending[i][0] != req_id):
                # the worker holding it was replaced (lost), or it was never this worker's to answer
                return ("died",) if req_id in self._lost else ("unknown",)
            left = None if end is None else end - time.monotonic()
            msg = self._recv(i, 0.05 if left is None else min(left, 0.05))
            if msg is None:
                p = self._procs[i]
                if not p.is_alive():
                    self._reap(i)
                    return ("died",)
                if cancel is not None and cancel.is_set():
                    return ("cancelled",)
                if left is not None and left <= 0:
                    if self._ready[i]:
                        self._misses[i] += 1
                    return ("timeout",)
                continue
            if msg[0] == "died":
                return msg
            msg = self._handle(i, msg)
            if msg is None:
                continue
            if msg[1] != req_id:  # a late reply to an abandoned request
                log.info("tempo solver: dropped late reply to request %s", msg[1])
                continue
            self._misses[i] = 0
            if msg[0] == "error":
                return ("error", msg[2])
            N, _, E, R = self._shape
            out = np.frombuffer(self._out[i], np.float32).reshape(N, len(self._slices[i]), E, R).copy()
            return ("ok", out, msg[2])

    def result(self, req_id: int, timeout: float | None = None, cancel=None):
        """The reply to ``req_id``: ``("ok", table, seconds)``, ``("error", message)``,
        ``("timeout",)`` (``timeout`` seconds passed; None: no limit), ``("died",)``,
        ``("cancelled",)`` (``cancel``, a ``threading.Event``, was set while waiting) or
        ``("unknown",)`` (no request ``req_id`` is waiting: never issued, answered already,
        or abandoned for a newer one)."""
        self._check_open("result")
        if timeout is not None and not timeout >= 0:
            raise ValueError(f"timeout must be a non-negative number of seconds or None, got {timeout!r}")
        if isinstance(req_id, bool) or not isinstance(req_id, (int, np.integer)) or not 1 <= req_id <= self._next_id:
            return ("unknown",)
        end = None if timeout is None else time.monotonic() + timeout
        parts = [self._one(i, req_id, end, cancel) for i in range(len(self._slices))]
        self._lost.discard(req_id)
        for kind in ("died", "unknown", "cancelled", "timeout", "error"):
            bad = [p for p in parts if p[0] == kind]
            if bad:
                return bad[0]
        return ("ok", np.concatenate([p[1] for p in parts], axis=1), max(p[2] for p in parts))

    def solve(self, window, deadline_s: float, steps: int | None = None, cancel=None, **opts):
        """The backend interface: replace dead or wedged workers (:attr:`restarts` counts them),
        hand the window over and wait at most ``deadline_s`` for its table (a reply as
        :meth:`result` gives)."""
        if self.ensure_alive():
            log.warning("tempo refresher: solver worker replaced (restarts so far: %d)", self.restarts)
        if steps is not None:
            opts["steps"] = steps
        return self.result(self.submit(window, **opts), deadline_s, cancel=cancel)

    def close(self) -> None:
        """Stop every worker (asked first, killed if it does not stop within a second).
        Never blocks on a pipe; further use raises :class:`SolverClosedError`."""
        if self._closed:
            return
        self._closed = True
        self._finalizer.detach()
        _stop_workers(self._procs, [c if not b else None for c, b in zip(self._conns, self._broken)])
        for i in range(len(self._procs)):
            if self._procs[i] is not None:
                self._reap(i)
                self._procs[i] = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _InProcess:
    """What the in-process backends share: nothing to start, wait for or stop."""

    restarts = 0

    def wait_ready(self, timeout: float) -> bool:
        return True

    def alive(self) -> bool:
        return True

    def close(self) -> None:
        pass


class ThreadSolver(_InProcess):
    """The ``thread`` backend: solve in the calling (refresher) thread, the paper's v1
    integration kept as the control of Section 5.11 (it competes with the server for the
    GIL).  A solve that overruns its deadline is dropped after the fact (``("timeout",)``)."""

    kind = "thread"

    def __init__(self, physical_to_logical_map, n_gpus: int, model, policy: str = "tempo", topology: str = "flat",
                 gpus_per_node: int | None = None, batch_tokens: int | None = None, width: int | None = None,
                 n_logical: int | None = None, startup_timeout_s: float | None = None, warm: bool = True):
        from .settings import STARTUP_TIMEOUT_S

        self.solver = TableSolver(physical_to_logical_map, n_gpus, model, policy, topology, gpus_per_node,
                                  batch_tokens, width=width, n_logical=n_logical)
        if warm:  # built before serving starts (another process compiles), then loaded here
            L, E, R = self.solver.phys.shape
            static = {"p2l": self.solver.p2l, "n_gpus": n_gpus, "model": self.solver.model, "policy": policy,
                      "topology": topology, "gpus_per_node": gpus_per_node, "batch_tokens": batch_tokens,
                      "win_shape": (L, E), "out_shape": (self.solver.n_nodes, L, E, R)}
            built = build_solver_code(static, STARTUP_TIMEOUT_S if startup_timeout_s is None else startup_timeout_s)
            with build_lock() if not built else contextlib.nullcontext():
                self.solver.solve(np.full((L, E), 8, np.int64))

    def set_placement(self, physical_to_logical_map) -> None:
        self.solver.set_placement(physical_to_logical_map)

    def solve(self, window, deadline_s: float, steps: int | None = None, cancel=None, **opts):
        t0 = time.perf_counter()
        try:
            if opts.get("delay_s"):  # fault injection for tests, as the worker
                time.sleep(opts["delay_s"])
            table = self.solver.solve(window, steps=steps)
        except Exception as exc:
            return ("error", f"in-thread solve failed: {type(exc).__name__}: {exc}")
        seconds = time.perf_counter() - t0
        if seconds > deadline_s:
            return ("timeout",)
        return ("ok", table, seconds)


class NoopSolver(_InProcess):
    """The ``noop`` backend (``tempo_noop``, the control of Section 5.11): the whole data path
    runs (counting, snapshots, aggregation), nothing is ever solved, the table stays uniform."""

    kind = "noop"

    def set_placement(self, physical_to_logical_map) -> None:
        pass

    def solve(self, window, deadline_s: float, steps: int | None = None, cancel=None, **opts):
        return ("noop",)


def make_solver(settings, physical_to_logical_map, n_gpus: int, width: int | None = None,
                n_logical: int | None = None):
    """The solver backend ``settings.solver`` names (:class:`~tempo.serving.settings.ServingSettings`,
    ``TEMPO_SOLVER``): :class:`SolverProcess` (``process``), :class:`ThreadSolver` (``thread``)
    or :class:`NoopSolver` (``noop``).  Each has ``kind``, ``solve(window, deadline_s, steps,
    cancel)`` (a reply tuple: ``("ok", table, seconds)``, ``("timeout",)``, ``("died",)``,
    ``("error", message)``, ``("cancelled",)`` or ``("noop",)``), ``set_placement(p2l)``,
    ``restarts``, ``wait_ready(timeout)``, ``alive()`` and ``close()``."""
    s = settings
    if s.solver == "noop":
        return NoopSolver()
    args = (physical_to_logical_map, n_gpus, s.cost_model(), s.policy, s.topology, s.gpus_per_node,
            s.batch_tokens if s.pricing == "fixed" else None)
    if s.solver == "thread":
        return ThreadSolver(*args, width=width, n_logical=n_logical, startup_timeout_s=s.startup_timeout_s)
    return SolverProcess(*args, workers=s.solver_workers, max_misses=s.max_misses,
                         startup_timeout_s=s.startup_timeout_s, width=width, n_logical=n_logical,
                         warmup_timeout_s=s.warmup_timeout_s)
