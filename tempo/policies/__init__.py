"""Dispatch policies, registered by name.

A policy is a function ``(Instance, CostModel, **options) -> Dispatch``.  Use
:func:`tempo.solve` to call one by name; :func:`available` lists the names.
"""
from __future__ import annotations

from typing import Callable

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


from . import proxies, exact, tempo_fast, milp  # noqa: E402,F401  (registration side effects)
