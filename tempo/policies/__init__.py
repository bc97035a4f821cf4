"""Dispatch policies, each described once in a registry.

A policy is a function ``(Instance, CostModel, **options) -> Dispatch`` registered with
:func:`register`, which stores what every caller needs to know about it as a frozen
:class:`PolicySpec`: whether it needs a cost model, its keyword options (a frozen dataclass
that validates itself), its family, whether the serving runtime may run it, its colour in
the book's charts, a label, its place in listings, and named option variants.  Callers
enumerate the registry instead of keeping their own lists:

* :func:`tempo.solve` (:func:`solve`) refuses a model-free call to a policy that
  ``needs_model`` and checks options against the policy's options dataclass;
* :func:`select` lists the names with given properties (``servable=True``: what the serving
  settings accept; ``family="proxy"``: what ``make bench`` compares tempo against; every
  colour of :func:`tempo.book.figures.policy_colors`), in the documented order;
* :func:`solve_batch` solves every layer of a model in one call with the same checks as
  :func:`solve` (the serving solver's door; tempo runs batched, compiled);
* :func:`check_names` checks a study's own ordered comparison set (the paper's Table 1 or
  Fig. 6 policies, say) against the registry, so a typo or a removed policy fails at import.

Adding a policy is one file (the function, its options dataclass and its ``@register``; a new
module also goes into the import at the bottom of this package's ``__init__``) plus its tests; the CLI's
``policies`` list, ``make bench``'s table and proxy list, the serving settings
(``servable=True``) and the figure colours pick it up.  A study that compares a fixed set of
policies keeps its own list (the paper's design) and only adds the new one on purpose.

Order: :func:`select` returns names by the spec's ``order`` (smaller first), then by
registration; a policy registered without ``order`` comes after every ordered one.  The
built-in order is the one the benchmark's proxy list always had: static, static_sglang,
uniform, metro, llep, semi_matching, token_lp, round_robin, tempo, milp.  :func:`available`
(and :func:`available_policies`) stay sorted by name.
"""
from .registry import (FAMILIES, REGISTRY, PolicySpec, available, available_policies, check_names, get, register,
                       select, solve, spec, unregister, variant)

from ._fallback import fallback_of, mark_fallback  # noqa: E402,F401  (a dispatch from a fallback says so)
from . import exact, milp, proxies, tempo_fast  # noqa: E402,F401  (registration side effects)
from .batch import solve_batch  # noqa: E402  (every layer of a model through the same checks)
