"""The refresher (paper Section 4.4): a thread in the server process that, every refresh
period, snapshots the cumulative counters, recovers the window by wrap-safe differencing,
aggregates it across ranks, hands it to the solver process and publishes the returned table
with one copy into the live table.

Failure behaviour (each case keeps the last good table live):

* malformed counts (wrong shape, negative, non-integer): rejected, logged, never solved;
* a solve that misses its deadline: abandoned; its late reply is dropped, never applied;
* the worker process dies: its death is confirmed (joined), it is restarted, the refresh
  resumes on the next period;
* the worker misses ``max_misses`` deadlines in a row (stopped, wedged in native code):
  killed and replaced at the next period;
* a reply that is not a valid table (shape, NaN, negative, mass on a padding column):
  rejected and logged.

Variants (Sections 5.11-5.15): ``tempo`` and ``token_lp`` solve in the worker; ``noop`` runs
the whole data path (counting, snapshots, aggregation) but never solves, so the table stays
uniform over replicas; ``topology="hier"`` publishes one table per source node.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter
from typing import Callable

import numpy as np

from .counters import CumulativeCounts
from .errors import PeerStopped
from .solver import SolverProcess, TableSolver, check_counts, policies
from .tables import DispatchTable, validate_table

log = logging.getLogger("tempo.serving")


class NumpyPublisher:
    """Publish into a numpy live table with one copy (``np.copyto``)."""

    def __init__(self, live: np.ndarray):
        self.live = live

    def __call__(self, new: np.ndarray) -> None:
        np.copyto(self.live, new)


class TorchPublisher:
    """Publish into a torch live table (on GPU): stage in pinned host memory, then one
    non-blocking host-to-device copy on ``stream`` (a side stream, so the copy never waits
    behind the decode graph)."""

    def __init__(self, live, stream=None):
        import torch

        self.live = live
        pin = live.is_cuda and torch.cuda.is_available()
        self.staging = torch.empty(live.shape, dtype=live.dtype, pin_memory=pin)
        self.stream = stream

    def __call__(self, new: np.ndarray) -> None:
        import torch

        self.staging.copy_(torch.from_numpy(np.ascontiguousarray(new)).to(self.staging.dtype))
        if self.live.is_cuda:
            with torch.cuda.stream(self.stream) if self.stream is not None else contextlib.nullcontext():
                self.live.copy_(self.staging, non_blocking=True)
            # the staging buffer is reused: the copy must be done before the next publication
            (self.stream or torch.cuda.current_stream()).synchronize()
        else:
            self.live.copy_(self.staging)


class Refresher:
    """Refresh a live dispatch table from cumulative counts.

    Parameters
    ----------
    table : DispatchTable
        The live table; its ``prob`` is what the dispatch kernel reads.
    snapshot : callable
        Returns the cumulative counter ``[L, E]`` (numpy or torch).
    physical_to_logical_map : int[L, P]
    n_gpus : int
    model : CostModel or name
    policy : "tempo", "token_lp" or "noop"
    topology : "flat" or "hier" (needs ``gpus_per_node``; ``table.prob`` then [n_nodes, L, E, R])
    interval_s, deadline_s : float
        Refresh period (paper default 200 ms) and the most a solve may take.
    aggregate : callable, optional
        ``window [L, E] -> window`` summed over ranks (a gloo all-reduce in SGLang).
    publish : callable, optional
        ``new_prob -> None``; default copies into ``table.prob``.
    on_publish : callable, optional
        Called with ``(new_prob, window)`` after each publication (monitoring, tests).
    batch_tokens : int, optional
        Rescale each layer's window to this many token-expert pairs before solving.
    workers : int
        Solver processes; layers are split among them (default 1).
    in_thread : bool
        Solve inside the refresher thread instead of a worker process: the paper's v1
        integration, kept as the control of Section 5.11 (it competes with the server for the
        GIL).  A solve that overruns the deadline is still dropped, after the fact.
    max_misses : int
        A worker that misses this many deadlines in a row is killed and replaced.
    steps : callable, optional
        Returns the cumulative count of forward steps; each window is then priced per forward
        step (its counts divided by the steps it spans).  Ignored with ``batch_tokens``.
    """

    def __init__(self, table: DispatchTable, snapshot: Callable, physical_to_logical_map, n_gpus: int,
                 model="proxy-serving", policy: str = "tempo", topology: str = "flat",
                 gpus_per_node: int | None = None, interval_s: float = 0.2, deadline_s: float = 0.15,
                 aggregate: Callable | None = None, publish: Callable | None = None,
                 on_publish: Callable | None = None, batch_tokens: int | None = None, workers: int = 1,
                 in_thread: bool = False, max_misses: int = 3, steps: Callable | None = None):
        if policy not in policies():
            raise ValueError(f"policy must be one of {policies()}, got {policy!r}")
        if interval_s <= 0 or deadline_s <= 0:
            raise ValueError("interval_s and deadline_s must be positive")
        self.table = table
        self.counts = CumulativeCounts(snapshot)
        self.steps = steps if batch_tokens is None else None
        self._last_steps = steps() if self.steps is not None else None
        self.shape = table.phys.shape[:2]
        self.policy = policy
        self.interval_s, self.deadline_s = float(interval_s), float(deadline_s)
        self.aggregate = aggregate
        self.publish = publish or NumpyPublisher(table.prob)
        self.on_publish = on_publish
        self.stats: Counter = Counter()
        self.last_error: str | None = None
        self.last_solve_s: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.solver = None
        self.in_thread = None
        if policy != "noop" and in_thread:
            self.in_thread = TableSolver(np.asarray(physical_to_logical_map), n_gpus, model, policy, topology,
                                         gpus_per_node, batch_tokens)
        elif policy != "noop":
            self.solver = SolverProcess(np.asarray(physical_to_logical_map), n_gpus, model, policy, topology,
                                        gpus_per_node, batch_tokens, workers, max_misses=max_misses)

    # ------------------------------------------------------------------ one refresh
    def step(self, **solve_opts) -> str:
        """One refresh; returns its outcome: ``published``, ``noop``, ``idle``,
        ``rejected``, ``dropped``, ``died``, ``error``, ``cancelled`` (:meth:`stop` was
        called while waiting for the solver) or ``stopped`` (a peer rank's refresher stopped);
        also counted in ``stats``."""
        outcome = self._step(**solve_opts)
        self.stats[outcome] += 1
        return outcome

    def _fail(self, outcome: str, message: str) -> str:
        self.last_error = message
        log.error("tempo refresher: %s", message)
        return outcome

    def _step(self, **solve_opts) -> str:
        try:
            window = self.counts.window()
            if self.steps is not None:
                now = int(self.steps())
                solve_opts.setdefault("steps", now - self._last_steps)
                self._last_steps = now
            if self.aggregate is not None:
                window = self.aggregate(window)
            window = check_counts(window, *self.shape)
        except PeerStopped:
            self._stop.set()
            return "stopped"
        except ValueError as exc:
            return self._fail("rejected", f"malformed counts rejected: {exc}")
        if self.policy == "noop":
            return "noop"
        if window.sum() == 0:
            return "idle"
        if self.in_thread is not None:
            import time as _time

            t0 = _time.perf_counter()
            try:
                new = self.in_thread.solve(window, steps=solve_opts.get("steps"))
            except Exception as exc:
                return self._fail("error", f"in-thread solve failed: {type(exc).__name__}: {exc}")
            seconds = _time.perf_counter() - t0
            if seconds > self.deadline_s:
                return self._fail("dropped", f"in-thread solve took {seconds * 1e3:.0f} ms, past its deadline")
            return self._publish(new, seconds, window)
        if self.solver.ensure_alive():
            log.warning("tempo refresher: solver worker replaced (restarts so far: %d)", self.solver.restarts)
        req = self.solver.submit(window, **solve_opts)
        reply = self.solver.result(req, self.deadline_s, cancel=self._stop)
        if reply[0] == "cancelled":
            return "cancelled"
        if reply[0] == "timeout":
            return self._fail("dropped", f"solve missed its {self.deadline_s * 1e3:.0f} ms deadline; table kept")
        if reply[0] == "died":
            # the death is confirmed (joined) by the solver; replace the worker now
            if self.solver.ensure_alive():
                return self._fail("died", "solver process died mid-solve; last table kept, worker restarted")
            return self._fail("died", "solver process died mid-solve; last table kept, restart failed")
        if reply[0] == "error":
            return self._fail("error", f"solver error: {reply[1]}")
        _, new, seconds = reply
        return self._publish(new, seconds, window)

    def _publish(self, new, seconds, window) -> str:
        width = self.table.phys.shape[-1]
        if new.shape[-1] < width:  # the live table is wider (allocated for any later placement)
            new = np.concatenate([new, np.zeros(new.shape[:-1] + (width - new.shape[-1],), new.dtype)], -1)
        try:
            phys = self.table.phys if new.ndim == 3 else np.broadcast_to(self.table.phys, new.shape)
            validate_table(new, phys)
            if new.shape != self.table.prob.shape:
                raise ValueError(f"table shape {new.shape} != live {self.table.prob.shape}")
        except ValueError as exc:
            return self._fail("rejected", f"invalid table rejected: {exc}")
        self.publish(new)
        self.last_solve_s = seconds
        if self.on_publish is not None:
            self.on_publish(new, window)
        return "published"

    # ------------------------------------------------------------------ thread
    def _loop(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            try:
                self.step()
            except Exception as exc:  # the refresher must never take the server down
                self.stats["error"] += 1
                self._fail("error", f"unexpected {type(exc).__name__}: {exc}")
            next_t += self.interval_s
            now = time.monotonic()
            if next_t < now:  # a slow refresh (e.g. the worker starting): skip the missed periods, no burst
                next_t = now + self.interval_s
            self._stop.wait(max(0.0, next_t - now))
        finish = getattr(self.aggregate, "finish", None)
        if finish is not None:  # the last aggregation round, so no peer waits for this rank
            try:
                finish(self.shape)
            except Exception as exc:
                self._fail("error", f"final aggregation round failed: {type(exc).__name__}: {exc}")

    def start(self) -> "Refresher":
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="tempo-refresher", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            if self._thread.is_alive():
                log.warning("tempo refresher: thread still busy 5 s after stop()")
            self._thread = None
        if self.solver is not None:
            self.solver.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
