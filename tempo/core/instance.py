"""The dispatch problem's data: one layer of one batch (:class:`Instance`) and its answer
(:class:`Dispatch`).  Paper Section 3.1: counts ``n_e`` from the router, replica sets ``R(e)``
from the placement layer, token shares ``x_{e,g}`` supported on ``R(e)``.

The replica layout follows SGLang's ``logical_to_all_physical_map``: ``replica_gpu[e, r]`` is
the GPU of replica column ``r`` of expert ``e`` (its ``r``-th copy) and ``-1`` marks an unused
column.  A column is not a GPU and not a physical slot of the placement (``phy2log``, see
:meth:`Instance.from_placement`): ``shares[e, r]`` of a :class:`Dispatch` is the tokens copy ``r``
receives, on GPU ``replica_gpu[e, r]``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: Shares below this many tokens count as "not sent" (no activation charged).
EPS_TOKENS = 1e-9


_INT64_MAX = 2**63 - 1
#: the most tokens an instance may hold: float64 (shares, loads, every solver's arithmetic) is
#: exact on integers up to 2^53; past it the solvers would return invalid shares
MAX_TOTAL_TOKENS = 2**53


def _as_int_array(value, name: str, ndim: int) -> np.ndarray:
    """``value`` as an int64 array of ``ndim`` dimensions, or a ``TypeError``/``ValueError``
    naming ``name``: no None/strings/complex/bools, no fractions, NaN or inf, nothing past int64."""
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be an array of integers, got {type(value).__name__}")
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as exc:  # ragged nested lists
        raise ValueError(f"{name} must be a rectangular {ndim}-d array of integers ({exc})") from None
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-d array, got shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(arr.shape, np.int64)
    if arr.dtype == object:  # Python ints past int64, or mixed junk
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in arr.flat):
            bad = next(v for v in arr.flat if not isinstance(v, (int, np.integer)) or isinstance(v, bool))
            raise TypeError(f"{name} must hold integers, got an entry {bad!r} ({type(bad).__name__})")
        if any(abs(int(v)) > _INT64_MAX for v in arr.flat):
            raise ValueError(f"{name} holds values past the int64 range")
        return arr.astype(np.int64)
    kind = arr.dtype.kind
    if kind == "b":
        raise TypeError(f"{name} must hold integers, got booleans")
    if kind not in "iuf":
        raise TypeError(f"{name} must hold integers, got dtype {arr.dtype}")
    if kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must hold integers, got {arr.dtype} with fractional or non-finite values")
        if np.abs(arr).max() >= 2.0**63:
            raise ValueError(f"{name} holds values past the int64 range")
    if kind == "u" and arr.max() > _INT64_MAX:
        raise ValueError(f"{name} holds values past the int64 range")
    return arr.astype(np.int64, copy=True)


def _check_n_gpus(n_gpus) -> int:
    if isinstance(n_gpus, bool) or not isinstance(n_gpus, (int, np.integer)):
        raise TypeError(f"n_gpus must be a positive integer, got {n_gpus!r} ({type(n_gpus).__name__})")
    if n_gpus < 1:
        raise ValueError(f"n_gpus must be a positive integer, got {n_gpus!r}")
    return int(n_gpus)


def _as_float_array(value, name: str) -> np.ndarray:
    """A real numeric array as float64 (no strings, None, objects or complex numbers)."""
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array ({exc})") from None
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    return arr.astype(np.float64, copy=arr is value)


def check_shares(inst: "Instance", shares, atol: float = 1e-6) -> np.ndarray:
    """float64[E, R] shares that can be priced on ``inst``: the right shape, finite,
    non-negative and zero on unused slots (up to ``atol`` of float noise); ``ValueError``
    otherwise.  A price computed from NaN or negative shares would be meaningless."""
    if not isinstance(inst, Instance):
        raise TypeError(f"inst must be a tempo.Instance, got {type(inst).__name__}")
    s = _as_float_array(shares, "shares")
    if s.shape != inst.replica_gpu.shape:
        raise ValueError(f"shares has shape {s.shape}, instance replica_gpu has {inst.replica_gpu.shape}")
    if not s.size:
        return s
    # min and max carry any NaN or infinity, so two reductions check finiteness and sign
    lo, hi = s.min(), s.max()
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError("shares contain NaN or infinite values")
    if lo < -atol:
        raise ValueError(f"shares must be non-negative (min {lo:g})")
    if max(hi, -lo) > atol and np.abs(np.where(inst.valid, 0.0, s)).max() > atol:
        raise ValueError("shares are non-zero on unused replica slots")
    return s


class Instance:
    """One MoE layer of one batch: token counts per logical expert and where its replicas live.

    Parameters
    ----------
    counts : int64[E]
        Tokens routed to each logical expert (``n_e``), non-negative.
    replica_gpu : int64[E, R]
        GPU id of every replica column of every expert, ``-1`` for an unused column.  Every expert
        with tokens needs at least one replica.
    n_gpus : int
        EP group size; GPU ids lie in ``[0, n_gpus)``.
    gpus_per_node : int, optional
        GPUs per node, for the topology-aware source split (Section 4.3).
    """

    __slots__ = ("counts", "replica_gpu", "n_gpus", "gpus_per_node", "valid", "n_replicas", "_full")

    def __init__(self, counts, replica_gpu, n_gpus: int, gpus_per_node: int | None = None):
        counts = _as_int_array(counts, "counts", 1)
        replica_gpu = _as_int_array(replica_gpu, "replica_gpu", 2)
        n_gpus = _check_n_gpus(n_gpus)
        if np.any(counts < 0):
            raise ValueError(f"counts must be non-negative; expert(s) {np.flatnonzero(counts < 0)[:5].tolist()} are negative")
        if counts.size and counts.max() > _INT64_MAX // counts.size and sum(int(c) for c in counts) > _INT64_MAX:
            raise ValueError("counts sum past the int64 range (total_tokens would overflow)")
        if counts.size and int(counts.sum()) > MAX_TOTAL_TOKENS:
            raise ValueError(f"counts sum to {int(counts.sum())}, above 2^53 = {MAX_TOTAL_TOKENS}: shares and loads are "
                             "float64, exact only up to 2^53 tokens, and every solver is exact below it")
        if replica_gpu.shape[0] != counts.shape[0]:
            raise ValueError(
                f"replica_gpu has {replica_gpu.shape[0]} rows but counts has {counts.shape[0]} experts")
        if replica_gpu.shape[1] < 1:
            raise ValueError("replica_gpu needs at least one replica slot column")
        bad = (replica_gpu < -1) | (replica_gpu >= n_gpus)
        if np.any(bad):
            e, r = np.argwhere(bad)[0]
            raise ValueError(
                f"replica_gpu[{e}, {r}] = {replica_gpu[e, r]} is outside [0, n_gpus={n_gpus}) (use -1 for an unused slot)")
        valid = replica_gpu >= 0
        n_rep = valid.sum(axis=1)
        orphan = (counts > 0) & (n_rep == 0)
        if np.any(orphan):
            raise ValueError(
                f"replica_gpu: expert(s) {np.flatnonzero(orphan)[:5].tolist()} have tokens but no replica")
        if gpus_per_node is not None:
            if (isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, (int, np.integer))
                    or gpus_per_node < 1 or n_gpus % gpus_per_node):
                raise ValueError(f"gpus_per_node must be a positive divisor of n_gpus={n_gpus}, got {gpus_per_node!r}")
            gpus_per_node = int(gpus_per_node)
        self.counts = counts
        self.replica_gpu = replica_gpu
        self.n_gpus = n_gpus
        self.gpus_per_node = gpus_per_node
        self.valid = valid
        self.n_replicas = n_rep
        self._full = None

    # ------------------------------------------------------------------ constructors
    @classmethod
    def full_replication(cls, counts, n_gpus: int, gpus_per_node: int | None = None) -> "Instance":
        """Every expert has one replica on every GPU (column ``r`` on GPU ``r``)."""
        counts = _as_int_array(counts, "counts", 1)
        n_gpus = _check_n_gpus(n_gpus)
        rep = np.broadcast_to(np.arange(n_gpus, dtype=np.int64), (counts.shape[0], n_gpus))
        return cls(counts, rep, n_gpus, gpus_per_node)

    @classmethod
    def from_placement(cls, counts, phy2log, n_gpus: int, gpus_per_node: int | None = None) -> "Instance":
        """Build replica sets from a physical-slot map.

        Parameters
        ----------
        counts : int64[E]
        phy2log : int64[P]
            Logical expert held by each physical slot; slots are laid out GPU-major,
            ``P / n_gpus`` per GPU (EPLB's ``phy2log`` for one layer).
        n_gpus : int
        """
        counts = _as_int_array(counts, "counts", 1)
        phy2log = _as_int_array(phy2log, "phy2log", 1)
        n_gpus = _check_n_gpus(n_gpus)
        if phy2log.size == 0 or phy2log.size % n_gpus:
            raise ValueError(f"phy2log has {phy2log.size} slots, not a positive multiple of n_gpus={n_gpus}")
        n_exp = counts.shape[0]
        if phy2log.size and (phy2log.min() < 0 or phy2log.max() >= n_exp):
            raise ValueError(f"phy2log entries must lie in [0, {n_exp})")
        slot_gpu = np.arange(phy2log.size) // (phy2log.size // n_gpus)
        order = np.argsort(phy2log, kind="stable")
        logcnt = np.bincount(phy2log, minlength=n_exp)
        width = max(1, int(logcnt.max(initial=0)))
        rank = np.arange(phy2log.size) - np.repeat(np.cumsum(logcnt) - logcnt, logcnt)
        rep = np.full((n_exp, width), -1, dtype=np.int64)
        rep[phy2log[order], rank] = slot_gpu[order]
        return cls(counts, rep, n_gpus, gpus_per_node)

    # ------------------------------------------------------------------ properties
    @property
    def n_experts(self) -> int:
        return int(self.counts.shape[0])

    @property
    def n_slots(self) -> int:
        return int(self.replica_gpu.shape[1])

    @property
    def total_tokens(self) -> int:
        return int(self.counts.sum())

    @property
    def live(self) -> np.ndarray:
        """bool[E]: experts with at least one token."""
        return self.counts > 0

    def is_full_replication(self) -> bool:
        """True when every live expert has a replica on every GPU."""
        if self._full is None:
            has = np.zeros((self.n_experts, self.n_gpus), dtype=bool)
            e, r = np.nonzero(self.valid)
            has[e, self.replica_gpu[e, r]] = True
            self._full = bool(np.all(has[self.live]))
        return self._full

    def __repr__(self) -> str:
        return (f"Instance(E={self.n_experts}, slots={self.n_slots}, n_gpus={self.n_gpus}, "
                f"tokens={self.total_tokens}, live={int(self.live.sum())})")


@dataclass
class Dispatch:
    """Token shares of every expert over its replica slots (paper Section 3.1, ``x_{e,g}``).

    Parameters
    ----------
    shares : float64[E, R]
        Tokens of expert ``e`` sent to replica slot ``r``.  Valid for an instance when
        non-negative, zero on unused slots, and each row sums to ``counts[e]``.
    meta : dict
        Solver information (policy name, solve time, MILP bound and gap, ...).
    """

    shares: np.ndarray
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self.shares = _as_float_array(self.shares, "shares")
        if self.shares.ndim != 2:
            raise ValueError(f"shares must be a 2-d array [E, R], got shape {self.shares.shape}")

    def validate(self, inst: Instance, rtol: float = 1e-9, atol: float = 1e-6) -> "Dispatch":
        """Raise ``ValueError`` unless the shares are a valid dispatch of ``inst``: finite,
        non-negative and zero on unused slots up to ``atol`` of solver noise, each row summing
        to its count.  The noise is then cleared, so a validated dispatch holds no negative
        share and nothing on an unused slot, exactly."""
        for key, v in (("rtol", rtol), ("atol", atol)):
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                    or not np.isfinite(v) or v < 0:
                raise ValueError(f"{key} must be a finite non-negative number, got {v!r}")
        s = check_shares(inst, self.shares, atol)
        rows = s.sum(axis=1)
        # np.isclose's test, |rows - counts| <= atol + rtol * |counts|, without its overhead
        err = np.abs(rows - inst.counts) - rtol * np.abs(inst.counts)
        if not err.max(initial=-np.inf) <= atol:
            bad = ~(err <= atol)
            e = int(np.flatnonzero(bad)[0])
            raise ValueError(f"shares of expert {e} sum to {rows[e]:g}, expected counts[{e}] = {inst.counts[e]}")
        if s.min(initial=0.0) < 0 or np.any(s[~inst.valid]):
            self.shares = np.where((s < 0) | ~inst.valid, 0.0, s)
        return self

    def probabilities(self, inst: Instance) -> np.ndarray:
        """float64[E, R] routing table a serving kernel samples from.

        Each row sums to 1; an idle expert gets the uniform distribution over its replicas
        (so a token the router sends there later still lands on a replica that holds it).
        """
        s = np.where(inst.valid, np.clip(self.shares, 0.0, None), 0.0)
        rows = s.sum(axis=1, keepdims=True)
        uniform = inst.valid / np.maximum(inst.n_replicas, 1)[:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            prob = np.where(rows > 0, s / np.where(rows > 0, rows, 1.0), uniform)
        return prob
