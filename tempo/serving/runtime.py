"""What TEMPO holds inside a server process (paper Section 4.4), independent of SGLang's
classes so it runs and is tested on CPU: the live tables on the device, the cumulative
counters the dispatch kernel increments, the refresher, and -- with several ranks -- the
agreement that makes every rank switch tables at the same forward step.

Allocated once, updated in place (Issue 15, items 1-2): ``phys``, ``prob`` and ``counts`` are
allocated at start-up with a fixed replica width ``R = P - E + 1`` (the most replicas one
expert can have when every expert has one), and never reallocated: a captured CUDA graph reads
and writes them through fixed pointers.  An EPLB rebalance rewrites the rows of the layers it
moved, chunk by chunk, in place (:meth:`TempoRuntime.update_layers`); the counters keep running
and the new refresher takes a new baseline.  The side stream and the pinned staging buffers
are created once.  While SGLang captures CUDA graphs (decode or prefill, any capture mode) the
refresher makes no CUDA call: capture holds :attr:`TempoRuntime.device_lock`, which every
snapshot and publication takes too.

Rank-invariant dispatch (``--moe-a2a-backend none``, EP > 1; Issue 15 item 3): every rank
routes the same tokens and must pick the same replica for the same (token, slot).  The
uniforms are rank-invariant (:func:`uniforms`), and so is the table: only rank 0 solves
(from its own counts, which are every rank's counts, so nothing is multiplied by the world
size); it broadcasts each table with a version number (:class:`TableSync`), and every
``agree_every`` forward steps all ranks agree, with one small all-reduce in the forward path,
on the newest version every rank holds, and apply it before that step's forward pass.

Pricing (item 5): the refresher divides a window's counts by the forward steps it spans
(:attr:`TempoRuntime.steps`, counted by the forward hook), so the cost model prices one
forward step's batch, not a 200 ms window as one batch.
"""
from __future__ import annotations

import contextlib
import logging
import threading

import numpy as np

from .errors import PeerStopped
from .settings import ServingSettings

log = logging.getLogger("tempo.serving")


def uniforms(n: int, device, rank_invariant: bool, layer_id: int = 0):
    """One uniform per routed pair.  Rank-invariant dispatch (no a2a backend: every EP rank
    routes the same tokens and must pick the same replica) uses a deterministic
    low-discrepancy sequence over the pair index -- identical on every rank, graph-safe,
    and evenly spread -- instead of a random draw."""
    import torch

    if rank_invariant:
        idx = torch.arange(n, device=device, dtype=torch.float64)
        return torch.frac((idx + 0.5) * 0.6180339887498949 + layer_id * 0.7548776662466927).to(torch.float32)
    return torch.rand(n, device=device)


def padded_replica_map(physical_to_logical_map, n_logical: int, width: int) -> np.ndarray:
    """:func:`~tempo.serving.tables.replica_map` padded with -1 to ``width`` columns."""
    from .tables import replica_map

    phys = replica_map(physical_to_logical_map, n_logical)
    if phys.shape[-1] > width:
        raise ValueError(f"an expert has {phys.shape[-1]} replicas, more than the table width {width} "
                         f"allocated at start-up")
    out = np.full(phys.shape[:-1] + (width,), -1, np.int32)
    out[..., :phys.shape[-1]] = phys
    return out


def uniform_prob(phys: np.ndarray) -> np.ndarray:
    valid = phys >= 0
    return (valid / np.maximum(valid.sum(-1, keepdims=True), 1)).astype(np.float32)


class GlooAggregator:
    """Sum window counts over ranks (a2a backends: disjoint token shards) on a dedicated gloo
    group, in rounds that end together: each round carries a "continuing" flag, and a
    refresher that stops runs one last round with the flag down (:meth:`finish`), so no rank is
    left waiting in an all-reduce its peers never join (review finding 13)."""

    def __init__(self, group, world_size: int):
        self.group, self.world_size = group, int(world_size)
        self.done = False

    def _round(self, flag: int, window) -> np.ndarray:
        import torch
        import torch.distributed as dist

        t = torch.from_numpy(np.concatenate([[flag], np.ascontiguousarray(window, np.int64).ravel()]))
        dist.all_reduce(t, group=self.group)
        return t.numpy()

    def __call__(self, window):
        if self.done:
            raise PeerStopped("a peer rank's refresher stopped")
        w = np.asarray(window, np.int64)
        t = self._round(1, w)
        if t[0] < self.world_size:
            self.done = True
            raise PeerStopped("a peer rank's refresher stopped")
        return t[1:].reshape(w.shape)

    def finish(self, shape) -> None:
        if not self.done:
            self.done = True
            self._round(0, np.zeros(shape, np.int64))


class TableSync:
    """Versioned tables published by rank 0 and applied by every rank at one agreed forward
    step (rank-invariant dispatch).

    ``broadcast_group`` carries the tables (rank 0's refresher thread sends, a receiver
    thread on every other rank receives); ``agree_group`` is used only by the forward path
    (:meth:`agree`), every ``agree_every`` steps: an all-reduce MIN of the newest version of
    the current placement each rank holds.  Every rank calls :meth:`agree` at the same steps
    (ranks run forward passes in lock step), so every rank gets the same answer and applies
    the same table before the same forward pass.  Versions received in order, and a version
    is dropped only when older than the applied one or of an older placement (``epoch``), so
    the agreed version is held by every rank.
    """

    def __init__(self, rank: int, world_size: int, shape: tuple, broadcast_group=None, agree_group=None,
                 agree_every: int = 8):
        self.rank, self.world_size, self.shape = int(rank), int(world_size), tuple(shape)
        self.broadcast_group, self.agree_group = broadcast_group, agree_group
        self.agree_every = int(agree_every)
        self.leader = self.rank == 0
        self.epoch = 0
        self.version = 0        # last version published (leader)
        self.applied = 0        # last version applied (same on every rank)
        self._store: dict[int, tuple[int, np.ndarray]] = {}
        self._lock = threading.Lock()
        self._thread = None
        self.closed = False
        if not self.leader and world_size > 1:
            self._thread = threading.Thread(target=self._receive_loop, name="tempo-table-sync", daemon=True)
            self._thread.start()

    # ------------------------------------------------------------------ transport
    def _bcast(self, header, table=None):
        import torch
        import torch.distributed as dist

        h = torch.as_tensor(header, dtype=torch.int64)
        dist.broadcast(h, src=0, group=self.broadcast_group)
        if int(h[0]) == 1:
            t = torch.from_numpy(np.ascontiguousarray(table, np.float32)) if table is not None else \
                torch.empty(self.shape, dtype=torch.float32)
            dist.broadcast(t, src=0, group=self.broadcast_group)
            return h.tolist(), t.numpy()
        return h.tolist(), None

    def _receive_loop(self) -> None:
        while True:
            try:
                (kind, epoch, version), table = self._bcast([0, 0, 0])
            except Exception as exc:  # the group went away: the server is shutting down
                log.warning("tempo table sync: receiver stopped (%s)", exc)
                return
            if kind == 0:
                return
            self._stage(version, epoch, table)

    def _stage(self, version: int, epoch: int, table: np.ndarray) -> None:
        with self._lock:
            if epoch >= self.epoch and version > self.applied:
                self._store[version] = (epoch, table)

    # ------------------------------------------------------------------ leader
    def publish(self, table: np.ndarray) -> None:
        """Rank 0's refresher: stage a new table and send it to every rank."""
        if not self.leader:
            raise RuntimeError("only rank 0 publishes tables")
        table = np.ascontiguousarray(table, np.float32)
        if table.shape != self.shape:
            raise ValueError(f"table shape {table.shape} != synchronised shape {self.shape}")
        self.version += 1
        epoch = self.epoch
        self._stage(self.version, epoch, table)
        if self.world_size > 1:
            self._bcast([1, epoch, self.version], table)

    # ------------------------------------------------------------------ every rank, forward path
    def agree(self, step: int):
        """At a forward step: the table to apply before it, or None (same answer on every rank)."""
        if step % self.agree_every:
            return None
        with self._lock:
            mine = [v for v, (e, _) in self._store.items() if e == self.epoch]
            offer = max(mine) if mine else self.applied
        if self.world_size > 1:
            import torch
            import torch.distributed as dist

            t = torch.tensor([offer], dtype=torch.int64)
            dist.all_reduce(t, op=dist.ReduceOp.MIN, group=self.agree_group)
            offer = int(t[0])
        if offer <= self.applied:
            return None
        with self._lock:
            _, table = self._store[offer]
            self.applied = offer
            self._store = {v: x for v, x in self._store.items() if v > offer}
        return table

    def new_epoch(self) -> None:
        """A rebalance (same forward step on every rank): tables of the old placement never apply."""
        with self._lock:
            self.epoch += 1
            self._store = {v: x for v, x in self._store.items() if x[0] >= self.epoch}

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.leader and self.world_size > 1:
            try:
                self._bcast([0, 0, 0])
            except Exception as exc:
                log.warning("tempo table sync: stop message not sent (%s)", exc)
        if self._thread is not None:
            self._thread.join(timeout=2)


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
    """Everything the server holds for TEMPO (see the module docstring).

    Parameters
    ----------
    physical_to_logical_map : int[L, P] (torch or numpy)
    n_gpus : int
        EP size.
    device : torch device of the tables and counters.
    settings : ServingSettings
        Default: ``ServingSettings()``.
    noop : bool
        ``tempo_noop``: the full data path, never a solve (the table stays uniform).
    n_logical : int, optional
        Logical experts E (default: largest id + 1).
    max_replicas : int, optional
        Table width R (default ``P - E + 1``).
    node : int
        This rank's source node (``hier`` tables).
    rank_invariant : bool
        Deterministic uniforms (a2a ``none``).
    aggregate : callable, optional
        ``window -> window`` summed over ranks (a2a backends; :class:`GlooAggregator`).
    sync : TableSync, optional
        Versioned tables applied at agreed forward steps (rank-invariant, EP > 1).  With it,
        only the leader (rank 0) runs a refresher.
    dp_size : int, optional
        Attention-DP size when the MoE input is the DP-gathered buffer (a2a ``none``): padding
        rows of every DP slot are masked (:class:`DpPadding`, :attr:`dp_padding`).
    """

    def __init__(self, physical_to_logical_map, n_gpus: int, device="cpu", settings: ServingSettings | None = None,
                 noop: bool = False, n_logical: int | None = None, max_replicas: int | None = None, node: int = 0,
                 rank_invariant: bool = False, aggregate=None, sync: TableSync | None = None, start: bool = True,
                 dp_size: int | None = None):
        import torch

        from .tables import DispatchTable

        self.settings = settings if settings is not None else ServingSettings()
        self.n_gpus, self.device, self.noop = int(n_gpus), device, bool(noop)
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
        self.n_nodes = self.settings.n_nodes(self.n_gpus)
        if not 0 <= int(node) < (self.n_nodes or 1):
            raise ValueError(f"node must lie in [0, {self.n_nodes or 1}), got {node}")
        self.node = int(node)
        phys = padded_replica_map(self.p2l, self.n_logical, self.width)
        prob = uniform_prob(phys)
        if self.n_nodes is not None:
            prob = np.broadcast_to(prob, (self.n_nodes,) + prob.shape).copy()
        self.host = DispatchTable(prob, phys)  # the refresher's host view (shapes, validation)
        # ---- allocated once; every later change is in place
        self.phys = torch.tensor(phys, device=device)
        self.prob = torch.tensor(prob, device=device)
        self.counts = torch.zeros((L, self.n_logical), dtype=torch.int64, device=device)
        self.steps = 0
        self.dp_padding = DpPadding(dp_size, device) if dp_size is not None and int(dp_size) > 1 else None
        self.device_lock = threading.RLock()
        self._stream = None
        self._host_counts = None
        if self.counts.is_cuda:
            self._stream = torch.cuda.Stream(device=self.counts.device)  # once, never per period
            self._host_counts = torch.empty(self.counts.shape, dtype=torch.int64, pin_memory=True)
        from .refresher import TorchPublisher

        self._publisher = TorchPublisher(self.prob, stream=self._stream)
        self.refresher = None
        if start:
            self.start()

    # ------------------------------------------------------------------ device access
    @contextlib.contextmanager
    def capture_guard(self):
        """Held while SGLang captures CUDA graphs: the refresher makes no CUDA call meanwhile."""
        with self.device_lock:
            yield

    def _snapshot(self):
        with self.device_lock:
            if self._stream is not None:  # the side stream: the copy never waits behind the decode graph
                import torch

                with torch.cuda.stream(self._stream):
                    self._host_counts.copy_(self.counts, non_blocking=True)
                self._stream.synchronize()
                return self._host_counts.numpy().copy()
            return self.counts.numpy().copy()

    def _publish(self, new: np.ndarray) -> None:
        if self.sync is not None:
            self.sync.publish(new)
            return
        with self.device_lock:
            self._publisher(new)

    def _apply(self, table: np.ndarray) -> None:
        """Forward path (scheduler thread): copy an agreed table into the live one, ordered on
        the current stream before this step's forward pass."""
        import torch

        self.prob.copy_(torch.from_numpy(np.ascontiguousarray(table)))

    # ------------------------------------------------------------------ forward path
    def on_forward(self, dp_tokens=None) -> None:
        """Called once per forward pass (every rank, the same passes): count the step, record
        this step's real tokens per DP rank (``dp_tokens``, with :attr:`dp_padding`; None:
        unknown, every row counts) and, with a :class:`TableSync`, apply the agreed table."""
        self.steps += 1
        if self.dp_padding is not None:
            self.dp_padding.set_real(dp_tokens)
        if self.sync is not None:
            table = self.sync.agree(self.steps)
            if table is not None:
                self._apply(table)

    def layer_table(self, layer_id: int):
        prob = self.prob[self.node] if self.prob.dim() == 4 else self.prob
        return prob[layer_id], self.phys[layer_id]

    def dispatch(self, layer_id: int, topk_ids, num_token_non_padded=None, dp_widths=None):
        """Logical ``topk_ids [T, K]`` -> physical ids, counting non-padding rows: rows at or
        beyond ``num_token_non_padded`` and, with :attr:`dp_padding` and the gather's slot
        widths ``dp_widths``, the padding rows of every DP slot."""
        prob, phys = self.layer_table(layer_id)
        row_valid = None
        if self.dp_padding is not None and dp_widths is not None:
            row_valid = self.dp_padding.row_mask(topk_ids.shape[0], dp_widths)
        u = uniforms(topk_ids.numel(), topk_ids.device, self.rank_invariant, layer_id)
        if topk_ids.is_cuda:
            from .triton_kernels import dispatch_and_count_triton as kernel
        else:
            from .kernels import dispatch_and_count_reference as kernel
        return kernel(topk_ids, prob, phys, self.counts[layer_id], u, num_token_non_padded, row_valid)

    # ------------------------------------------------------------------ refresher
    @property
    def solves(self) -> bool:
        """Whether this rank runs a refresher (with a TableSync only the leader does)."""
        return self.sync is None or self.sync.leader

    def start(self) -> None:
        from .refresher import Refresher

        if self.refresher is not None or not self.solves:
            return
        s = self.settings
        self.refresher = Refresher(
            self.host, self._snapshot, self.p2l, self.n_gpus, model=s.cost_model(),
            policy="noop" if self.noop else s.policy, topology=s.topology, gpus_per_node=s.gpus_per_node,
            interval_s=s.interval_s, deadline_s=s.deadline_s, aggregate=self.aggregate, publish=self._publish,
            batch_tokens=s.batch_tokens if s.pricing == "fixed" else None, workers=s.solver_workers,
            in_thread=s.in_thread, max_misses=s.max_misses,
            steps=(lambda: self.steps) if s.pricing == "step" else None)
        self.refresher.start()

    def stop_refresher(self) -> None:
        if self.refresher is not None:
            self.refresher.stop()
            self.refresher = None

    def close(self) -> None:
        self.stop_refresher()
        if self.sync is not None:
            self.sync.close()

    def update_layers(self, physical_to_logical_map, layer_ids=None) -> None:
        """EPLB moved the experts of ``layer_ids`` (all layers when None): rewrite their rows of
        ``phys`` and ``prob`` in place (uniform over the new replicas until the next table),
        restart the refresher on the new placement.  Called once per rebalance chunk; layers
        of later chunks keep their old rows until their own chunk."""
        import torch

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
        prob = uniform_prob(phys)
        self.stop_refresher()
        idx = torch.tensor(ids, dtype=torch.long, device=self.phys.device)
        with self.device_lock:
            self.phys.index_copy_(0, idx, torch.from_numpy(phys).to(self.phys.device))
            if self.prob.dim() == 4:
                src = torch.from_numpy(np.broadcast_to(prob, (self.prob.shape[0],) + prob.shape).copy())
                self.prob.index_copy_(1, idx, src.to(self.prob.device))
            else:
                self.prob.index_copy_(0, idx, torch.from_numpy(prob).to(self.prob.device))
        self.host.phys[ids] = phys
        if self.host.prob.ndim == 4:
            self.host.prob[:, ids] = prob
        else:
            self.host.prob[ids] = prob
        self.p2l[ids] = p2l[ids]
        if self.sync is not None:
            self.sync.new_epoch()
        self.start()

    def reset(self, physical_to_logical_map) -> None:
        """Every layer moved (compatibility name for :meth:`update_layers` with all layers)."""
        self.update_layers(physical_to_logical_map, None)
