"""The out-of-process solver (paper Section 4.4): a numpy-only worker process that turns
window counts into dispatch tables, and the server-side handle that talks to it.

The worker is a separate *process* (``multiprocessing`` with the ``spawn`` start method, so it
inherits no torch, CUDA or server threads): solving in a thread of the server costs 8-10% end
to end through GIL contention (Section 5.11).  Requests and replies travel over a pipe and
carry a request id, so a reply that arrives after its deadline is recognised and dropped.
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import time
from dataclasses import dataclass, field

import numpy as np

from .tables import replica_map

log = logging.getLogger("tempo.serving")

POLICIES = ("tempo", "token_lp", "noop")
TOPOLOGIES = ("flat", "hier")


def check_counts(window, n_layers: int, n_experts: int) -> np.ndarray:
    """Validate one window of counts: int64[L, E], finite, non-negative.  Raises
    ``ValueError`` naming what is wrong (never applied, only logged by the refresher)."""
    w = np.asarray(window)
    if w.shape != (n_layers, n_experts):
        raise ValueError(f"window counts have shape {w.shape}, expected (L, E) = {(n_layers, n_experts)}")
    if not (np.issubdtype(w.dtype, np.integer) or (np.issubdtype(w.dtype, np.floating) and np.all(np.isfinite(w)))):
        raise ValueError(f"window counts must be integers, got dtype {w.dtype}")
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

    ``batch_tokens``: when given, each layer's counts are rescaled to that many token-expert
    pairs before solving (a window sums many batches; the cost model prices one batch).
    """

    def __init__(self, physical_to_logical_map, n_gpus: int, model, policy: str = "tempo",
                 topology: str = "flat", gpus_per_node: int | None = None, batch_tokens: int | None = None,
                 **options):
        from .. import CostModel, Instance

        if policy not in ("tempo", "token_lp"):
            raise ValueError(f"policy must be 'tempo' or 'token_lp' for a solve, got {policy!r}")
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

    def solve(self, window) -> np.ndarray:
        from .. import Instance
        from ..policies import get
        from ..topology import same_node_first

        L, E, R = self.phys.shape
        w = check_counts(window, L, E)
        if self._batched:
            return self._solve_batched(w)
        fn = get(self.policy)
        out = np.zeros((self.n_nodes, L, E, R), np.float32)
        for layer in range(L):
            c = w[layer]
            if self.batch_tokens and c.sum() > 0:
                c = np.rint(c * (self.batch_tokens / c.sum())).astype(np.int64)
            inst = Instance(c, self.layouts[layer], self.n_gpus, self.gpus_per_node)
            d = fn(inst, self.model, **self.options)
            width = inst.replica_gpu.shape[1]
            if self.topology == "hier":
                out[:, layer, :, :width] = same_node_first(inst, d).probabilities(inst)
            else:
                out[0, layer, :, :width] = d.probabilities(inst)
        return out if self.topology == "hier" else out[0]


    def _solve_batched(self, w: np.ndarray) -> np.ndarray:
        """The flat tempo tables of all layers from one :func:`solve_layers` call, each row as
        :meth:`Dispatch.probabilities` makes it (an idle expert: uniform over its replicas)."""
        from ..policies.tempo_fast import solve_layers

        if self.batch_tokens:
            tot = w.sum(axis=1, keepdims=True)
            w = np.where(tot > 0, np.rint(w * (self.batch_tokens / np.where(tot > 0, tot, 1))), w).astype(np.int64)
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


def _worker_main(conn, static: dict) -> None:
    """Worker loop: receive ``(req_id, window, options)``, reply ``("ok", req_id, table,
    seconds)`` or ``("error", req_id, message)``; ``None`` stops it."""
    import os
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server's Ctrl-C is the server's business
    os.environ.setdefault("OMP_NUM_THREADS", "1")
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
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        req_id, window, opts = msg
        t0 = time.perf_counter()
        try:
            if opts.get("delay_s"):  # fault injection for tests: a slow solve
                time.sleep(opts["delay_s"])
            if solver is None:
                raise RuntimeError(f"solver setup failed: {setup_error}")
            table = solver.solve(window)
            conn.send(("ok", req_id, table, time.perf_counter() - t0))
        except Exception as exc:  # reported, never fatal for the worker
            conn.send(("error", req_id, f"{type(exc).__name__}: {exc}"))


@dataclass
class SolverProcess:
    """Server-side handle of the solver worker process(es).

    ``submit`` sends a window and returns its request id; ``result(req_id, timeout)`` waits
    for that reply, discarding stale replies of earlier (abandoned) requests; a dead worker
    is restarted by :meth:`ensure_alive`.  With ``workers > 1`` the layers are split into
    contiguous slices, one worker process each, solved concurrently (layers are independent);
    the reply is complete only when every slice is back.
    """

    physical_to_logical_map: np.ndarray
    n_gpus: int
    model: object = "proxy-serving"
    policy: str = "tempo"
    topology: str = "flat"
    gpus_per_node: int | None = None
    batch_tokens: int | None = None
    workers: int = 1
    restarts: int = field(default=0, init=False)

    def __post_init__(self):
        if self.policy not in ("tempo", "token_lp"):
            raise ValueError(f"the solver process runs 'tempo' or 'token_lp', got {self.policy!r}")
        if self.topology not in TOPOLOGIES:
            raise ValueError(f"topology must be one of {TOPOLOGIES}, got {self.topology!r}")
        p2l = np.asarray(self.physical_to_logical_map)
        self._phys = replica_map(p2l)
        L = p2l.shape[0]
        if not 1 <= int(self.workers) <= L:
            raise ValueError(f"workers must lie in [1, n_layers = {L}], got {self.workers}")
        self._slices = [sl for sl in np.array_split(np.arange(L), int(self.workers))]
        self._ctx = mp.get_context("spawn")
        self._procs = [None] * len(self._slices)
        self._conns = [None] * len(self._slices)
        self._next_id = 0
        for i in range(len(self._slices)):
            self._start(i)

    def _static(self, i: int) -> dict:
        sl = self._slices[i]
        return {"p2l": np.asarray(self.physical_to_logical_map)[sl], "n_gpus": self.n_gpus, "model": self.model,
                "policy": self.policy, "topology": self.topology, "gpus_per_node": self.gpus_per_node,
                "batch_tokens": self.batch_tokens}

    def _start(self, i: int) -> None:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=_worker_main, args=(child, self._static(i)), daemon=True,
                                 name=f"tempo-solver-{i}")
        proc.start()
        child.close()
        self._procs[i], self._conns[i] = proc, parent

    @property
    def pid(self) -> int | None:
        return self._procs[0].pid if self._procs[0] else None

    @property
    def pids(self) -> list:
        return [p.pid for p in self._procs if p is not None]

    def alive(self) -> bool:
        return all(p is not None and p.is_alive() for p in self._procs)

    def ensure_alive(self) -> bool:
        """Restart dead workers; True when a restart happened."""
        restarted = False
        for i, p in enumerate(self._procs):
            if p is not None and p.is_alive():
                continue
            log.warning("tempo solver process %s died (exit code %s); restarting", p.pid if p else None,
                        p.exitcode if p else None)
            self._close_conn(i)
            self._start(i)
            self.restarts += 1
            restarted = True
        return restarted

    def submit(self, window, **opts) -> int:
        w = check_counts(window, *self._phys.shape[:2])
        self._next_id += 1
        for c, sl in zip(self._conns, self._slices):
            c.send((self._next_id, w[sl], opts))
        return self._next_id

    def _died(self, i: int):
        """A worker's pipe broke: wait (briefly) until the OS has reaped it too, so that
        ``ensure_alive`` sees it dead (a large process closes its pipe before it exits)."""
        self._procs[i].join(5)
        return ("died",)

    def _one(self, i: int, req_id: int, end: float):
        conn = self._conns[i]
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return ("timeout",)
            try:
                ready = conn.poll(min(left, 0.05))
            except (EOFError, OSError):
                return self._died(i)
            if not ready:
                if not self._procs[i].is_alive():
                    return self._died(i)
                continue
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                return self._died(i)
            if msg[1] != req_id:  # a late reply to an abandoned request
                log.info("tempo solver: dropped late reply to request %s", msg[1])
                continue
            return ("ok", msg[2], msg[3]) if msg[0] == "ok" else ("error", msg[2])

    def result(self, req_id: int, timeout: float):
        """The reply to ``req_id``: ``("ok", table, seconds)``, ``("error", message)``,
        ``("timeout",)`` or ``("died",)``."""
        end = time.monotonic() + timeout
        parts = [self._one(i, req_id, end) for i in range(len(self._slices))]
        for kind in ("died", "timeout", "error"):
            bad = [p for p in parts if p[0] == kind]
            if bad:
                return bad[0]
        L, E, R = self._phys.shape
        hier = parts[0][1].ndim == 4
        shape = (parts[0][1].shape[0], L, E, R) if hier else (L, E, R)
        out = np.zeros(shape, np.float32)
        for (_, tab, _), sl in zip(parts, self._slices):
            if hier:
                out[:, sl, :, :tab.shape[-1]] = tab
            else:
                out[sl, :, :tab.shape[-1]] = tab
        return ("ok", out, max(p[2] for p in parts))

    def _close_conn(self, i: int) -> None:
        if self._conns[i] is not None:
            try:
                self._conns[i].close()
            except OSError:
                pass

    def close(self) -> None:
        for i, p in enumerate(self._procs):
            if p is None:
                continue
            try:
                self._conns[i].send(None)
            except (OSError, ValueError):
                pass
        for i, p in enumerate(self._procs):
            if p is None:
                continue
            p.join(timeout=2)
            if p.is_alive():
                p.kill()
                p.join(timeout=2)
            self._close_conn(i)
            self._procs[i] = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
