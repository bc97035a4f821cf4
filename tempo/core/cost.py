"""The measured cost of expert work on one GPU (paper Sections 2.2 and 4.3).

Per-GPU time, with ``G`` activated (expert, replica) pairs, ``N`` tokens and ``T`` 128-token
tiles on the GPU::

    t = max(a + b*G + b2*(T - G),  c + beta*N,  c2 + gamma*N)

* Eq. 1 (max-affine, two regimes): ``b2 = 0`` and no traffic piece.
* Eq. 2 (tile-aware): ``b2 > 0``; ``T = sum over activated pairs of ceil(x / tile)``.
* Eq. 4 (communication-aware): the third piece ``c2 + gamma*N`` (all-to-all traffic).

The layer time is the makespan, the largest per-GPU time (Section 2.1).  The formula is written
once, in :mod:`tempo.core.pricing`; the compiled solver prices with the same functions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .instance import EPS_TOKENS, Dispatch, Instance, check_shares
from .pricing import gpu_time


def _feature(value, name: str) -> np.ndarray:
    """``value`` as float64 for :meth:`CostModel.time`; ``ValueError`` naming ``name`` when it is
    missing, not numbers, or holds NaN."""
    if value is None:
        raise ValueError(f"CostModel.time: {name} is missing (None); give per-GPU {name} as numbers")
    try:
        out = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"CostModel.time: {name} must be numbers, got {value!r:.60}") from None
    if np.isnan(out).any():
        raise ValueError(f"CostModel.time: {name} holds NaN")
    return out


@dataclass(frozen=True)
class CostModel:
    """Max-affine per-GPU cost, times in microseconds.

    Parameters
    ----------
    a, b : float
        Flat (activation) piece: constant and cost per activated (expert, replica) pair, the
        "activation floor" -- streaming one more expert's weights from HBM.
    c, beta : float
        Linear (compute) piece: constant and cost per token.
    b2 : float
        Cost of each extra 128-token M-tile beyond an expert's first (Eq. 2); 0 disables it.
    tile : int
        Grouped-GEMM M-tile size (128 for DeepGEMM).
    c2, gamma : float, optional
        Traffic piece of Eq. 4; both or neither.
    name : str
        Label (for named parameter sets).
    """

    a: float
    b: float
    c: float
    beta: float
    b2: float = 0.0
    tile: int = 128
    c2: float | None = None
    gamma: float | None = None
    name: str = ""

    def __post_init__(self):
        for key in ("a", "b", "c", "beta", "b2"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise ValueError(f"{key} must be a number, got {v!r}")
            if not math.isfinite(float(v)) or float(v) < 0:
                raise ValueError(f"{key} must be finite and non-negative, got {v!r}")
            object.__setattr__(self, key, float(v))
        if (self.c2 is None) != (self.gamma is None):
            raise ValueError("c2 and gamma go together: give both (Eq. 4) or neither")
        for key in ("c2", "gamma"):
            v = getattr(self, key)
            if v is not None:
                if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
                    raise ValueError(f"{key} must be a number or None, got {v!r}")
                if not math.isfinite(float(v)) or float(v) < 0:
                    raise ValueError(f"{key} must be finite and non-negative, got {v!r}")
                object.__setattr__(self, key, float(v))
        if isinstance(self.tile, bool) or not isinstance(self.tile, (int, np.integer)) or self.tile < 1:
            raise ValueError(f"tile must be a positive integer, got {self.tile!r}")
        object.__setattr__(self, "tile", int(self.tile))
        if not isinstance(self.name, str):
            raise ValueError(f"name must be a string, got {self.name!r}")

    # ------------------------------------------------------------------ named sets
    @classmethod
    def named(cls, name: str, **overrides) -> "CostModel":
        """A parameter set of paper Tables 6 and 7, from ``data/params/cost_params.csv``.

        Parameters
        ----------
        name : str
            One of :func:`tempo.core.params.names` (e.g. ``"dsv3-offline"``).
        **overrides
            Replace fields (e.g. ``b2=0`` to price a Testbed B set tile-blind).

        Raises
        ------
        ValueError
            ``name`` is not a known parameter set.
        """
        import pandas as pd

        from .params import params_table

        table = params_table()
        if name not in table.index:
            raise ValueError(f"unknown parameter set {name!r}; known: {', '.join(table.index)}")
        row = table.loc[name]

        def val(key, default=None):
            v = row[key]
            return default if pd.isna(v) else float(v)

        kw = dict(a=val("a", 0.0), b=val("b", 0.0), c=val("c", 0.0), beta=val("beta", 0.0),
                  b2=val("b2", 0.0), c2=val("c2"), gamma=val("gamma"), name=name)
        kw.update(overrides)
        return CostModel(**kw)

    @property
    def has_traffic(self) -> bool:
        return self.c2 is not None

    @property
    def has_tiles(self) -> bool:
        return self.b2 > 0

    def without(self, *terms: str) -> "CostModel":
        """The model with terms deleted (Table 9): ``"floor"`` sets a = b = b2 = 0,
        ``"traffic"`` drops (c2, gamma), ``"tiles"`` sets b2 = 0."""
        kw = dict(a=self.a, b=self.b, c=self.c, beta=self.beta, b2=self.b2, tile=self.tile,
                  c2=self.c2, gamma=self.gamma, name=self.name)
        for t in terms:
            if t == "floor":
                kw.update(a=0.0, b=0.0, b2=0.0)
            elif t == "traffic":
                kw.update(c2=None, gamma=None)
            elif t == "tiles":
                kw.update(b2=0.0)
            else:
                raise ValueError(f"unknown term {t!r}: expected 'floor', 'traffic' or 'tiles'")
        return CostModel(**kw)

    # ------------------------------------------------------------------ regimes
    @property
    def n_star(self) -> float:
        """Inflection of one expert alone on a GPU: tokens where ``a + b = c + beta*n``
        (Fig. 2; ``b / beta`` when ``a = c = 0``, e.g. 14.78 / 0.0945 = 156 for DSv3)."""
        return self.n_star_at(1)

    def n_star_at(self, G: float) -> float:
        """Tokens per expert at which ``G`` equally loaded experts leave the flat regime."""
        if isinstance(G, bool) or not isinstance(G, (int, float, np.integer, np.floating)) \
                or not math.isfinite(G) or G <= 0:
            raise ValueError(f"G must be a positive finite number of activated experts, got {G!r}")
        if self.beta == 0:
            return math.inf
        return max(0.0, (self.a - self.c + self.b * G) / (self.beta * G))

    # ------------------------------------------------------------------ pricing
    def time(self, G, N, T=None):
        """Per-GPU time (Eq. 1/2/4, :func:`tempo.core.pricing.gpu_time`) for arrays of activated
        pairs ``G``, tokens ``N`` and tiles ``T`` (``T`` defaults to ``G``: one tile per activation).
        ``ValueError`` naming the argument when ``G`` or ``N`` is missing (None), or any of them is
        not numbers or holds NaN."""
        G = _feature(G, "G")
        N = _feature(N, "N")
        return gpu_time(self, G, N, G if T is None else _feature(T, "T"))

    def expert_time(self, n):
        """Time of one expert alone on a GPU with ``n`` tokens (the curve of Fig. 1a/2a)."""
        n = np.asarray(n, dtype=np.float64)
        return self.time(np.where(n > EPS_TOKENS, 1.0, 0.0), n, tiles_of(n, self.tile))

    def gpu_features(self, inst: Instance, d: Dispatch | np.ndarray):
        """Per-GPU activated pairs G, tokens N and tiles T, each float64[n_gpus]."""
        shares = d.shares if isinstance(d, Dispatch) else d  # checked in gpu_features
        return gpu_features(inst, shares, self.tile)

    def gpu_times(self, inst: Instance, d: Dispatch | np.ndarray) -> np.ndarray:
        """float64[n_gpus]: each GPU's modeled time under dispatch ``d``."""
        G, N, T = self.gpu_features(inst, d)
        return self.time(G, N, T)

    def makespan(self, inst: Instance, d: Dispatch | np.ndarray) -> float:
        """The layer's modeled time: the slowest GPU (Eq. 3's objective)."""
        return float(self.gpu_times(inst, d).max())

    def lower_bound(self, inst: Instance) -> float:
        """A lower bound on every dispatch's makespan (Section 3.1, Appendix A.4), valid for
        any replica sets and any ``b2 >= 0``; the single definition the solvers share
        (``tempo.policies.tempo_fast.bounds.lower_bound`` is it without the tile term).

        * activations: every live expert activates a replica, so some GPU has
          ``ceil(E_live / g)``: ``a + b*ceil(E_live/g)``;
        * tokens: some GPU carries at least ``z = max(N/g, max_e n_e / |GPUs of e|)`` (the
          average, and each expert spread over its distinct replica GPUs):
          ``c + beta*z`` and ``c2 + gamma*z``;
        * tiles (``b2 > 0``): expert e pays at least ``m*b + b2*(tiles_e - m)`` over its
          pieces, ``tiles_e = ceil(n_e/tile)``, with ``m = 1`` when ``b2 <= b`` and
          ``m = min(slots_e, tiles_e)`` when ``b2 > b`` (splitting into one-tile pieces is
          then cheaper); the GPU average of that flat work bounds the busiest GPU.
        """
        g = inst.n_gpus
        live = inst.live
        L = int(live.sum())
        if L == 0:  # every GPU idle: max(a, c, c2), the traffic constant included (Eq. 4)
            return float(gpu_time(self, 0.0, 0.0, 0.0))
        has = np.zeros((inst.n_experts, g), dtype=bool)
        e, r = np.nonzero(inst.valid)
        has[e, inst.replica_gpu[e, r]] = True
        n = inst.counts[live]
        z = max(inst.total_tokens / g, float((n / has[live].sum(axis=1)).max()))
        busiest = math.ceil(L / g)  # activations on the busiest GPU, one tile each
        lb = gpu_time(self, busiest, z, busiest)
        if self.b2 > 0:
            tiles = np.ceil(n / self.tile - 1e-9)
            m = np.ones_like(tiles) if self.b2 <= self.b else np.minimum(inst.n_replicas[live], tiles)
            flat = float((m * self.b + self.b2 * (tiles - m)).sum())
            lb = max(lb, self.a + flat / g)
        return float(lb)

    def __str__(self) -> str:
        parts = [f"a={self.a:g}", f"b={self.b:g}", f"c={self.c:g}", f"beta={self.beta:g}"]
        if self.b2:
            parts.append(f"b2={self.b2:g}")
        if self.c2 is not None:
            parts += [f"c2={self.c2:g}", f"gamma={self.gamma:g}"]
        return f"CostModel({', '.join(parts)}{', ' + repr(self.name) if self.name else ''})"


def gpu_features(inst: Instance, shares: np.ndarray, tile: int = 128):
    """Per-GPU (G, N, T) from shares, by ``np.bincount`` over the replica GPU ids."""
    shares = check_shares(inst, shares)  # finite, non-negative, nothing on unused slots
    act = (shares > EPS_TOKENS) & inst.valid
    gpu = inst.replica_gpu[act]
    x = shares[act]
    g = inst.n_gpus
    G = np.bincount(gpu, minlength=g).astype(np.float64)
    N = np.bincount(gpu, weights=x, minlength=g)
    T = np.bincount(gpu, weights=tiles_of(x, tile), minlength=g)
    return G, N, T


def tiles_of(x, tile: int = 128):
    """M-tiles a share of ``x`` tokens occupies: ``ceil(x / tile)``, at least 1 when ``x > 0``."""
    x = np.asarray(x, dtype=np.float64)
    return np.where(x > EPS_TOKENS, np.maximum(1.0, np.ceil(x / tile - 1e-9)), 0.0)
