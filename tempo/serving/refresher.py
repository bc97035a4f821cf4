"""The refresher (paper Section 4.4): a thread in the server process that, every refresh
period, snapshots the cumulative counters ``int64[L, E]``, recovers the window by wrap-safe
differencing, aggregates it across ranks, hands it to the solver backend
(:func:`~tempo.serving.solver.make_solver`: ``process``, ``thread`` or ``noop``) and publishes
the returned table ``float32[N, L, E, R]`` with one copy into the live table.

Every failure keeps the last good table live: malformed counts and invalid replies are
rejected and logged; a missed deadline's late reply is dropped; a dead, wedged or
slow-to-start worker is replaced; a table solved for an older placement is never published
(``stale``); a failed summed-window round falls back to this rank's own window
(``local_windows``); a stopped peer stops this refresher after the same round.
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
from .errors import AggregationUnavailable, PeerStopped
from .settings import ServingSettings
from .solver import check_counts, make_solver
from .tables import DispatchTable, padded_replica_map, validate_table

log = logging.getLogger("tempo.serving")

#: outcomes that mean a window with traffic produced no table
_NO_TABLE = ("dropped", "rejected", "died", "error", "stale")


class NumpyPublisher:
    """Publish into a numpy live table with one copy (``np.copyto``)."""

    def __init__(self, live: np.ndarray):
        self.live = live

    def __call__(self, new: np.ndarray, epoch: int | None = None) -> bool:
        np.copyto(self.live, new)
        return True


class TorchPublisher:
    """Publish into a torch live table (on GPU): stage in pinned host memory, then one
    non-blocking host-to-device copy on ``stream`` (a side stream, so the copy never waits
    behind the decode graph).  ``after``, a CUDA event or None, is waited for on the stream
    first (the runtime records it after rewriting rows in place, so a publication is never
    overtaken by an older rebalance's copies)."""

    def __init__(self, live, stream=None):
        import torch

        self.live = live
        pin = live.is_cuda and torch.cuda.is_available()
        self.staging = torch.empty(live.shape, dtype=live.dtype, pin_memory=pin)
        self.stream = stream
        self.after = None

    def __call__(self, new: np.ndarray, epoch: int | None = None) -> bool:
        import torch

        self.staging.copy_(torch.from_numpy(np.ascontiguousarray(new)).to(self.staging.dtype))
        if self.live.is_cuda:
            with torch.cuda.stream(self.stream) if self.stream is not None else contextlib.nullcontext():
                if self.after is not None:
                    torch.cuda.current_stream().wait_event(self.after)
                self.live.copy_(self.staging, non_blocking=True)
            # the staging buffer is reused: the copy must be done before the next publication
            (self.stream or torch.cuda.current_stream()).synchronize()
        else:
            self.live.copy_(self.staging)
        return True


class Refresher:
    """Refresh a live dispatch table from cumulative counts.

    Parameters
    ----------
    table : DispatchTable, the live ``prob [N, L, E, R]`` over ``phys [L, E, R]``.
    snapshot : callable returning the cumulative counter ``[L, E]`` (numpy or torch).
    physical_to_logical_map : int[L, P]
    n_gpus : int
    settings : ServingSettings, passed whole (policy, cost model, solver, period, deadline, ...).
    aggregate : callable ``window [L, E] -> window`` summed over ranks, optional.
    publish : callable ``(new_prob, epoch) -> bool`` (False: placement moved on); default
        copies into ``table.prob``.
    on_publish : callable ``(new_prob, window)`` after each publication, optional.
    steps : callable returning the cumulative forward steps (``pricing == "step"``), optional.
    solver : a solver backend (default ``make_solver(settings)``), optional.
    """

    def __init__(self, table: DispatchTable, snapshot: Callable, physical_to_logical_map, n_gpus: int,
                 settings: ServingSettings | None = None, *, aggregate: Callable | None = None,
                 publish: Callable | None = None, on_publish: Callable | None = None,
                 steps: Callable | None = None, solver=None):
        self.settings = s = settings if settings is not None else ServingSettings()
        if not isinstance(s, ServingSettings):
            raise TypeError(f"settings must be a ServingSettings, got {type(s).__name__}")
        self.table = table
        self.n_logical, self.width = table.phys.shape[1], table.phys.shape[2]
        self.n_nodes = table.n_nodes
        self.phys = np.array(table.phys, copy=True)  # the placement this refresher solves for
        self.counts = CumulativeCounts(snapshot)
        self.steps = steps if s.pricing == "step" else None
        self._last_steps = steps() if self.steps is not None else None
        self.shape = table.phys.shape[:2]
        self.interval_s, self.deadline_s = s.interval_s, s.deadline_s
        self.aggregate = aggregate
        self.publish = publish or NumpyPublisher(table.prob)
        self.on_publish = on_publish
        self.stats: Counter = Counter()
        self.last_error: str | None = None
        self.last_solve_s: float | None = None
        self.epoch = 0
        self._placement = None            # (p2l, epoch) handed over by the scheduler thread
        self._placement_lock = threading.Lock()
        self._dry = 0                     # windows with traffic and no table, in a row
        self._local = False               # solving from this rank's own window (aggregation down)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.solver = solver if solver is not None else make_solver(s, physical_to_logical_map, n_gpus,
                                                                    width=self.width, n_logical=self.n_logical)

    @property
    def kind(self) -> str:
        """The solver backend: ``process``, ``thread`` or ``noop``."""
        return self.solver.kind

    # ------------------------------------------------------------------ placement
    def set_placement(self, physical_to_logical_map, epoch: int) -> None:
        """A rebalance moved experts (called from the scheduler thread: one copy of the map, no
        other work): the next refresh solves for ``physical_to_logical_map`` (checked by the
        caller) and publishes with ``epoch``."""
        p2l = np.array(physical_to_logical_map, copy=True)
        with self._placement_lock:
            self._placement = (p2l, int(epoch))

    def _take_placement(self) -> None:
        with self._placement_lock:
            moved, self._placement = self._placement, None
        if moved is not None:
            p2l, epoch = moved
            self.phys = padded_replica_map(p2l, self.n_logical, self.width)
            self.solver.set_placement(p2l)
            self.epoch = epoch
            self.stats["placements"] += 1

    # ------------------------------------------------------------------ one refresh
    def step(self, **solve_opts) -> str:
        """One refresh; returns its outcome: ``published``, ``noop``, ``idle``, ``rejected``,
        ``dropped``, ``died``, ``error``, ``stale`` (solved for a placement a rebalance has
        replaced), ``cancelled`` (:meth:`stop` was called while waiting for the solver) or
        ``stopped`` (a peer rank's refresher stopped); also counted in ``stats``."""
        outcome = self._step(**solve_opts)
        self.stats[outcome] += 1
        if outcome == "published":
            self._dry = 0
        elif outcome in _NO_TABLE:
            self._dry += 1
            if self._dry % self.settings.stale_windows == 0:
                self.stats["stale_warnings"] += 1
                log.warning("tempo refresher: no table published for %d windows with traffic (last: %s); the live "
                            "table is %s. Raise TEMPO_DEADLINE_MS if solves are dropped, check the solver otherwise",
                            self._dry, self.last_error or outcome,
                            "uniform" if self.stats["published"] == 0 else "the last one published")
        return outcome

    def _fail(self, outcome: str, message: str) -> str:
        self.last_error = message
        log.error("tempo refresher: %s", message)
        return outcome

    def _step(self, **solve_opts) -> str:
        self._take_placement()
        epoch, phys = self.epoch, self.phys
        steps = None
        try:
            window = self.counts.window()
            if self.steps is not None:
                now = int(self.steps())
                steps = now - self._last_steps
                self._last_steps = now
            if self.aggregate is not None:
                try:
                    window = self.aggregate(window)
                    if self._local:
                        self._local = False
                        log.warning("tempo refresher: summed windows again (after %d local ones)",
                                    self.stats["local_windows"])
                except AggregationUnavailable as exc:
                    # the round failed or the group is being rebuilt: this rank's own window
                    self.stats["local_windows"] += 1
                    if not self._local:
                        self._local = True
                        log.warning("tempo refresher: no summed window (%s); solving from this rank's own "
                                    "window until the aggregation group is rebuilt", str(exc)[:300])
            window = check_counts(window, *self.shape)
        except PeerStopped as exc:
            self._stop.set()
            log.warning("tempo refresher: stopped (%s); this rank publishes no new table from now on", exc)
            return "stopped"
        except ValueError as exc:
            return self._fail("rejected", f"malformed counts rejected: {exc}")
        if self.solver.kind == "noop":
            return "noop"
        if window.sum() == 0:
            return "idle"
        reply = self.solver.solve(window, self.deadline_s, steps=steps, cancel=self._stop, **solve_opts)
        kind = reply[0]
        if kind == "cancelled":
            return "cancelled"
        if kind == "timeout":
            return self._fail("dropped", f"solve missed its {self.deadline_s * 1e3:.0f} ms deadline; table kept")
        if kind == "died":
            # the death is confirmed (joined) by the solver; replace the worker now
            if getattr(self.solver, "ensure_alive", lambda: False)():
                return self._fail("died", "solver process died mid-solve; last table kept, worker restarted")
            return self._fail("died", "solver process died mid-solve; last table kept, restart failed")
        if kind != "ok":
            return self._fail("error", f"solver error: {reply[1] if len(reply) > 1 else kind}")
        _, new, seconds = reply
        return self._publish(new, seconds, window, epoch, phys)

    def _publish(self, new, seconds, window, epoch, phys) -> str:
        if epoch != self.epoch or self._placement is not None:
            return "stale"  # a rebalance came in while solving: the table is for the old placement
        try:
            if new.shape != self.table.prob.shape:
                raise ValueError(f"table shape {new.shape} != live {self.table.prob.shape}")
            validate_table(new, np.broadcast_to(phys, new.shape))
        except ValueError as exc:
            return self._fail("rejected", f"invalid table rejected: {exc}")
        if self.publish(new, epoch) is False:
            return "stale"
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

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

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
        self.solver.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
