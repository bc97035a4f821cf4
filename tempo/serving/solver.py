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
import sys
import threading
import time
import types
from dataclasses import dataclass, field

import numpy as np

from .tables import replica_map

log = logging.getLogger("tempo.serving")

TOPOLOGIES = ("flat", "hier")


def servable() -> tuple[str, ...]:
    """The policies a solve may run: every registered policy whose spec says ``servable``
    (:func:`tempo.policies.select`)."""
    from ..policies import select

    return tuple(select(servable=True))


def policies() -> tuple[str, ...]:
    """What the refresher accepts: the :func:`servable` policies and ``"noop"`` (count and
    publish nothing, the control of Section 5.11)."""
    return servable() + ("noop",)


def check_counts(window, n_layers: int, n_experts: int) -> np.ndarray:
    """Validate one window of counts: int64[L, E], finite, non-negative.  Raises
    ``ValueError`` naming what is wrong (never applied, only logged by the refresher)."""
    w = np.asarray(window)
    if w.shape != (n_layers, n_experts):
        raise ValueError(f"window counts have shape {w.shape}, expected (L, E) = {(n_layers, n_experts)}")
    if not (np.issubdtype(w.dtype, np.integer) or (np.issubdtype(w.dtype, np.floating) and np.all(np.isfinite(w)))):
        raise ValueError(f"window counts must be integers, got dtype {w.dtype}")
    if np.issubdtype(w.dtype, np.floating) and np.any(np.abs(w) >= 2.0 ** 62):
        raise ValueError("window counts are too large for int64 (>= 2^62)")
    if np.any(w < 0):
        raise ValueError(f"window counts are negative for {int((w < 0).sum())} (layer, expert) entries")
    return np.rint(w).astype(np.int64)


class TableSolver:
    """Solves windows into dispatch tables for one placement (Section 4.4's worker body).

    Built once per placement: the per-layer replica layout is computed here, so a refresh
    only builds each layer's counts and runs the policy.  ``solve(window)`` returns
    ``float32[L, E, R]`` (``flat``) or ``float32[n_nodes, L, E, R]`` (``hier``: one table per
    source node, the same-node-first split of Section 4.3); columns follow :func:`replica_map`.

    With ``policy="tempo"`` and the flat topology all layers are solved by one
    :func:`tempo.policies.tempo_fast.solve_layers` call (no Instance or Dispatch per layer;
    the same tables, a whole model in about 10 ms).


    Pricing (the cost model prices one forward step's batch, Section 3): a window sums many
    forward steps.  ``batch_tokens``, when given, rescales each layer's counts to that many
    token-expert pairs; otherwise ``solve(window, steps=n)`` divides them by the ``n`` forward
    steps the window spans (the server's default); with neither the window is priced as one
    batch.
    """

    def __init__(self, physical_to_logical_map, n_gpus: int, model, policy: str = "tempo",
                 topology: str = "flat", gpus_per_node: int | None = None, batch_tokens: int | None = None,
                 **options):
        from ..core.cost import CostModel
        from ..core.instance import Instance

        if policy not in servable():
            raise ValueError(f"policy must be a servable policy {servable()} for a solve, got {policy!r}")
        if topology not in TOPOLOGIES:
            raise ValueError(f"topology must be one of {TOPOLOGIES}, got {topology!r}")
        if topology == "hier" and not gpus_per_node:
            raise ValueError("topology='hier' needs gpus_per_node")
        self.model = CostModel.named(model) if isinstance(model, str) else model
        self.policy, self.topology, self.options = policy, topology, options
        self.batch_tokens = batch_tokens
        self.p2l = np.asarray(physical_to_logical_map)
        self.phys = replica_map(self.p2l)
        self.n_gpus = int(n_gpus)
        self.gpus_per_node = gpus_per_node if topology == "hier" else None
        L, E, _ = self.phys.shape
        zero = np.zeros(E, np.int64)
        self.layouts = [Instance.from_placement(zero, self.p2l[l], self.n_gpus, self.gpus_per_node).replica_gpu
                        for l in range(L)]
        self.n_nodes = self.n_gpus // gpus_per_node if topology == "hier" else 1
        # tempo on the flat topology: every layer in one batched compiled call (solve_layers)
        self._batched = policy == "tempo" and topology == "flat"
        if self._batched:
            R = self.phys.shape[2]
            self._rep = np.full((L, E, R), -1, np.int64)
            for layer, r in enumerate(self.layouts):
                self._rep[layer, :, :r.shape[1]] = r

    def solve(self, window, steps: int | None = None) -> np.ndarray:
        from ..core.instance import Instance
        from ..policies import get
        from ..core.topology import same_node_first

        L, E, R = self.phys.shape
        w = check_counts(window, L, E)
        if self._batched:
            return self._solve_batched(w, steps)
        fn = get(self.policy)
        out = np.zeros((self.n_nodes, L, E, R), np.float32)
        for layer in range(L):
            c = w[layer]
            if self.batch_tokens and c.sum() > 0:
                c = np.rint(c * (self.batch_tokens / c.sum())).astype(np.int64)
            elif steps is not None and steps > 1:
                c = np.rint(c / steps).astype(np.int64)
            inst = Instance(c, self.layouts[layer], self.n_gpus, self.gpus_per_node)
            d = fn(inst, self.model, **self.options)
            width = inst.replica_gpu.shape[1]
            if self.topology == "hier":
                out[:, layer, :, :width] = same_node_first(inst, d).probabilities(inst)
            else:
                out[0, layer, :, :width] = d.probabilities(inst)
        return out if self.topology == "hier" else out[0]


    def _solve_batched(self, w: np.ndarray, steps: int | None = None) -> np.ndarray:
        """The flat tempo tables of all layers from one :func:`solve_layers` call, each row as
        :meth:`Dispatch.probabilities` makes it (an idle expert: uniform over its replicas)."""
        from ..policies.tempo_fast import solve_layers

        if self.batch_tokens:
            tot = w.sum(axis=1, keepdims=True)
            w = np.where(tot > 0, np.rint(w * (self.batch_tokens / np.where(tot > 0, tot, 1))), w).astype(np.int64)
        elif steps is not None and steps > 1:  # price one forward step's batch (as the per-layer path)
            w = np.rint(w / steps).astype(np.int64)
        shares = solve_layers(w, self._rep, self.n_gpus, self.model, **self.options)
        valid = self._rep >= 0
        s = np.where(valid, np.clip(shares, 0.0, None), 0.0)
        rows = s.sum(axis=2, keepdims=True)
        uniform = valid / np.maximum(valid.sum(axis=2, keepdims=True), 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            prob = np.where(rows > 0, s / np.where(rows > 0, rows, 1.0), uniform)
        return prob.astype(np.float32)


def solve_tables(window, physical_to_logical_map, n_gpus: int, model, policy: str = "tempo",
                 topology: str = "flat", gpus_per_node: int | None = None, batch_tokens: int | None = None,
                 **options) -> np.ndarray:
    """One-shot :class:`TableSolver` (see there)."""
    return TableSolver(physical_to_logical_map, n_gpus, model, policy, topology, gpus_per_node, batch_tokens,
                       **options).solve(window)


_MAIN_LOCK = threading.Lock()


@contextlib.contextmanager
def _bare_main():
    """Start a spawn child without re-importing the launcher's ``__main__`` (Issue 15, item 6).

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


def _worker_main(conn, static: dict, win_buf, out_buf) -> None:
    """Worker loop.

    The window of each request is read from the shared buffer ``win_buf`` (``int64[l, E]``)
    and the table written into ``out_buf`` (``float32[n_nodes, l, E, R]``); the pipe carries
    only small messages: ``("ready", setup_error)`` once, then for each request
    ``(req_id, options)`` a reply ``("ok", req_id, seconds)`` or ``("error", req_id,
    message)``; ``None`` stops it.  The server keeps at most one request in flight per
    worker and writes ``win_buf`` only while none is, so neither side ever blocks on a full
    pipe and a buffer is never written while the other side reads it.
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
                             static.get("gpus_per_node"), static.get("batch_tokens"))
        L, E, _ = solver.phys.shape
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
            table = solver.solve(window.copy(), steps=opts.get("steps"))
            if table.ndim == 3:
                table = table[None]
            out[...] = 0.0
            out[..., :table.shape[-1]] = table
            reply = ("ok", req_id, time.perf_counter() - t0)
        except Exception as exc:  # reported, never fatal for the worker
            reply = ("error", req_id, f"{type(exc).__name__}: {exc}"[:2000])
        try:
            conn.send(reply)
        except (OSError, ValueError):
            return


class SolverClosedError(RuntimeError):
    """Raised by :class:`SolverProcess` when it is used after :meth:`SolverProcess.close`."""


@dataclass
class SolverProcess:
    """Server-side handle of the solver worker process(es).

    ``submit`` hands a window over and returns its request id; ``result(req_id, timeout)``
    waits for that reply (``("ok", table, seconds)``, ``("error", message)``, ``("timeout",)``,
    ``("died",)`` or ``("cancelled",)``), discarding late replies to earlier, abandoned
    requests.  With ``workers > 1`` the layers are split into contiguous slices, one worker
    process each, solved concurrently (layers are independent); the reply is complete only
    when every slice is back.

    Protocol (reliability review D1): windows and tables travel through shared memory, the
    pipe carries only small control messages, and each worker has at most one request in
    flight.  A window submitted while the worker is still busy with an abandoned request
    waits server-side (only the newest is kept) and is sent when the late reply has been
    drained.  Nothing can fill a pipe, so neither ``submit``, ``result`` nor ``close`` can
    block on one.

    Faults: a worker whose pipe breaks or that exits is *confirmed* dead (killed if needed and
    joined) before it is reported as ``died`` (D9); :meth:`ensure_alive` replaces every worker
    that is dead, has a broken pipe, or missed ``max_misses`` deadlines in a row while ready
    (a stopped or wedged worker, D8) or did not come up within ``startup_timeout_s``.  After
    :meth:`close`, ``submit`` and ``result`` raise :class:`SolverClosedError` and
    ``ensure_alive`` restarts nothing (D10).
    """

    physical_to_logical_map: np.ndarray
    n_gpus: int
    model: object = "proxy-serving"
    policy: str = "tempo"
    topology: str = "flat"
    gpus_per_node: int | None = None
    batch_tokens: int | None = None
    workers: int = 1
    max_misses: int = 3
    startup_timeout_s: float = 600.0
    restarts: int = field(default=0, init=False)

    def __post_init__(self):
        if self.policy not in servable():
            raise ValueError(f"the solver process runs a servable policy {servable()}, got policy {self.policy!r}")
        if self.topology not in TOPOLOGIES:
            raise ValueError(f"topology must be one of {TOPOLOGIES}, got {self.topology!r}")
        if int(self.max_misses) < 1:
            raise ValueError(f"max_misses must be >= 1, got {self.max_misses}")
        p2l = np.asarray(self.physical_to_logical_map)
        self._phys = replica_map(p2l)
        L, E, R = self._phys.shape
        if not 1 <= int(self.workers) <= L:
            raise ValueError(f"workers must lie in [1, n_layers = {L}], got {self.workers}")
        # a bad n_gpus, model or topology fails here, in the caller, not on every request
        TableSolver(p2l[:1], self.n_gpus, self.model, self.policy, self.topology, self.gpus_per_node,
                    self.batch_tokens)
        self._n_nodes = self.n_gpus // self.gpus_per_node if self.topology == "hier" else 1
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
        self.setup_error: str | None = None
        self._closed = False
        self._next_id = 0
        for i in range(n):
            self._start(i)

    def _static(self, i: int) -> dict:
        sl = self._slices[i]
        L, E, R = self._phys.shape
        return {"p2l": np.asarray(self.physical_to_logical_map)[sl], "n_gpus": self.n_gpus, "model": self.model,
                "policy": self.policy, "topology": self.topology, "gpus_per_node": self.gpus_per_node,
                "batch_tokens": self.batch_tokens, "win_shape": (len(sl), E),
                "out_shape": (self._n_nodes, len(sl), E, R)}

    def _start(self, i: int) -> None:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=_worker_main, args=(child, self._static(i), self._win[i], self._out[i]),
                                 daemon=True, name=f"tempo-solver-{i}")
        with _bare_main():
            proc.start()
        child.close()
        self._procs[i], self._conns[i] = proc, parent
        self._inflight[i] = self._pending[i] = None
        self._ready[i] = self._broken[i] = False
        self._misses[i] = 0
        self._started[i] = time.monotonic()

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
        self._inflight[i] = self._pending[i] = None

    def _wedged(self, i: int) -> str | None:
        if self._ready[i] and self._misses[i] >= self.max_misses:
            return f"missed {self._misses[i]} deadlines in a row"
        if not self._ready[i] and time.monotonic() - self._started[i] > self.startup_timeout_s:
            return f"not ready after {self.startup_timeout_s:g} s"
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
        np.frombuffer(self._win[i], np.int64).reshape(window.shape)[...] = window
        try:
            self._conns[i].send((req_id, opts))
        except (OSError, ValueError):
            self._reap(i)
            return
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
        w = check_counts(window, *self._phys.shape[:2])
        self._next_id += 1
        for i, sl in enumerate(self._slices):
            if self._broken[i]:
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

    def _one(self, i: int, req_id: int, end: float, cancel):
        while True:
            if self._broken[i]:
                return ("died",)
            if self._inflight[i] != req_id and (self._pending[i] is None or self._pending[i][0] != req_id):
                return ("died",)  # the worker holding it was replaced: the request is lost
            left = end - time.monotonic()
            msg = self._recv(i, min(left, 0.05))
            if msg is None:
                p = self._procs[i]
                if not p.is_alive():
                    self._reap(i)
                    return ("died",)
                if cancel is not None and cancel.is_set():
                    return ("cancelled",)
                if left <= 0:
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
            out = np.frombuffer(self._out[i], np.float32).reshape(self._static_out_shape(i)).copy()
            return ("ok", out, msg[2])

    def _static_out_shape(self, i: int) -> tuple:
        L, E, R = self._phys.shape
        return (self._n_nodes, len(self._slices[i]), E, R)

    def result(self, req_id: int, timeout: float, cancel=None):
        """The reply to ``req_id``: ``("ok", table, seconds)``, ``("error", message)``,
        ``("timeout",)``, ``("died",)`` or ``("cancelled",)`` (``cancel``, a
        ``threading.Event``, was set while waiting)."""
        self._check_open("result")
        end = time.monotonic() + timeout
        parts = [self._one(i, req_id, end, cancel) for i in range(len(self._slices))]
        for kind in ("died", "cancelled", "timeout", "error"):
            bad = [p for p in parts if p[0] == kind]
            if bad:
                return bad[0]
        out = np.concatenate([p[1] for p in parts], axis=1)
        return ("ok", out if self.topology == "hier" else out[0], max(p[2] for p in parts))

    def close(self) -> None:
        """Stop every worker (asked first, killed if it does not stop within a second).
        Never blocks on a pipe; further use raises :class:`SolverClosedError`."""
        if self._closed:
            return
        self._closed = True
        for i, p in enumerate(self._procs):
            if p is not None and not self._broken[i]:
                try:
                    self._conns[i].send(None)
                except (OSError, ValueError):
                    pass
        end = time.monotonic() + 1.0
        for i, p in enumerate(self._procs):
            if p is None:
                continue
            p.join(timeout=max(0.0, end - time.monotonic()))
            self._reap(i)
            self._procs[i] = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
