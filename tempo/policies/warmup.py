"""Compile ahead: call every registered policy, every named variant and the batched path once, so
numba compiles (and caches on disk) all the machine code a solve needs before a user's first call.

What to compile is found by calling, not listed: every policy of the registry, each of its named
variants, on a full-replication and a restricted-layout instance, under a plain cost model and
under every named parameter set (the tile and traffic terms change the compiled types), plus
:func:`~tempo.policies.batch.solve_batch` over a small model.  Run by ``python -m tempo warmup``
(and by ``make`` after installing).
"""
from __future__ import annotations

import time

import numpy as np

from ..core.cost import CostModel
from ..core.instance import Instance
from ..core.jit import compile_counter
from ..core.params import params_table
from .batch import solve_batch
from .registry import select, solve, spec

__all__ = ["warmup", "warm_calls"]


def _instances() -> list[Instance]:
    """A full-replication instance, a larger one with skew (long augmenting paths and chains)
    and a restricted layout (two replicas of the hot experts)."""
    rng = np.random.default_rng(0)
    skewed = np.sort(rng.zipf(1.6, 64).clip(1, 4000))[::-1].copy()
    phy2log = np.concatenate([np.arange(16), np.arange(16)[:8], np.arange(16)[:8]])
    return [Instance.full_replication([600, 30, 30, 30, 30, 30, 30], n_gpus=2),
            Instance.full_replication(skewed, n_gpus=8),
            Instance.from_placement(rng.integers(0, 400, 16), phy2log, n_gpus=4)]


def _models() -> list[CostModel]:
    return [CostModel(a=0, b=15, c=0, beta=0.1)] + [CostModel.named(n) for n in params_table().index]


def warm_calls():
    """``(label, call)`` pairs: each call runs one solve; together they reach every compiled
    function that :func:`~tempo.policies.registry.solve` and ``solve_batch`` use."""
    calls = []
    insts, models = _instances(), _models()
    for name in select():
        s = spec(name)
        # the compiled solver's family under every model and instance; the others (numpy, HiGHS,
        # or the same compiled code underneath) on the small instances under two models
        mine = s.family == "tempo"
        for variant in [None, *s.variants]:
            opts = {} if variant is None else dict(s.variants[variant])
            for i, inst in enumerate(insts):
                if (s.full_replication and not inst.is_full_replication()) or (not mine and i == 1):
                    continue
                for model in (models if mine else models[:2]) if s.needs_model else [None]:
                    label = f"{name}{'/' + variant if variant else ''} instance {i}"
                    calls.append((label, lambda inst=inst, model=model, name=name, opts=opts:
                                  solve(inst, model, name, **opts)))
    batch = insts[2]
    counts = np.stack([batch.counts, batch.counts[::-1]])
    layout = np.stack([batch.replica_gpu, batch.replica_gpu])
    for variant, opts in [(None, {}), *spec("tempo").variants.items()]:
        for model in models:
            calls.append((f"solve_batch{'/' + variant if variant else ''}",
                          lambda model=model, opts=opts: solve_batch(counts, layout, batch.n_gpus, model, **opts)))
    return calls


def warmup(log=None) -> dict:
    """Run :func:`warm_calls`; returns ``{"calls", "compiles", "compile_s", "wall_s"}`` (compiles:
    numba compiles of tempo functions, nested ones counted; 0 when the cache was already warm).
    ``log(str)`` is called with a line per policy when given."""
    t0 = time.perf_counter()
    calls = warm_calls()
    with compile_counter() as c:
        last = None
        for label, call in calls:
            policy = label.split()[0]
            if log and policy != last:
                log(f"  {policy}")
                last = policy
            call()
    return {"calls": len(calls), "compiles": c.compiles, "compile_s": round(c.seconds, 1),
            "wall_s": round(time.perf_counter() - t0, 1)}
