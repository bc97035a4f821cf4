"""The exact fixed-charge makespan MILP of Eq. 3 (the oracle), solved by HiGHS.

Imports flow one way: ``proxies`` and ``exact`` (token LP, semi-matching) know nothing of
tempo; ``tempo_fast`` uses them as ensemble candidates; the MILP uses tempo_fast only for an
optional warm start.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from ..core.cost import CostModel
from ..core.instance import Dispatch, Instance
from . import _options as check
from .registry import register
from ._fallback import mark_fallback
from .exact import RowBlocks, new_highs
from .tempo_fast import tempo_fast


@dataclass(frozen=True)
class MilpOptions:
    """:func:`milp`'s options (each checked here, for :func:`tempo.solve` and direct calls).

    time_limit : float or None
        the whole call's time limit in seconds, > 0 (model building, the reference dispatch
        and HiGHS's run together); None: no wall-clock limit (then ``node_limit``
        bounds the work, and the answer does not depend on the machine's speed or load).
    warm_start : bool or Dispatch
        False: cold; True: seeded with tempo_fast's dispatch; a Dispatch: seeded with it.
    mip_rel_gap : float
        HiGHS's relative MIP gap, >= 0.
    threads : int
        HiGHS threads, >= 1.
    node_limit : int or None
        HiGHS's branch-and-bound node limit (``mip_max_nodes``), >= 1; a deterministic limit
        (single-threaded, the same answer on every machine).  None: no node limit.
    """

    time_limit: float = 10.0
    warm_start: object = False
    mip_rel_gap: float = 1e-6
    threads: int = 1
    node_limit: int | None = None

    def __post_init__(self):
        if self.time_limit is not None:
            check.number("milp", "time_limit", self.time_limit, lambda v: v > 0, "> 0")
        check.integer("milp", "node_limit", self.node_limit, lambda v: v >= 1, ">= 1", optional=True)
        if self.time_limit is None and self.node_limit is None:
            raise ValueError("milp needs a limit: time_limit (seconds) or node_limit (nodes)")
        if not isinstance(self.warm_start, (bool, np.bool_, Dispatch)):
            raise TypeError(f"milp option warm_start must be True, False or a Dispatch, got "
                            f"{type(self.warm_start).__name__}")
        check.number("milp", "mip_rel_gap", self.mip_rel_gap, lambda v: v >= 0, ">= 0")
        check.integer("milp", "threads", self.threads, lambda v: v >= 1, ">= 1")


#: HiGHS can stop up to about half a second after its own time limit (0.2-0.47 s measured at 2 s on
#: a tile = 1 instance: it checks its clock between stretches of the tree search, and interrupt
#: callbacks stop it no sooner), so it is given the time left less this share of the limit, at
#: most HIGHS_RESERVE_MAX_S seconds
HIGHS_RESERVE_SHARE = 0.1
HIGHS_RESERVE_MAX_S = 0.5


def _highs_seconds(time_limit: float, t0: float, floor: float) -> float:
    """HiGHS's time limit: what is left of ``time_limit`` since ``t0`` (perf_counter) less the
    reserve for HiGHS's overrun, at least ``floor``."""
    reserve = min(HIGHS_RESERVE_SHARE * float(time_limit), HIGHS_RESERVE_MAX_S)
    return max(floor, float(time_limit) - (time.perf_counter() - t0) - reserve)


@register("milp", needs_model=True, options=MilpOptions, family="exact", servable=False, color="#bab0ac",
          label="MILP: the exact optimum of Eq. 3 (HiGHS)", order=100)
def milp(inst: Instance, model: CostModel, time_limit: float = 10.0, warm_start=False,
         mip_rel_gap: float = 1e-6, threads: int = 1, node_limit: int | None = None) -> Dispatch:
    """The exact fixed-charge makespan MILP of Eq. 3, solved by HiGHS.

    ``warm_start``: False (cold), True (seed with tempo_fast's dispatch) or a :class:`Dispatch`;
    with a start the result is never worse than it.  ``time_limit=None, node_limit=N``
    (single-threaded) limits work, not seconds: the same answer on any machine.

    Returns the best of the incumbent and the warm start (else tempo's dispatch) under the model,
    with ``meta``: ``objective``, ``highs_objective``, ``lower_bound``, ``gap``,
    ``bound_checked``, ``optimal`` (bound checked and re-priced gap within 10x ``mip_rel_gap``,
    at least 1e-5), and ``fallback`` when no feasible point came within ``time_limit``.  Raises
    ``ValueError`` when an instance's tile counts are past what HiGHS resolves (:func:`milp_scales`).
    """
    # Variables per live (expert, slot): share x >= 0, binary activation z with x <= n_e z; with
    # b2 > 0 an integer tile count k, x <= tile*k, k >= z (Eq. 2); the makespan M.  Per GPU:
    # a + b*sum z + b2*sum(k - z) <= M, c + beta*sum x <= M and, with traffic, c2 + gamma*sum x <= M
    # (Eq. 4).  Activations are read from z (a share on z = 0 is solver tolerance, dropped).
    # HiGHS's dual bound is kept only when finite and not above the returned or tempo's makespan
    # (bound_checked); else the model's lower bound (Appendix A.4); none: -inf, gap inf.
    # A HiGHS "Solve error" is retried once without presolve.
    t0 = time.perf_counter()
    import highspy

    MilpOptions(time_limit, warm_start, mip_rel_gap, threads, node_limit)  # checks them, naming the option
    e_idx, r_idx = np.nonzero(inst.valid & inst.live[:, None])
    if e_idx.size == 0:
        d = Dispatch(np.zeros(inst.replica_gpu.shape))
        ms = model.makespan(inst, d)
        d.meta.update(policy="milp", objective=ms, lower_bound=ms, gap=0.0, optimal=True, status="trivial")
        return d
    P = e_idx.size
    n = inst.counts.astype(np.float64)
    # Units: tokens are divided by S (1 unless an expert has over 1e6 tokens) and time by St
    # (the model's lower bound is 100 units), so that a share, an activation's price and the
    # makespan all stay far above HiGHS's tolerances, whatever the counts.
    S, St = milp_scales(inst, model)  # ValueError: tile counts HiGHS cannot resolve
    ns = n / S
    gpu = inst.replica_gpu[e_idx, r_idx]
    g = inst.n_gpus
    tiles = model.has_tiles
    # column blocks: x [P], z [P], k [P] (tiles only), M [1]
    nx = P
    ox, oz, ok = 0, P, 2 * P
    oM = 3 * P if tiles else 2 * P
    ncol = oM + 1
    rows = RowBlocks()
    add_rows = rows.add
    inf = highspy.kHighsInf

    live = np.flatnonzero(inst.live)
    row_of = np.full(inst.n_experts, -1)
    row_of[live] = np.arange(live.size)
    # conservation: sum_r x = n_e ; at least one activation per live expert
    add_rows(row_of[e_idx], ox + np.arange(P), np.ones(P), ns[live], ns[live])
    add_rows(row_of[e_idx], oz + np.arange(P), np.ones(P), np.ones(live.size), np.full(live.size, inf))
    # x - n z <= 0
    ar = np.arange(P)
    add_rows(np.r_[ar, ar], np.r_[ox + ar, oz + ar], np.r_[np.ones(P), -ns[e_idx]], np.full(P, -inf), np.zeros(P))
    if tiles:
        add_rows(np.r_[ar, ar], np.r_[ox + ar, ok + ar], np.r_[np.ones(P), -float(model.tile) / S * np.ones(P)],
                 np.full(P, -inf), np.zeros(P))
        add_rows(np.r_[ar, ar], np.r_[oz + ar, ok + ar], np.r_[np.ones(P), -np.ones(P)], np.full(P, -inf), np.zeros(P))
    # per-GPU pieces
    gg = np.arange(g)
    if tiles:
        add_rows(np.r_[gpu, gpu, gg], np.r_[oz + ar, ok + ar, np.full(g, oM)],
                 np.r_[np.full(P, (model.b - model.b2) / St), np.full(P, model.b2 / St), -np.ones(g)],
                 np.full(g, -inf), np.full(g, -model.a / St))
    else:
        add_rows(np.r_[gpu, gg], np.r_[oz + ar, np.full(g, oM)], np.r_[np.full(P, model.b / St), -np.ones(g)],
                 np.full(g, -inf), np.full(g, -model.a / St))
    add_rows(np.r_[gpu, gg], np.r_[ox + ar, np.full(g, oM)], np.r_[np.full(P, model.beta * S / St), -np.ones(g)],
             np.full(g, -inf), np.full(g, -model.c / St))
    if model.has_traffic:
        add_rows(np.r_[gpu, gg], np.r_[ox + ar, np.full(g, oM)], np.r_[np.full(P, model.gamma * S / St), -np.ones(g)],
                 np.full(g, -inf), np.full(g, -model.c2 / St))
    col_lo = np.zeros(ncol)
    col_hi = np.full(ncol, inf)
    col_hi[ox:ox + P] = ns[e_idx]
    col_hi[oz:oz + P] = 1.0
    if tiles:
        col_hi[ok:ok + P] = np.ceil(n[e_idx] / model.tile)
    col_lo[oM] = max(model.a, model.c) / St
    cost = np.zeros(ncol)
    cost[oM] = 1.0
    integrality = [highspy.HighsVarType.kContinuous] * ncol
    for j in range(oz, oz + P):
        integrality[j] = highspy.HighsVarType.kInteger
    if tiles:
        for j in range(ok, ok + P):
            integrality[j] = highspy.HighsVarType.kInteger

    lp = rows.lp(cost, col_lo, col_hi, integrality)
    h = new_highs()
    if node_limit is not None:
        h.setOptionValue("mip_max_nodes", int(node_limit))
    h.setOptionValue("mip_rel_gap", float(mip_rel_gap))
    if int(threads) != 1:
        highspy.Highs.resetThreadScheduler()
        h.setOptionValue("threads", int(threads))
    h.setOptionValue("random_seed", 0)
    h.passModel(lp)

    warm = None
    if warm_start is True:
        warm = tempo_fast(inst, model)
    elif isinstance(warm_start, Dispatch):
        warm = warm_start
    elif warm_start not in (False, None):
        raise ValueError(f"warm_start must be a bool or a Dispatch, got {type(warm_start).__name__}")
    if warm is not None:
        xs = np.asarray(warm.shares, dtype=np.float64)[e_idx, r_idx]
        col = np.zeros(ncol)
        col[ox:ox + P] = xs / S
        col[oz:oz + P] = (xs > 1e-9).astype(np.float64)
        if tiles:
            col[ok:ok + P] = np.ceil(xs / model.tile - 1e-9)
        col[oM] = model.makespan(inst, warm) / St
        sol = highspy.HighsSolution()
        sol.col_value = col
        sol.value_valid = True
        h.setSolution(sol)
    # a feasible dispatch of another method, to check HiGHS's bound against after the run;
    # computed before it so that its time (a first call loads the solver) counts against the limit
    ref = warm if warm is not None else tempo_fast(inst, model)
    # the limit counts from the call: what building the model and the start took is spent
    if time_limit is not None:
        h.setOptionValue("time_limit", _highs_seconds(time_limit, t0, 1e-9))
    h.run()
    status = h.modelStatusToString(h.getModelStatus())
    retried = False
    if h.getModelStatus() in (highspy.HighsModelStatus.kSolveError, highspy.HighsModelStatus.kUnknown):
        # HiGHS "Solve error" (seen on tiny instances): retry once without presolve
        retried = True
        h.clearSolver()
        h.setOptionValue("presolve", "off")
        if time_limit is not None:
            h.setOptionValue("time_limit", _highs_seconds(time_limit, t0, 1e-3))
        h.run()
        status = h.modelStatusToString(h.getModelStatus())
    info = h.getInfo()
    has_sol = info.primal_solution_status == highspy.kSolutionStatusFeasible
    if not has_sol:
        # no incumbent within the time limit (or a HiGHS failure): the start, else tempo's
        # dispatch, a valid dispatch that says it is a fallback (tempo.policies.fallback_of)
        d = Dispatch(np.asarray(ref.shares, dtype=np.float64).copy())
        obj = model.makespan(inst, d)
        d.meta = {"policy": "milp", "objective": obj, "highs_objective": float("nan"), "lower_bound": float("-inf"),
                  "gap": float("inf"), "optimal": False, "status": status, "retried": retried,
                  "warm_start": warm is not None, "solve_s": time.perf_counter() - t0}
        within = f"{time_limit:g} s" if time_limit is not None else f"{node_limit} nodes"
        return mark_fallback(d, f"MILP found no feasible solution within {within} (HiGHS status "
                                f"{status!r}); {'the warm start' if warm is not None else 'tempo'}'s dispatch returned")
    col = np.asarray(h.getSolution().col_value)
    active = col[oz:oz + P] > 0.5  # activations are the binaries, not shares above a tolerance
    x = np.where(active, np.clip(col[ox:ox + nx], 0.0, None), 0.0) * S
    shares = np.zeros(inst.replica_gpu.shape)
    shares[e_idx, r_idx] = x
    rows_sum = shares.sum(axis=1)
    scale = np.divide(n, rows_sum, out=np.zeros_like(n), where=rows_sum > 0)
    shares *= scale[:, None]
    d = Dispatch(shares)
    obj = model.makespan(inst, d)
    lb = float(info.mip_dual_bound) * St
    # HiGHS's bound and status are checked against the re-priced incumbent and against a
    # feasible dispatch of another method (tempo's): a bound above a feasible makespan is wrong,
    # and then so is HiGHS's "Optimal"
    ref_obj = model.makespan(inst, ref)
    if ref_obj < obj:  # the MILP point is beaten: return the better dispatch, not optimal
        d, obj = Dispatch(np.asarray(ref.shares, dtype=np.float64).copy()), ref_obj
    tol = max(mip_rel_gap, 1e-6) * 10
    bound_ok = math.isfinite(lb) and lb <= min(obj, ref_obj) * (1 + 1e-9) + 1e-12
    if bound_ok:
        lb = min(lb, obj)
        gap = (obj - lb) / obj if obj > 0 else 0.0
    elif math.isfinite(lb):
        # HiGHS's bound is above a feasible makespan (its tolerances): the model's own lower
        # bound (Appendix A.4) is valid
        lb = min(model.lower_bound(inst), obj)
        gap = (obj - lb) / obj if obj > 0 else 0.0
    else:
        lb, gap = float("-inf"), float("inf")
    optimal = bool(bound_ok and gap <= tol)
    d.meta.update(policy="milp", objective=obj, highs_objective=float(info.objective_function_value) * St,
                  lower_bound=lb, gap=gap, optimal=optimal, status=status, retried=retried,
                  bound_checked=bound_ok, warm_start=warm is not None, solve_s=time.perf_counter() - t0)
    return d


#: the most M-tiles an expert may need under the tile model: the integer tile counts k stay
#: exactly representable and far from the integrality tolerance's relative reach
_MAX_TILES = 1e6


def milp_scales(inst: Instance, model: CostModel) -> tuple[float, float]:
    """``(S, St)``: the MILP's token unit (``max(1, max n_e / 1e6)`` tokens) and time unit (the
    model's lower bound over 100), so every token count is at most 1e6 units and the makespan
    about 100 units whatever the counts: each term of the objective keeps its weight relative to
    the makespan (a price that is negligible there is negligible for the optimum too).  Raises
    ``ValueError`` when an expert needs more than 1e6 tiles under the tile model: the integer tile
    counts are then past what HiGHS resolves, and its answer would not be certified."""
    n_max = float(inst.counts.max(initial=0))
    S = max(1.0, n_max / 1e6)
    lb = float(model.lower_bound(inst))
    St = lb / 100.0 if lb > 0 else 1.0
    if model.has_tiles and n_max / float(model.tile) > _MAX_TILES:
        raise ValueError(f"milp: an expert of {n_max:.6g} tokens needs {n_max / float(model.tile):.3g} tiles of "
                         f"{model.tile:g} (more than {_MAX_TILES:.0e}): the integer tile counts are past what HiGHS "
                         "resolves; no MILP optimum can be certified for this instance")
    return S, St
