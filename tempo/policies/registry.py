"""The policy registry and the one entry point (DESIGN.md, "A policy is a function ... registered
by name"): :func:`register` stores each policy's :class:`PolicySpec`; :func:`solve` checks an
instance, a model and options against it, runs the policy and validates its dispatch.  The
policy modules import :func:`register` from here; :mod:`tempo.policies` imports them, so every
built-in policy is registered once the package is imported."""
from __future__ import annotations

import functools
import math
import time
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from types import MappingProxyType
from typing import Callable, Mapping

from ..core.cost import CostModel
from ..core.instance import Dispatch, Instance

#: The families a policy belongs to (``PolicySpec.family``).
FAMILIES = {
    "proxy": "balances a proxy of time (tokens, activated experts, or a fixed map) instead of the "
             "modeled time; the baselines of Sections 2.3 and 5.14 and Tables 1 and 4",
    "tempo": "minimises the modeled makespan of Eq. 3 heuristically (Section 4.2)",
    "exact": "the proven optimum of Eq. 3 under a time limit (the MILP oracle); too slow to time per batch",
}


@dataclass(frozen=True)
class PolicySpec:
    """What callers need to know about one registered policy.

    Attributes
    ----------
    name : str, the name :func:`solve` takes.
    fn : callable ``fn(inst, model, **options) -> Dispatch``.
    needs_model : bool, it prices with the cost model (``solve(..., model=None)`` is refused).
    options : the frozen dataclass of its keyword options (checked in ``__post_init__``), or None.
    family : str, one of :data:`FAMILIES`.
    servable : bool, the serving runtime may run it (``TEMPO_POLICY``).
    color : str, its colour in the book's charts (``#rrggbb``).
    label : str, a short name with its source in the paper.
    full_replication : bool, it needs every expert on every GPU (not on an EPLB placement).
    order : float, place in :func:`select` listings (smaller first; ``inf`` when not given).
    variants : mapping of named option sets compared as dispatches of their own (:func:`variant`).
    """

    name: str
    fn: Callable = field(repr=False)
    needs_model: bool
    options: type | None
    family: str
    servable: bool
    color: str
    label: str
    full_replication: bool = False
    order: float = math.inf
    variants: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    seq: int = field(default=0, compare=False, repr=False)

    @property
    def option_names(self) -> tuple[str, ...]:
        """The options' names (the dataclass's fields)."""
        return tuple(f.name for f in fields(self.options)) if self.options is not None else ()


REGISTRY: dict[str, PolicySpec] = {}
_SEQ = [0]


def _keywords(fn) -> tuple[dict, bool]:
    """The keyword options ``fn`` takes after ``inst, model`` (name -> default, ``MISSING``
    when none) and whether it takes ``**kwargs``."""
    import inspect

    params = inspect.signature(fn).parameters
    kw = {k: (MISSING if p.default is p.empty else p.default) for k, p in params.items()
          if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    return dict(list(kw.items())[2:]), any(p.kind == p.VAR_KEYWORD for p in params.values())


def register(name: str, *, needs_model: bool, options: type | None, family: str, servable: bool, color: str,
             label: str | None = None, full_replication: bool = False, order: float | None = None,
             variants: Mapping[str, Mapping[str, object]] | None = None):
    """Decorator: register a policy function under ``name`` with its description.

    Parameters
    ----------
    name : str
        The policy's name (unique; no variant of another policy may use it).
    needs_model, options, family, servable, color, label, full_replication, order, variants
        See :class:`PolicySpec`.  ``options`` must be a frozen dataclass whose fields are the
        function's keyword options with the same defaults (a function taking ``**kwargs``,
        like tempo's field overrides, needs only accept them); ``label`` defaults to ``name``.

    Raises
    ------
    ValueError
        ``name`` or a variant name is taken, ``family`` is not one of :data:`FAMILIES`, or
        ``color`` is not ``#rrggbb``.
    TypeError
        An argument has the wrong type, or ``options`` does not match the function.

    Notes
    -----
    The serving solver runs in a spawned process, which sees only the policies registered
    when :mod:`tempo.policies` is imported: a ``servable`` policy must be imported at the
    bottom of this module to run there.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}")
    for arg, v in (("needs_model", needs_model), ("servable", servable), ("full_replication", full_replication)):
        if not isinstance(v, bool):
            raise TypeError(f"{arg} must be True or False, got {v!r}")
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
    if not (isinstance(color, str) and len(color) == 7 and color[0] == "#"
            and all(ch in "0123456789abcdefABCDEF" for ch in color[1:])):
        raise ValueError(f"color must be '#rrggbb', got {color!r}")
    if options is not None and not (isinstance(options, type) and is_dataclass(options)
                                    and options.__dataclass_params__.frozen):
        raise TypeError(f"options must be a frozen dataclass or None, got {options!r}")
    if order is not None and (isinstance(order, bool) or not isinstance(order, (int, float)) or math.isnan(order)):
        raise TypeError(f"order must be a number or None, got {order!r}")
    variants = {str(k): MappingProxyType(dict(v)) for k, v in (variants or {}).items()}

    def deco(fn):
        taken = _names_and_variants()
        for n in (name, *variants):
            if n in taken or (n in variants and n == name):
                raise ValueError(f"policy {n!r} is registered twice")
        takes, var_kw = _keywords(fn)
        if options is not None:
            own = {f.name: f.default for f in fields(options)}
            extra = [] if var_kw else sorted(set(own) ^ set(takes))  # **kwargs takes every field
            stale = [k for k in own if k in takes and takes[k] is not MISSING and own[k] is not MISSING
                     and takes[k] != own[k]]
            if extra or stale:
                raise TypeError(f"policy {name!r}: options {options.__name__} do not match {fn.__name__}'s keyword "
                                f"options (names {extra}, defaults {stale})")
        elif takes and not var_kw:
            raise TypeError(f"policy {name!r} takes options {list(takes)}: describe them with options=<dataclass>")
        _SEQ[0] += 1
        REGISTRY[name] = PolicySpec(name, fn, needs_model, options, family, servable, color, label or name,
                                    full_replication, math.inf if order is None else float(order),
                                    MappingProxyType(variants), _SEQ[0])
        fn.policy_name = name
        return fn

    return deco


def unregister(name: str) -> None:
    """Remove a registered policy (for tests that register a toy one)."""
    spec(name)
    del REGISTRY[name]


def _names_and_variants() -> set:
    return set(REGISTRY) | {v for s in REGISTRY.values() for v in s.variants}


def spec(name: str) -> PolicySpec:
    """The :class:`PolicySpec` of a registered policy (``ValueError`` naming the policy if none)."""
    if not isinstance(name, str) or name not in REGISTRY:
        raise ValueError(f"unknown policy {name!r}; available: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]


def get(name: str) -> Callable:
    """The function of a registered policy."""
    return spec(name).fn


def select(family: str | None = None, servable: bool | None = None, needs_model: bool | None = None,
           full_replication: bool | None = None, variants: bool = False) -> list[str]:
    """Names of the registered policies with the given properties (None: any), in listing order.

    Parameters
    ----------
    family : str, optional
        One of :data:`FAMILIES`.
    servable, needs_model, full_replication : bool, optional
        See :class:`PolicySpec`.
    variants : bool
        Also list each policy's named variants, right after it.

    Returns
    -------
    list of str
        Ordered by ``order``, then registration (see the module docstring); a fresh list.
    """
    if family is not None and family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
    want = {"family": family, "servable": servable, "needs_model": needs_model, "full_replication": full_replication}
    out = []
    for s in sorted(REGISTRY.values(), key=lambda s: (s.order, s.seq)):
        if all(v is None or getattr(s, k) == v for k, v in want.items()):
            out.append(s.name)
            if variants:
                out.extend(s.variants)
    return out


def variant(name: str) -> tuple[str, dict]:
    """``(policy, options)`` for a policy name or a named variant: ``variant("token_lp_vertex")``
    is ``("token_lp", {"vertex": True})``, ``variant("tempo")`` is ``("tempo", {})``."""
    if isinstance(name, str):
        if name in REGISTRY:
            return name, {}
        for s in REGISTRY.values():
            if name in s.variants:
                return s.name, dict(s.variants[name])
    raise ValueError(f"unknown policy or variant {name!r}; available: {', '.join(sorted(_names_and_variants()))}")


def check_names(names, what: str = "policies") -> tuple[str, ...]:
    """``names`` as a tuple, after checking each is a registered policy or variant.

    For a study's explicit comparison set (the paper's ordered list of the policies a table
    or figure compares, whose order can decide ties): the list stays the study's, and a name
    the registry does not know raises ``ValueError`` naming ``what``."""
    names = tuple(names)
    known = _names_and_variants()
    bad = [n for n in names if n not in known]
    if bad:
        raise ValueError(f"{what}: unknown policies {bad}; registered: {', '.join(sorted(known))}")
    return names


def available() -> list[str]:
    """Every registered name, sorted."""
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
        Needed by the policies whose spec says ``needs_model`` (``tempo``, ``milp``);
        proxies ignore it.
    policy : str
        One of :func:`available_policies`.
    **options
        Passed to the policy (e.g. ``time_limit`` for ``milp``, ``vertex`` for ``token_lp``),
        after the policy's options dataclass (``PolicySpec.options``) has checked them.

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
    s = spec(policy)
    if model is None and s.needs_model:
        raise ValueError(f"policy {policy!r} needs a cost model (model=None given)")
    if options:
        _check_options(s, options)
    t0 = time.perf_counter()
    d = s.fn(inst, model, **options)
    d.meta.setdefault("solve_s", time.perf_counter() - t0)
    d.meta["policy"] = policy
    return d.validate(inst)


@functools.lru_cache(maxsize=None)
def _option_names(fn) -> tuple[tuple[str, ...], bool]:
    takes, var_kw = _keywords(fn)
    return tuple(takes), var_kw


def _check_options(s: PolicySpec, options: dict) -> None:
    """``TypeError`` naming the option for one the policy does not take; the options that are
    fields of the policy's options dataclass are checked by building it (``TypeError`` /
    ``ValueError`` naming the option).  A policy taking ``**kwargs`` (tempo's field
    overrides) refuses an unknown name itself."""
    takes, var_kw = _option_names(s.fn)
    for key in options:
        if key not in takes and not var_kw:
            raise TypeError(f"policy {s.name!r} has no option {key!r}; its options: {', '.join(takes) or 'none'}")
    if s.options is not None:
        mine = {k: v for k, v in options.items() if k in s.option_names}
        if mine:
            s.options(**mine)
