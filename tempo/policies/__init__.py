"""Dispatch policies, each described once in a registry.

A policy is a function ``(Instance, CostModel, **options) -> Dispatch`` registered with
:func:`register`, which stores a frozen :class:`PolicySpec` (needs a model, options dataclass,
family, servable, colour, label, order, variants).  Callers enumerate the registry instead of
keeping their own lists: :func:`solve` (``tempo.solve``) checks model and options;
:func:`select` lists names with given properties in ``order`` (then registration; unordered
last); :func:`solve_batch` solves every layer of a model in one call (the serving solver's
door); :func:`check_names` checks a study's own comparison set at import.  :func:`available`
stays sorted by name.

Adding a policy: one module (the function, its options dataclass, ``@register``), imported at
the bottom of this ``__init__``, plus its tests.
"""
from .registry import (FAMILIES, REGISTRY, PolicySpec, available, available_policies, check_names, get, register,
                       select, solve, spec, unregister, variant)

from ._fallback import fallback_of, mark_fallback  # noqa: E402,F401  (a dispatch from a fallback says so)
from . import exact, milp, proxies, tempo_fast  # noqa: E402,F401  (registration side effects)
from .batch import solve_batch  # noqa: E402  (every layer of a model through the same checks)
