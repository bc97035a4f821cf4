"""Dispatch policies, registered by name.

A policy is a function ``(Instance, CostModel, **options) -> Dispatch``.  Use
:func:`tempo.solve` to call one by name; :func:`available` lists the names.
"""
from __future__ import annotations

import functools
import time
from typing import Callable

from ..core.cost import CostModel
from ..core.instance import Dispatch, Instance

REGISTRY: dict[str, Callable] = {}


def register(name: str):
    """Decorator: register a policy function under ``name``."""

    def deco(fn):
        if name in REGISTRY:
            raise ValueError(f"policy {name!r} is registered twice")
        REGISTRY[name] = fn
        fn.policy_name = name
        return fn

    return deco


def get(name: str) -> Callable:
    if name not in REGISTRY:
        raise ValueError(f"unknown policy {name!r}; available: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]


def available() -> list[str]:
    return sorted(REGISTRY)


def available_policies() -> list[str]:
    """Names accepted by :func:`solve`."""
    return available()


def solve(inst: Instance, model: CostModel | None = None, policy: str = "tempo", **options) -> Dispatch:
    """Dispatch one layer's tokens over expert replicas with the named policy.

    Parameters
    ----------
    inst : Instance
    model : CostModel
        Needed by the model-aware policies (``tempo``, ``milp``); proxies ignore it.
    policy : str
        One of :func:`available_policies`.
    **options
        Passed to the policy (e.g. ``time_limit`` for ``milp``, ``vertex`` for ``token_lp``).

    Returns
    -------
    Dispatch
        Validated against ``inst``; ``meta["policy"]`` and ``meta["solve_s"]`` are set.
    """
    if not isinstance(inst, Instance):
        raise TypeError(f"inst must be a tempo.Instance, got {type(inst).__name__}")
    if model is not None and not isinstance(model, CostModel):
        raise TypeError(f"model must be a tempo.CostModel, got {type(model).__name__}")
    if not isinstance(policy, str):
        raise TypeError(f"policy must be a policy name (str), got {type(policy).__name__}")
    fn = get(policy)
    if model is None and policy in ("tempo", "milp"):
        raise ValueError(f"policy {policy!r} needs a cost model (model=None given)")
    if options:
        _check_options(policy, fn, options)
    t0 = time.perf_counter()
    d = fn(inst, model, **options)
    d.meta.setdefault("solve_s", time.perf_counter() - t0)
    d.meta["policy"] = policy
    return d.validate(inst)


#: Option -> (kind, check, requirement) for the policies' keyword options; an option a
#: policy does not take is refused by name before anything runs.
_OPTION_RULES = {
    "alpha": ("number", lambda v: v > 0, "> 0"),
    "trigger": ("number", lambda v: v >= 0, ">= 0"),
    "min_chunk": ("int", lambda v: v >= 1, ">= 1"),
    "time_limit": ("number", lambda v: v > 0, "> 0"),
    "mip_rel_gap": ("number", lambda v: v >= 0, ">= 0"),
    "threads": ("int", lambda v: v >= 1, ">= 1"),
    "tau": ("number", lambda v: 0 <= v < 1, "in [0, 1)"),
    "max_iter": ("int", lambda v: v >= 0, ">= 0"),
    "fanout": ("int", lambda v: v >= 0, ">= 0 (0: no limit)"),
    "chain_depth": ("int?", lambda v: v >= 2, "None or >= 2"),
    "seed": ("choice", ("greedy", "whole", "static"), ""),
    "lp_variants": ("variants", ("vertex", "even"), ""),
}
for _flag in ("chains", "local_search", "partial", "ensemble", "vertex", "restarts"):
    _OPTION_RULES[_flag] = ("bool", None, "")
_OPTION_RULES["backend"] = ("choice", ("compiled", "numpy"), "")
_OPTION_RULES["warm_start"] = ("warm", None, "")  # False/True, or a Dispatch to start from


@functools.lru_cache(maxsize=None)
def _option_names(fn) -> tuple[list[str], bool]:
    """The keyword options a policy function takes (after ``inst, model``), and whether it
    takes ``**kwargs``."""
    import inspect

    params = inspect.signature(fn).parameters
    takes = [k for k, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)][2:]
    return takes, any(p.kind == p.VAR_KEYWORD for p in params.values())


def _check_options(policy: str, fn, options: dict) -> None:
    """``TypeError``/``ValueError`` naming the option for an unknown option, a wrong type or a
    value out of range (NaN, inf, negative ...)."""
    import math

    import numpy as np

    takes, var_kw = _option_names(fn)
    for key, v in options.items():
        if key not in takes and not var_kw:
            raise TypeError(f"policy {policy!r} has no option {key!r}; its options: {', '.join(takes) or 'none'}")
        kind, check, need = _OPTION_RULES.get(key, (None, None, ""))
        is_num = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
        if kind is None:
            if is_num and not math.isfinite(v):
                raise ValueError(f"option {key} must be finite, got {v!r}")
        elif kind == "bool":
            if not isinstance(v, (bool, np.bool_)):
                raise TypeError(f"option {key} must be True or False, got {v!r}")
        elif kind in ("number", "int", "int?"):
            if kind == "int?" and v is None:
                continue
            if not is_num or (kind != "number" and not isinstance(v, (int, np.integer))):
                raise TypeError(f"option {key} must be {'a number' if kind == 'number' else 'an integer'}, got {v!r}")
            if not math.isfinite(v) or not check(v):
                raise ValueError(f"option {key} must be finite and {need}, got {v!r}")
        elif kind == "warm":
            if not isinstance(v, (bool, np.bool_, Dispatch)):
                raise TypeError(f"option {key} must be True, False or a Dispatch, got {type(v).__name__}")
        elif kind == "choice":
            if v not in check:
                raise ValueError(f"option {key} must be one of {', '.join(check)}, got {v!r}")
        elif kind == "variants":
            if v == "auto":
                continue
            if isinstance(v, str) or not hasattr(v, "__iter__"):
                raise TypeError(f"option {key} must be 'auto' or a tuple of {check}, got {v!r}")
            v = tuple(v)
            bad = [x for x in v if x not in check]
            if bad or not v:
                raise ValueError(f"option {key} must be 'auto' or a non-empty tuple of {check}, got {v!r}")


from . import proxies, exact, tempo_fast, milp  # noqa: E402,F401  (registration side effects)
