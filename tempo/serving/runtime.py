"""What TEMPO holds inside a server process (paper Section 4.4), independent of SGLang so it
runs and is tested on CPU: the live tables on the device, the cumulative counters the dispatch
kernel increments, the refresher, and with several ranks the agreement that makes every rank
switch tables at the same forward step.

Tables ``prob float32[N, L, E, R]`` over ``phys int32[L, E, R]`` (``N`` source nodes, 1 when
flat; ``R = P - E + 1``), counters ``counts int64[L, E]``: allocated once and updated in place,
since captured CUDA graphs read them through fixed pointers.  :class:`TempoRuntime` is the
entry point; :class:`TableSync` makes dispatch rank-invariant (``--moe-a2a-backend none``,
EP > 1); :class:`GlooAggregator` sums windows over ranks (a2a backends).
"""
from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections import Counter

import numpy as np

from .errors import AggregationUnavailable, PeerStopped
from .settings import ServingSettings
from .tables import padded_replica_map, uniform_prob

log = logging.getLogger("tempo.serving")

__all__ = ["uniforms", "padded_replica_map", "uniform_prob", "GlooAggregator", "TableSync", "DpPadding",
           "TempoRuntime"]


def uniforms(n: int, device, rank_invariant: bool, layer_id: int = 0, step: int = 0, rank: int = 0):
    """One uniform per routed pair, as the dispatch kernel draws them (float32 ``[n]``, see
    :func:`tempo.serving.kernels.pair_uniforms`).  Rank-invariant dispatch (no a2a backend:
    every EP rank routes the same tokens and must pick the same replica) uses a low-discrepancy
    sequence over the pair index shifted by the layer and the forward ``step`` -- identical on
    every rank, evenly spread within a batch and, for one pair, over the steps; ranks that route
    their own tokens hash the same sum with their ``rank``."""
    from .kernels import pair_uniforms

    return pair_uniforms(n, layer_id, step, rank, hashed=not rank_invariant, device=device)


def group_timeout_s(group, default: float = 1800.0) -> float:
    """The timeout of a gloo process group in seconds (``default``, gloo's 30 min, when it
    cannot be read)."""
    try:
        import torch

        return float(group._get_backend(torch.device("cpu")).options._timeout.total_seconds())
    except Exception:
        return float(default)


#: seconds a rebuilt group's rendezvous may wait for the slowest rank
REJOIN_S = 60.0

#: seconds rank 0's close waits for the followers to take its stop message (it is delivered
#: later if they are slower; close never waits longer)
STOP_WAIT_S = 5.0


def _gloo_group(store, rank: int, world_size: int, timeout_s: float):
    """A gloo process group meeting in ``store``: the rendezvous may wait up to
    :data:`REJOIN_S` for the slowest rank; its operations time out after ``timeout_s``."""
    import datetime

    import torch.distributed as dist

    group = dist.ProcessGroupGloo(store, rank, world_size, datetime.timedelta(seconds=max(timeout_s, REJOIN_S)))
    group.set_timeout(datetime.timedelta(seconds=timeout_s))
    return group


class GroupRejoin:
    """Rebuild a gloo group on every rank after a failure, one generation at a time.

    A failed collective leaves a gloo group unusable on every rank (gloo closes the pairs), so
    each rank calls :meth:`step` until it returns the next generation's group: a step marks
    this rank ready for generation ``generation + 1`` under ``name`` in ``store`` (default: the
    default process group's) and, once every rank is ready (a non-blocking check), builds the
    group under that generation's prefix (``build(store, rank, world_size, timeout_s)``,
    default :func:`_gloo_group`: the rendezvous waits up to :data:`REJOIN_S` for the slowest
    rank's next step) and reports the outcome in the store.  The group is returned once every
    rank has reported a build (a non-blocking check per step); a build that failed on any rank
    moves every rank to the next generation, dropping the groups built, and waits twice as many
    steps before the next try (at most 32).  So every rank uses the same generation, whichever
    rank failed.  ``stats``: ``rebuilt``, ``rebuild_failed``."""

    def __init__(self, name: str, rank: int, world_size: int, timeout_s: float, store=None, build=None):
        self.name, self.rank, self.world_size = name, int(rank), int(world_size)
        self.timeout_s = float(timeout_s)
        self.generation = 0
        self.stats: Counter = Counter()
        self._store = store
        self._build = build or _gloo_group
        self._built = None       # this rank's group of generation + 1, until every rank has reported
        self._wait, self._skip = 1, 0

    def _base_store(self):
        if self._store is None:
            from torch.distributed import distributed_c10d

            self._store = distributed_c10d._get_default_store()
        if not getattr(self, "_cloned", False):
            # a client of its own: a store client serialises its calls, and building a group
            # blocks on it (the rendezvous); other threads' store calls must not wait behind it
            clone = getattr(self._store, "clone", None)
            if clone is not None:
                try:
                    self._store = clone()
                except Exception:  # noqa: BLE001 -- a store that cannot clone: shared
                    pass
            self._cloned = True
        return self._store

    def step(self):
        """One non-blocking step towards the next generation's group: the group once every
        rank has built it, else None."""
        if self._skip > 0:
            self._skip -= 1
            return None
        gen = self.generation + 1
        prefix = f"{self.name}/{gen}"
        import torch.distributed as dist

        store = self._base_store()
        if self._built is None:
            store.set(f"{prefix}/ready/{self.rank}", "1")
            if not store.check([f"{prefix}/ready/{r}" for r in range(self.world_size)]):
                return None
            try:
                # the peers build theirs at their next step (a refresh period, a solve's
                # deadline later); the group's operations time out after timeout_s, as the
                # group it replaces
                self._built = self._build(dist.PrefixStore(f"{prefix}/pg", store), self.rank, self.world_size,
                                          self.timeout_s)
            except Exception as exc:  # noqa: BLE001 -- a rendezvous that timed out or a peer gone
                store.set(f"{prefix}/failed", str(self.rank))
                return self._next_generation(gen, f"rank {self.rank}: {exc}")
            store.set(f"{prefix}/built/{self.rank}", "1")
        # a rank sets either built or failed: all built means no rank failed this generation
        if store.check([f"{prefix}/failed"]):
            self._built = None
            return self._next_generation(gen, "a peer's build failed")
        if not store.check([f"{prefix}/built/{r}" for r in range(self.world_size)]):
            return None
        group, self._built = self._built, None
        self.generation = gen
        self._wait = 1
        self.stats["rebuilt"] += 1
        log.warning("tempo %s: group rebuilt (generation %d)", self.name, gen)
        return group

    def _next_generation(self, gen: int, why: str) -> None:
        """Generation ``gen`` failed (on every rank: each sees the failure in the store)."""
        self.generation = gen
        self.stats["rebuild_failed"] += 1
        self._skip, self._wait = self._wait, min(2 * self._wait, 32)
        log.warning("tempo %s: rebuilding the group failed (%s); next try in %d steps", self.name,
                    str(why).splitlines()[0][:300], self._skip)
        return None


class GlooAggregator:
    """Sum window counts over ranks (a2a backends: disjoint token shards) on a dedicated gloo
    group, in rounds that end together: each round carries a "continuing" flag, and a
    refresher that stops runs one last round with the flag down (:meth:`finish`), so no rank is
    left waiting in an all-reduce its peers never join.

    A round that fails (a gloo timeout: a rank's refresher lagged its peers by more than the
    group's timeout -- a late start, a stopped or swapped-out process -- or a peer's pair closed
    by such a timeout) raises :class:`AggregationUnavailable`; the group is then unusable on
    every rank (gloo closes the pairs), so each rank rebuilds it: it marks itself ready for the
    next generation in the default store and, once every rank has (a non-blocking check, one
    per call), builds a new gloo group under that generation's prefix, with the old group's
    timeout.  Until then each call raises :class:`AggregationUnavailable` at once (the
    refresher solves from its own window).  A failed rebuild waits twice as many calls before
    the next try (at most 32).  Ranks fail and rebuild the same generations: a round or a
    rebuild that fails on one rank fails on every rank.

    One refresher uses it for the server's lifetime.  After every rank's refresher has stopped,
    :meth:`reopen` (on every rank) lets new refreshers start new rounds.

    ``store``: the store rebuilt groups meet in (default: the default process group's);
    ``name``: the keys' prefix there (default from the group's name; unique per aggregator).
    """

    def __init__(self, group, world_size: int, *, store=None, name: str | None = None):
        self.group, self.world_size = group, int(world_size)
        self.done = False
        self.broken = False
        self.stats: Counter = Counter()
        self._store = store
        self.name = name or f"tempo-agg/{getattr(group, 'group_name', 'default')}"
        self.timeout_s = group_timeout_s(group)
        self._rejoin = None

    @property
    def rank(self) -> int:
        return int(self.group.rank())

    @property
    def generation(self) -> int:
        """The group's generation (0: the group given; +1 per rebuild or failed rebuild)."""
        return 0 if self._rejoin is None else self._rejoin.generation

    def _round(self, flag: int, window) -> np.ndarray:
        import torch

        t = torch.from_numpy(np.concatenate([[flag], np.ascontiguousarray(window, np.int64).ravel()]))
        self.group.allreduce([t]).wait()
        return t.numpy()

    def _rebuild(self) -> bool:
        """One non-blocking step towards the next generation's group; True once it is built."""
        if self._rejoin is None:
            self._rejoin = GroupRejoin(self.name, self.rank, self.world_size, self.timeout_s, self._store)
        group = self._rejoin.step()
        if self._rejoin.stats["rebuild_failed"]:
            self.stats["rebuild_failed"] = self._rejoin.stats["rebuild_failed"]
        if group is None:
            return False
        self.group, self.broken = group, False
        self.stats["rebuilt"] += 1
        log.warning("tempo aggregation: summed windows resume (generation %d)", self.generation)
        return True

    def __call__(self, window):
        if self.done:
            raise PeerStopped("the summed-window rounds have ended")
        w = np.asarray(window, np.int64)
        if self.broken and not self._rebuild():
            raise AggregationUnavailable(f"the aggregation group is being rebuilt (generation "
                                         f"{self.generation + 1})")
        try:
            t = self._round(1, w)
        except RuntimeError as exc:
            self.broken = True
            self.stats["failed"] += 1
            log.warning("tempo aggregation: a summed-window round failed (%s); this rank solves from its own "
                        "window until every rank has rebuilt the group", str(exc).splitlines()[0][:300])
            raise AggregationUnavailable(str(exc)) from exc
        if t[0] < self.world_size:
            self.done = True
            raise PeerStopped("a peer rank's refresher stopped, so did the summed-window rounds")
        return t[1:].reshape(w.shape)

    def finish(self, shape) -> None:
        if not self.done:
            self.done = True
            if not self.broken:  # a broken group has no round to end; peers find it broken too
                self._round(0, np.zeros(shape, np.int64))

    def reopen(self) -> None:
        """Rounds may start again (every rank's refresher stopped, every rank reopens)."""
        self.done = False


class TableSync:
    """Versioned tables published by rank 0 and applied by every rank at one agreed forward
    step (rank-invariant dispatch).

    ``shape``: the tables' ``[N, L, E, R]``.  ``broadcast_group`` carries the tables (rank 0
    sends, a receiver thread on every other rank receives; a heartbeat every ``heartbeat_s``,
    default a fifth of the group's timeout, at most 60 s).  ``agree_group`` carries the
    agreement: every ``agree_every`` steps an all-reduce MIN finds the newest version every
    rank holds; :meth:`agree` returns it at the next agreement point.  ``prepare`` (set by
    the runtime) turns each table into what :meth:`agree` returns; ``store`` / ``name``: where
    rebuilt groups meet and their keys' prefix.  Collective failures are counted in ``stats``
    and the group rebuilt (:class:`GroupRejoin`), never fatal.  Raises ValueError on a bad
    shape or ``agree_every < 1``.
    """
    # The all-reduce runs on its own thread, started at one agreement point and read at the
    # next, so the forward path waits only for the ranks' skew (agree_wait_us).  Versions arrive
    # in order and are dropped only when older than the applied one or of an older placement
    # (epoch), so the agreed version is held by every rank.  After a rebuild, each generation of
    # the agreement group starts with an alignment round; a rank that missed an applied table
    # applies it at its next agreement point (agree_caught_up); a round whose ranks are at
    # different steps decides nothing and rebuilds the group.

    def __init__(self, rank: int, world_size: int, shape: tuple, broadcast_group=None, agree_group=None,
                 agree_every: int = 8, heartbeat_s: float | None = None, *, store=None, name: str | None = None):
        self.rank, self.world_size, self.shape = int(rank), int(world_size), tuple(shape)
        if len(self.shape) != 4:
            raise ValueError(f"shape must be the tables' [N, L, E, R], got {self.shape}")
        self.broadcast_group, self.agree_group = broadcast_group, agree_group
        self.agree_every = int(agree_every)
        if self.agree_every < 1:
            raise ValueError(f"agree_every must be >= 1, got {agree_every}")
        if heartbeat_s is None:
            heartbeat_s = min(60.0, group_timeout_s(broadcast_group) / 5) if broadcast_group is not None else 60.0
        self.heartbeat_s = float(heartbeat_s)
        self.leader = self.rank == 0
        self.epoch = 0
        self.version = 0        # last version published (leader)
        self.applied = 0        # last version applied (same on every rank)
        self.prepare = None
        self.stats: Counter = Counter()
        self._store: dict[int, tuple[int, object]] = {}
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._last_send = time.monotonic()
        self._latest = None     # (epoch, version, table) last published (leader): sent again after a rebuild
        self._closing = threading.Event()
        self._thread = self._heartbeat = self._agreer = None
        self._offers: queue.SimpleQueue = queue.SimpleQueue()
        self._answer = None     # (threading.Event, [value, step]) of the agreement in flight
        self._bgroup = self._agroup = None
        self._bbroken = self._abroken = False
        self._stop_sent = False  # rank 0: the stop message was sent (or tried)
        self._aligned = None    # the step of this agreement generation's alignment round
        self.closed = False
        if world_size > 1:
            base = name or f"tempo-sync/{getattr(broadcast_group, 'group_name', 'default')}"
            self._brejoin = GroupRejoin(f"{base}/tables", self.rank, self.world_size,
                                        group_timeout_s(broadcast_group), store)
            self._arejoin = GroupRejoin(f"{base}/agree", self.rank, self.world_size,
                                        group_timeout_s(agree_group), store)
            self._bgroup, self._agroup = _group_or_default(broadcast_group), _group_or_default(agree_group)
            if not self.leader:
                self._thread = threading.Thread(target=self._receive_loop, name="tempo-table-sync", daemon=True)
                self._thread.start()
            else:
                self._heartbeat = threading.Thread(target=self._heartbeat_loop, name="tempo-table-heartbeat",
                                                   daemon=True)
                self._heartbeat.start()
            self._agreer = threading.Thread(target=self._agree_loop, name="tempo-table-agree", daemon=True)
            self._agreer.start()

    # ------------------------------------------------------------------ transport
    def _bcast(self, header, table=None, wait_s: float | None = None):
        import datetime

        import torch

        h = torch.as_tensor(header, dtype=torch.int64)
        work = self._bgroup.broadcast(h, 0)
        if wait_s is None:
            work.wait()
        else:  # on timeout the broadcast stays posted: a follower that reaches it later still gets it
            work.wait(datetime.timedelta(seconds=wait_s))
        if int(h[0]) == 1:
            t = torch.from_numpy(np.ascontiguousarray(table, np.float32)) if table is not None else \
                torch.empty(self.shape, dtype=torch.float32)
            self._bgroup.broadcast(t, 0).wait()
            return h.tolist(), t.numpy()
        return h.tolist(), None

    def _send(self, header, table=None) -> bool:
        """Rank 0: send one message; False (counted, the group marked for a rebuild) when it failed."""
        with self._send_lock:
            if self._bbroken or self._stop_sent:  # nothing follows the stop message: no follower receives it
                return False
            try:
                self._bcast(header, table)
            except Exception as exc:
                if self._closing.is_set():
                    return False
                self._bbroken = True
                self.stats["send_failed"] += 1
                log.warning("tempo table sync: sending failed (%s); tables are staged until every rank has rebuilt "
                            "the table group", str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__)
                return False
            self._last_send = time.monotonic()
            return True

    def _heartbeat_loop(self) -> None:
        """Rank 0: a heartbeat when nothing was sent for ``heartbeat_s``; the table group's
        rebuild after a failed send (then the newest table again)."""
        while not self._closing.wait(0.1 if self._bbroken else min(self.heartbeat_s / 4, 1.0)):
            if self._bbroken:
                group = self._brejoin.step()
                if group is None:
                    continue
                with self._send_lock:
                    self._bgroup, self._bbroken = group, False
                self.stats["broadcast_rebuilt"] += 1
                latest = self._latest
                if latest is not None and latest[0] == self.epoch:
                    self._send([1, latest[0], latest[1]], latest[2])
                continue
            if time.monotonic() - self._last_send < self.heartbeat_s:
                continue
            if self._send([2, 0, 0]):
                self.stats["heartbeats"] += 1

    def _receive_loop(self) -> None:
        # Runs until rank 0's stop message, also after this rank's close: rank 0's broadcasts
        # (a last table, a heartbeat, the stop message) complete only once every follower has
        # received them, so a receiver that left on its own close would leave rank 0 blocked.
        while True:
            try:
                (kind, epoch, version), table = self._bcast([0, 0, 0])
            except Exception as exc:  # rank 0 (or this rank) lagged past the timeout, or rank 0 is gone
                if self._closing.is_set():
                    return
                self.stats["receive_failed"] += 1
                log.warning("tempo table sync: receiving failed (%s); rebuilding the table group",
                            str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__)
                group = None
                while group is None and not self._closing.is_set():
                    group = self._brejoin.step()
                    if group is None:
                        self._closing.wait(0.1)
                if group is None:  # closed while the group was down: rank 0 sends nothing on it
                    return
                self._bgroup = group
                self.stats["broadcast_rebuilt"] += 1
                continue
            if kind == 0:
                self.stats["stop_received"] += 1
                return
            if kind == 2:
                self.stats["heartbeats"] += 1
                continue
            try:
                self._stage(version, epoch, table)
            except Exception as exc:  # noqa: BLE001 -- the receiver must keep taking rank 0's broadcasts
                self.stats["stage_failed"] += 1
                log.warning("tempo table sync: table version %d not staged (%s: %s)", version,
                            type(exc).__name__, exc)

    def _stage(self, version: int, epoch: int, table: np.ndarray) -> None:
        item = self.prepare(table) if self.prepare is not None else table
        with self._lock:
            if epoch >= self.epoch and version > self.applied:
                self._store[version] = (epoch, item)

    # ------------------------------------------------------------------ leader
    def publish(self, table: np.ndarray, epoch: int | None = None) -> bool:
        """Rank 0's refresher: stage a new table and send it to every rank; False (nothing
        staged) when ``epoch`` is not the current placement's (a rebalance came in meanwhile).
        A table that could not be sent stays staged and is sent once the group is rebuilt."""
        if not self.leader:
            raise RuntimeError("only rank 0 publishes tables")
        table = np.ascontiguousarray(table, np.float32)
        if table.shape != self.shape:
            raise ValueError(f"table shape {table.shape} != synchronised shape {self.shape}")
        item = self.prepare(table) if self.prepare is not None else table
        with self._lock:
            if epoch is not None and epoch != self.epoch:
                return False
            self.version += 1
            version, epoch = self.version, self.epoch
            self._store[version] = (epoch, item)
            self._latest = (epoch, version, table)
        if self.world_size > 1 and not self._send([1, epoch, version], table):
            self.stats["unsent"] += 1
        self.stats["published"] += 1
        return True

    # ------------------------------------------------------------------ every rank, forward path
    def _offer(self) -> int:
        with self._lock:
            mine = [v for v, (e, _) in self._store.items() if e == self.epoch]
            return max(mine) if mine else self.applied

    def _agree_loop(self) -> None:
        while True:
            item = self._offers.get()
            if item is None:
                return
            done, box = item
            box[0] = self._agree_round(box[0], box[1])
            done.set()

    def _agree_round(self, offer: int, step: int) -> int:
        """One agreement (the agreement thread): the version to apply at the next agreement
        point, or -1 (nothing)."""
        import torch
        import torch.distributed as dist

        if self._abroken:
            group = self._arejoin.step()
            if group is None:
                return -1
            self._agroup, self._abroken, self._aligned = group, False, None
            self.stats["agree_rebuilt"] += 1
        try:
            if self._aligned is None:  # a generation's first round: the newest step and applied version
                t = torch.tensor([-step, -self.applied], dtype=torch.int64)
                self._agroup.allreduce(t, dist.ReduceOp.MIN).wait()
                self._aligned = -int(t[0])
                newest = -int(t[1])
                if newest > self.applied:  # another rank applied a table this one has not
                    self.stats["agree_caught_up"] += 1
                    return newest
                return -1
            if step <= self._aligned:  # before this generation's rounds: the peers did no round for it
                return -1
            t = torch.tensor([offer, step, -step], dtype=torch.int64)
            self._agroup.allreduce(t, dist.ReduceOp.MIN).wait()
            if int(t[1]) != -int(t[2]):
                raise RuntimeError(f"ranks at different agreement steps ({int(t[1])} to {-int(t[2])})")
            return int(t[0])
        except Exception as exc:  # a rank lagged past the timeout (or a peer is gone): nothing decided
            if not self._closing.is_set():
                self._abroken = True
                self.stats["agree_failed"] += 1
                log.warning("tempo table sync: an agreement round failed (%s); no table is applied until every "
                            "rank has rebuilt the agreement group",
                            str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__)
            return -1

    def agree(self, step: int):
        """At a forward step: the table to apply before it, or None (same answer on every rank)."""
        if step % self.agree_every:
            return None
        if self.world_size == 1:
            return self._take(self._offer())
        decided = None
        if self._answer is not None:  # started at the previous agreement point
            done, box = self._answer
            if not done.is_set():
                self.stats["agree_waits"] += 1
                t0 = time.perf_counter()
                done.wait()
                waited = int((time.perf_counter() - t0) * 1e6)
                self.stats["agree_wait_us"] += waited
                self.stats["agree_wait_max_us"] = max(self.stats["agree_wait_max_us"], waited)
            decided = box[0]
        self._answer = None
        if not self.closed:
            self._answer = (threading.Event(), [self._offer(), int(step)])
            self._offers.put(self._answer)
        return None if decided is None or decided < 0 else self._take(decided)

    def _take(self, version: int):
        with self._lock:
            if version <= self.applied or version not in self._store:
                return None
            epoch, table = self._store[version]
            if epoch != self.epoch:  # decided before a rebalance (every rank the same)
                return None
            self.applied = version
            self._store = {v: x for v, x in self._store.items() if v > version}
        self.stats["applied"] += 1
        return table

    def new_epoch(self) -> None:
        """A rebalance (same forward step on every rank): tables of the old placement never apply."""
        with self._lock:
            self.epoch += 1
            self._store = {v: x for v, x in self._store.items() if x[0] >= self.epoch}

    @property
    def receiving(self) -> bool | None:
        """Whether this follower's receiver is alive (None on rank 0 or a single rank)."""
        return None if self._thread is None else self._thread.is_alive()

    def close(self) -> None:
        """Stop this rank's sync: no agreement round starts; rank 0 sends the stop message and
        waits at most :data:`STOP_WAIT_S` for the followers to take it; a follower's receiver
        keeps taking rank 0's broadcasts until that message."""
        if self.closed:
            return
        self.closed = True
        self._closing.set()
        if self.leader and self.world_size > 1:
            with self._send_lock:
                if not self._bbroken and not self._stop_sent:
                    self._stop_sent = True
                    try:
                        self._bcast([0, 0, 0], wait_s=STOP_WAIT_S)
                    except Exception as exc:  # noqa: BLE001 -- a follower gone or slower than STOP_WAIT_S
                        self.stats["stop_unconfirmed"] += 1
                        log.warning("tempo table sync: the followers did not take the stop message within %.0f s "
                                    "(%s)", STOP_WAIT_S, str(exc).splitlines()[0][:300] if str(exc) else
                                    type(exc).__name__)
        self._offers.put(None)
        for th in (self._thread, self._heartbeat, self._agreer):
            if th is not None:
                th.join(timeout=2)


def _group_or_default(group):
    """``group``, or the default process group when None."""
    if group is not None:
        return group
    from torch.distributed import distributed_c10d

    return distributed_c10d._get_default_group()


class DpPadding:
    """Padding rows of the DP-gathered MoE input: attention DP with ``--moe-a2a-backend none``.

    There every rank's MoE layer routes one buffer that concatenates one slot per attention-DP
    rank (SGLang 0.5.23, ``layers/dp_attention.py``: ``dp_gather`` by all-gather under
    ``DpPaddingMode.MAX_LEN``, every slot ``max_len`` rows, or by all-reduce under ``SUM_LEN``,
    slot ``r`` at ``sum(widths[:r])``); slot ``r`` holds DP rank ``r``'s real tokens first,
    then padding.  The slot widths are the "per-rank token counts as padded for the gather"
    (``get_dp_global_num_tokens()``), the real counts are the forward batch's
    ``global_num_tokens_cpu`` before SGLang pads it.  SGLang gives no prefix bound for this
    layout (``ForwardBatch.moe_num_token_non_padded`` returns None when ``attn_dp_size != 1``),
    so without a mask every padding row would be counted.

    :attr:`real` (int64 ``[n_dp]`` on the device) is allocated once and written in place before
    each forward pass (:meth:`set_real`), so a captured decode or prefill graph reads this
    step's counts at replay.  :meth:`row_mask` builds the ``[rows]`` mask from device
    arithmetic only when the slots are equally wide (every captured layout: CUDA-graph buckets
    pad every DP rank to the same width), so it is safe inside capture; unequal widths
    (``SUM_LEN`` eagerly) use one small host-to-device copy, which never happens in capture.
    A buffer whose row count is not the sum of the widths (for example a two-batch-overlap
    child) gets no mask: every row counts, as before.
    """

    UNKNOWN = 1 << 62  # a real count no slot reaches: every row counts

    def __init__(self, n_dp: int, device="cpu"):
        import torch

        if int(n_dp) < 1:
            raise ValueError(f"n_dp (attention-DP size) must be >= 1, got {n_dp}")
        self.n_dp = int(n_dp)
        self.real = torch.full((self.n_dp,), self.UNKNOWN, dtype=torch.int64, device=device)  # once

    def set_real(self, counts) -> None:
        """This step's real tokens per DP rank (``None``: unknown, every row counts)."""
        import torch

        if counts is None:
            self.real.fill_(self.UNKNOWN)
            return
        c = [int(x) for x in counts]
        if len(c) != self.n_dp or min(c) < 0:
            raise ValueError(f"counts must hold {self.n_dp} non-negative token counts (one per attention-DP rank), "
                             f"got {list(counts)}")
        if self.real.is_cuda:  # as SGLang stages global_num_tokens: fresh pinned host tensor, async copy
            self.real.copy_(torch.tensor(c, dtype=torch.int64, pin_memory=True), non_blocking=True)
        else:
            self.real.copy_(torch.tensor(c, dtype=torch.int64))

    def layout(self, rows: int, widths):
        """How the kernel masks a buffer of ``rows`` rows with slot ``widths``: ``("slots",
        width)`` when the slots are equally wide (every captured layout: the kernel reads
        :attr:`real`, nothing else runs), ``("rows", mask)`` with a bool ``[rows]`` mask for
        unequal widths (eager only), None when the widths do not describe the buffer."""
        if widths is None:
            return None
        w = [int(x) for x in widths]
        if len(w) != self.n_dp or min(w) < 0 or sum(w) != int(rows):
            return None
        if len(set(w)) == 1:
            return "slots", w[0]
        mask = self.row_mask(rows, w)
        return None if mask is None else ("rows", mask)

    def row_mask(self, rows: int, widths):
        """Bool ``[rows]``: True for the rows that are some DP rank's real tokens; ``None`` when
        ``widths`` (slot widths, one per DP rank) do not describe a buffer of ``rows`` rows."""
        import torch

        if widths is None:
            return None
        w = [int(x) for x in widths]
        if len(w) != self.n_dp or min(w) < 0 or sum(w) != int(rows):
            return None
        dev = self.real.device
        ar = torch.arange(int(rows), device=dev)
        if len(set(w)) == 1:  # MAX_LEN and every captured layout: pure device arithmetic
            width = max(w[0], 1)
            slot = ar // width
            pos = ar - slot * width
        else:  # SUM_LEN, eager only
            if dev.type == "cuda" and torch.cuda.is_current_stream_capturing():
                return None
            starts = np.concatenate([[0], np.cumsum(w)[:-1]])
            bounds = torch.tensor(np.cumsum(w)[:-1], dtype=torch.int64, device=dev)
            slot = torch.bucketize(ar, bounds, right=True)
            pos = ar - torch.tensor(starts, dtype=torch.int64, device=dev)[slot]
        return pos < self.real[slot]


class TempoRuntime:
    """Everything the server holds for TEMPO: tables, counters, refresher, optional sync.

    Parameters
    ----------
    physical_to_logical_map : int[L, P] (torch or numpy)
    n_gpus : int, the EP size.
    device : torch device of the tables and counters.
    settings : ServingSettings (default ``ServingSettings()``); ``settings.solver`` is
        ``process``, ``thread`` or ``noop`` (``tempo_noop``: full data path, the table stays uniform).
    n_logical : int, logical experts E (default: largest id + 1).
    max_replicas : int, table width R (default ``P - E + 1``).
    node : int, this rank's source node (``hier`` tables).
    rank_invariant : bool, every rank draws the same uniforms (a2a ``none``).
    rank : int, this rank (mixed into the uniforms when not rank-invariant).
    kernel : ``auto`` (Triton for CUDA tensors, torch otherwise), ``triton`` or ``torch``.
    aggregate : callable ``window -> window`` summed over ranks (a2a; :class:`GlooAggregator`).
    sync : TableSync, versioned tables applied at agreed steps; only rank 0 then runs a refresher.
    dp_size : int, attention-DP size when the MoE input is DP-gathered (masks padding rows).
    start : bool, start the refresher now (else :meth:`start`).

    Holds ``prob float32[N, L, E, R]``, ``phys int32[L, E, R]``, ``counts int64[L, E]`` and
    ``invalid int64[1]`` (routed pairs with an id ``>= E`` or a bad uniform, counted in
    :attr:`stats`).  Raises ValueError/TypeError on a bad argument.  Use: ``capture_guard()``
    around CUDA-graph capture, ``on_forward`` before each forward, ``dispatch`` in it,
    ``update_layers`` per EPLB rebalance chunk, ``close()``.
    """

    def __init__(self, physical_to_logical_map, n_gpus: int, device="cpu", settings: ServingSettings | None = None,
                 *, n_logical: int | None = None, max_replicas: int | None = None, node: int = 0,
                 rank_invariant: bool = False, aggregate=None, sync: TableSync | None = None, start: bool = True,
                 dp_size: int | None = None, rank: int = 0, kernel: str = "auto"):
        import torch

        self.settings = settings if settings is not None else ServingSettings()
        if not isinstance(self.settings, ServingSettings):
            raise TypeError(f"settings must be a ServingSettings, got {type(self.settings).__name__}")
        self.n_gpus, self.device = int(n_gpus), device
        if kernel not in ("auto", "triton", "torch"):
            raise ValueError(f"kernel must be 'auto', 'triton' or 'torch', got {kernel!r}")
        self.kernel, self.rank = kernel, int(rank)
        self.rank_invariant, self.aggregate, self.sync = rank_invariant, aggregate, sync
        p2l = physical_to_logical_map
        p2l = p2l.detach().cpu().numpy() if hasattr(p2l, "detach") else np.asarray(p2l)
        if p2l.ndim != 2 or p2l.size == 0:
            raise ValueError(f"physical_to_logical_map must be a non-empty [L, P] array, got shape {p2l.shape}")
        self.p2l = p2l.astype(np.int64)
        L, P = self.p2l.shape
        self.n_logical = int(self.p2l.max()) + 1 if n_logical is None else int(n_logical)
        self.width = int(max_replicas) if max_replicas is not None else P - self.n_logical + 1
        if self.width < 1:
            raise ValueError(f"max_replicas must be >= 1, got {self.width}")
        self.n_nodes = self.settings.n_nodes(self.n_gpus) or 1
        if not 0 <= int(node) < self.n_nodes:
            raise ValueError(f"node must lie in [0, {self.n_nodes}), got {node}")
        self.node = int(node)
        phys = padded_replica_map(self.p2l, self.n_logical, self.width)
        prob = uniform_prob(phys, self.n_nodes)
        if sync is not None and tuple(sync.shape) != prob.shape:
            raise ValueError(f"sync's table shape {tuple(sync.shape)} != this runtime's {prob.shape} ([N, L, E, R])")
        # ---- allocated once; every later change is in place (captured CUDA graphs hold these
        # pointers; an EPLB rebalance rewrites the moved layers' rows, update_layers)
        self.phys = torch.tensor(phys, device=device)
        self.prob = torch.tensor(prob, device=device)
        self.counts = torch.zeros((L, self.n_logical), dtype=torch.int64, device=device)
        self.invalid = torch.zeros(1, dtype=torch.int64, device=device)
        self.step_dev = torch.zeros(1, dtype=torch.int64, device=device)  # the forward step, read by the kernel
        self.steps = 0
        self.epoch = 0                                   # placement version, +1 per rebalance chunk
        self.dp_padding = DpPadding(dp_size, device) if dp_size is not None and int(dp_size) > 1 else None
        self.device_lock = threading.RLock()
        self.counters: Counter = Counter()               # runtime-level counts (see stats)
        self._invalid_seen = 0
        self._stream = None
        self._host_counts = self._host_invalid = None
        self._stage_phys = self._stage_prob = self._rows_done = None
        cuda = self.counts.is_cuda
        if cuda:
            self._stream = torch.cuda.Stream(device=self.counts.device)  # once, never per period
            self._host_counts = torch.empty(self.counts.shape, dtype=torch.int64, pin_memory=True)
            self._host_invalid = torch.empty(1, dtype=torch.int64, pin_memory=True)
            self._stage_phys = torch.empty(self.phys.shape, dtype=self.phys.dtype, pin_memory=True)
            self._stage_prob = torch.empty(self.prob.shape, dtype=self.prob.dtype, pin_memory=True)
        if sync is not None and cuda:
            # each agreed table waits in pinned memory, so applying it is one async copy; pinned
            # allocation (events and host registration) never runs while a graph is captured
            sync.prepare = self._pinned
        from .refresher import TorchPublisher

        self._publisher = TorchPublisher(self.prob, stream=self._stream)
        self.refresher = None
        if start:
            self.start()

    # ------------------------------------------------------------------ device access
    def _pinned(self, table):
        """A table as a pinned host tensor, allocated under :attr:`device_lock` (never during
        a capture)."""
        import torch

        src = torch.from_numpy(np.ascontiguousarray(table, np.float32))
        with self.device_lock:
            return src.pin_memory()

    @contextlib.contextmanager
    def capture_guard(self):
        """Held while SGLang captures CUDA graphs: the refresher makes no CUDA call meanwhile."""
        with self.device_lock:
            yield

    def _snapshot(self):
        """The counters, copied to host (the refresher thread): on CUDA on the side stream,
        so the copy never waits behind the decode graph; the invalid-pair counter with them."""
        with self.device_lock:
            if self._stream is not None:
                import torch

                with torch.cuda.stream(self._stream):
                    self._host_counts.copy_(self.counts, non_blocking=True)
                    self._host_invalid.copy_(self.invalid, non_blocking=True)
                self._stream.synchronize()
                counts, invalid = self._host_counts.numpy().copy(), int(self._host_invalid[0])
            else:
                counts, invalid = self.counts.numpy().copy(), int(self.invalid[0])
        self._note_invalid(invalid)
        return counts

    def _note_invalid(self, invalid: int) -> None:
        if invalid != self._invalid_seen:
            log.warning("tempo: %d routed pairs had a logical id >= E = %d or a bad uniform since start-up (%d new); "
                        "they were masked (-1), not counted", invalid, self.n_logical, invalid - self._invalid_seen)
            self._invalid_seen = invalid

    def _publish(self, new: np.ndarray, epoch: int | None = None) -> bool:
        """The refresher's publication; False when ``epoch`` is an older placement's."""
        if epoch is not None and epoch != self.epoch:
            return False
        if self.sync is not None:
            # rank-invariant: rank 0 solved from its own counts (every rank's counts: nothing is
            # multiplied by the world size); every rank applies it at an agreed step
            return self.sync.publish(new, epoch)
        with self.device_lock:
            if epoch is not None and epoch != self.epoch:
                return False
            self._publisher.after = self._rows_done
            self._publisher(new)
        return True

    def _apply(self, table) -> None:
        """Forward path (scheduler thread): copy an agreed table into the live one, ordered on
        the current stream before this step's forward pass (from pinned memory on CUDA: no wait)."""
        import torch

        src = table if isinstance(table, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(table))
        self.prob.copy_(src, non_blocking=self.prob.is_cuda)
        self.counters["tables_applied"] += 1

    # ------------------------------------------------------------------ forward path
    def on_forward(self, dp_tokens=None) -> None:
        """Called once per forward pass (every rank, the same passes): count the step, record
        this step's real tokens per DP rank (``dp_tokens``, with :attr:`dp_padding`; None:
        unknown, every row counts) and, with a :class:`TableSync`, apply the agreed table."""
        self.steps += 1
        self.step_dev.fill_(self.steps)  # stream-ordered: this pass's kernels (and graph replay) read it
        if self.dp_padding is not None:
            self.dp_padding.set_real(dp_tokens)
        if self.sync is not None:
            table = self.sync.agree(self.steps)
            if table is not None:
                self._apply(table)

    def layer_table(self, layer_id: int):
        """(prob [E, R] as this rank's source node sees it, phys [E, R]) of one layer."""
        return self.prob[self.node, layer_id], self.phys[layer_id]

    def dispatch(self, layer_id: int, topk_ids, num_token_non_padded=None, dp_widths=None):
        """Logical ``topk_ids [T, K]`` -> physical ids ``[T, K]`` (same dtype), counting
        non-padding rows: rows at or beyond ``num_token_non_padded`` and, with
        :attr:`dp_padding` and the gather's slot widths ``dp_widths``, the padding rows of every
        DP slot.  Pairs with an id ``>= E`` are masked and counted in :attr:`invalid`, never
        raised for.  On CUDA (or ``kernel="triton"``) one fused kernel launch and the output's
        allocation, nothing else."""
        layout = None
        if self.dp_padding is not None and dp_widths is not None:
            layout = self.dp_padding.layout(topk_ids.shape[0], dp_widths)
        if self.kernel == "triton" or (self.kernel == "auto" and topk_ids.is_cuda):
            from .triton_kernels import dispatch_and_count_triton

            L, E, R = self.phys.shape
            mask = {} if layout is None else (
                dict(dp_real=self.dp_padding.real, dp_width=layout[1]) if layout[0] == "slots"
                else dict(row_valid=layout[1]))
            return dispatch_and_count_triton(
                topk_ids, self.prob, self.phys, self.counts, None, num_token_non_padded, invalid=self.invalid,
                step=self.step_dev, layer=layer_id, rank=self.rank, rank_invariant=self.rank_invariant,
                prob_off=(self.node * L + layer_id) * E * R, phys_off=layer_id * E * R, counts_off=layer_id * E,
                n_experts=E, width=R, **mask)
        from .kernels import dispatch_and_count_reference

        row_valid = None
        if layout is not None:
            row_valid = layout[1] if layout[0] == "rows" else self.dp_padding.row_mask(topk_ids.shape[0], dp_widths)
        prob, phys = self.layer_table(layer_id)
        u = uniforms(topk_ids.numel(), topk_ids.device, self.rank_invariant, layer_id, self.steps, self.rank)
        return dispatch_and_count_reference(topk_ids, prob, phys, self.counts[layer_id], u, num_token_non_padded,
                                            row_valid, invalid=self.invalid)

    # ------------------------------------------------------------------ refresher
    @property
    def solves(self) -> bool:
        """Whether this rank runs a refresher (with a TableSync only the leader does)."""
        return self.sync is None or self.sync.leader

    def start(self) -> None:
        """Start the refresher (with a :class:`GlooAggregator`, on every rank together)."""
        from .refresher import Refresher
        from .tables import DispatchTable

        if self.refresher is not None or not self.solves:
            return
        if hasattr(self.aggregate, "reopen"):
            self.aggregate.reopen()
        host = DispatchTable(uniform_prob(self.phys.cpu().numpy(), self.n_nodes), self.phys.cpu().numpy())
        self.refresher = Refresher(host, self._snapshot, self.p2l, self.n_gpus, self.settings,
                                   aggregate=self.aggregate, publish=self._publish,
                                   steps=lambda: self.steps)
        self.refresher.epoch = self.epoch
        self.refresher.start()

    def stop_refresher(self) -> None:
        if self.refresher is not None:
            r, self.refresher = self.refresher, None
            self.counters.update({f"refresher_{k}": v for k, v in r.stats.items()})
            r.stop()

    def close(self) -> None:
        self.stop_refresher()
        if self.sync is not None:
            self.sync.close()

    @property
    def stats(self) -> dict:
        """Counters of this rank's runtime, one flat dict of integers:

        * the refresher's outcomes (``published``, ``idle``, ``dropped``, ``rejected``, ``died``,
          ``error``, ``stale``, ``stopped``, ``noop``, ``cancelled``), ``placements`` (rebalances
          it picked up), ``stale_warnings`` (times nothing was published for
          ``settings.stale_windows`` windows with traffic) and ``solver_restarts``;
        * ``rebalance_chunks`` (:meth:`update_layers` calls) with ``update_layers_us`` (their
          total wall time on the scheduler thread) and ``update_layers_max_us``, ``steps``
          (forward passes),
          ``invalid_pairs`` (the kernel's invalid-pair counter at the last snapshot),
          ``refresher_running`` (0/1);
        * with a :class:`TableSync`: ``tables_applied`` (agreed tables applied on this rank),
          ``sync_published``, ``sync_heartbeats``, ``sync_agree_waits`` (the forward path had to
          wait for an agreement) with ``sync_agree_wait_us`` (their total) and
          ``sync_agree_wait_max_us``; the sync's recoveries: ``sync_send_failed``,
          ``sync_receive_failed``, ``sync_agree_failed`` (rounds that failed), ``sync_unsent``
          (tables staged while the table group was down), ``sync_broadcast_rebuilt``,
          ``sync_agree_rebuilt``, ``sync_agree_caught_up``, ``sync_stage_failed`` (received tables
          not staged); at close ``sync_stop_received`` (a follower took rank 0's stop message)
          and ``sync_stop_unconfirmed`` (rank 0: not taken within ``STOP_WAIT_S``).
        """
        out = Counter()
        r = self.refresher
        if r is not None:
            out.update(r.stats)
            out["solver_restarts"] = int(getattr(r.solver, "restarts", 0))
        out.update({k: v for k, v in self.counters.items() if k != "tables_applied"})
        out["tables_applied"] = self.counters["tables_applied"]
        out["steps"] = self.steps
        out["invalid_pairs"] = self._invalid_seen
        out["refresher_running"] = int(r is not None and r.running)
        if self.sync is not None:
            out.update({f"sync_{k}": v for k, v in self.sync.stats.items()})
        return dict(out)

    def update_layers(self, physical_to_logical_map, layer_ids=None) -> None:
        """EPLB moved the experts of ``layer_ids`` (all layers when None): rewrite their rows of
        ``phys`` and ``prob`` in place (uniform over the new replicas until the next table) and
        hand the refresher the new placement.  Called once per rebalance chunk, on the scheduler
        thread, at the same forward step on every rank; nothing is stopped or restarted.  Layers
        of later chunks keep their old rows until their own chunk."""
        import torch

        t0 = time.perf_counter()
        p2l = physical_to_logical_map
        p2l = p2l.detach().cpu().numpy() if hasattr(p2l, "detach") else np.asarray(p2l)
        if p2l.shape != self.p2l.shape:
            raise ValueError(f"physical_to_logical_map has shape {p2l.shape}, the runtime {self.p2l.shape}")
        L = self.p2l.shape[0]
        ids = list(range(L)) if layer_ids is None else sorted({int(i) for i in layer_ids})
        if any(not 0 <= i < L for i in ids):
            raise ValueError(f"layer_ids must lie in [0, {L}), got {layer_ids}")
        if not ids:
            return
        phys = padded_replica_map(p2l[ids], self.n_logical, self.width)  # raises before anything changes
        prob = uniform_prob(phys, self.n_nodes)
        runs = _runs(ids)
        with self.device_lock:
            self.epoch += 1
            if self._stage_phys is not None:  # CUDA: pinned staging, async copies on this stream
                if self._rows_done is not None:
                    self._rows_done.synchronize()  # the previous chunk's copies have read the staging
                k = 0
                for a, b in runs:
                    self._stage_phys[a:b].copy_(torch.from_numpy(phys[k:k + b - a]))
                    self._stage_prob[:, a:b].copy_(torch.from_numpy(prob[:, k:k + b - a]))
                    self.phys[a:b].copy_(self._stage_phys[a:b], non_blocking=True)
                    self.prob[:, a:b].copy_(self._stage_prob[:, a:b], non_blocking=True)
                    k += b - a
                self._rows_done = torch.cuda.Event()
                self._rows_done.record()
            else:
                k = 0
                for a, b in runs:
                    self.phys[a:b] = torch.from_numpy(phys[k:k + b - a])
                    self.prob[:, a:b] = torch.from_numpy(prob[:, k:k + b - a])
                    k += b - a
        self.p2l[ids] = p2l[ids]
        if self.sync is not None:
            self.sync.new_epoch()
        if self.refresher is not None:
            self.refresher.set_placement(self.p2l, self.epoch)
        self.counters["rebalance_chunks"] += 1
        took = int((time.perf_counter() - t0) * 1e6)
        self.counters["update_layers_us"] += took
        self.counters["update_layers_max_us"] = max(self.counters["update_layers_max_us"], took)

    def reset(self, physical_to_logical_map) -> None:
        """Every layer moved (compatibility name for :meth:`update_layers` with all layers)."""
        self.update_layers(physical_to_logical_map, None)


def _runs(ids: list) -> list:
    """Sorted layer ids as half-open runs of consecutive ids: [0, 1, 2, 5] -> [(0, 3), (5, 6)]."""
    runs = []
    for i in ids:
        if runs and runs[-1][1] == i:
            runs[-1][1] = i + 1
        else:
            runs.append([i, i + 1])
    return [tuple(r) for r in runs]
