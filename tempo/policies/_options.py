"""Checks the policies' option dataclasses run in ``__post_init__``.

Each policy's keyword options are a frozen dataclass next to the policy
(:class:`~tempo.policies.tempo_fast.TempoOptions`, :class:`~tempo.policies.proxies.LlepOptions`,
:class:`~tempo.policies.proxies.TokenLpOptions`, :class:`~tempo.policies.milp.MilpOptions`);
its ``__post_init__`` calls these helpers, so a bad value raises ``TypeError`` (wrong type) or
``ValueError`` (out of range, NaN, inf) with a message that names the policy and the option,
e.g. ``tempo option tau must be finite and in [0, 1), got nan``.  Numpy scalars count as
the Python type they hold; ``True``/``False`` are not numbers.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

_NUMBER = (int, float, np.integer, np.floating)


def _is_number(v) -> bool:
    return isinstance(v, _NUMBER) and not isinstance(v, (bool, np.bool_))


def number(owner: str, name: str, v, ok: Callable[[float], bool], need: str) -> None:
    """A finite real number with ``ok(v)`` true; ``need`` says the range in words (``"> 0"``)."""
    if not _is_number(v):
        raise TypeError(f"{owner} option {name} must be a number, got {v!r}")
    if not math.isfinite(v) or not ok(v):
        raise ValueError(f"{owner} option {name} must be finite and {need}, got {v!r}")


def integer(owner: str, name: str, v, ok: Callable[[int], bool], need: str, optional: bool = False) -> None:
    """An integer with ``ok(v)`` true (``None`` too when ``optional``)."""
    if optional and v is None:
        return
    if not _is_number(v) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{owner} option {name} must be {'None or ' if optional else ''}an integer, got {v!r}")
    if not ok(v):
        raise ValueError(f"{owner} option {name} must be {'None or ' if optional else ''}{need}, got {v!r}")


def flag(owner: str, name: str, v) -> None:
    """``True`` or ``False`` (a numpy bool too)."""
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{owner} option {name} must be True or False, got {v!r}")


def choice(owner: str, name: str, v, choices: tuple) -> None:
    """One of ``choices``."""
    if not isinstance(v, str) or v not in choices:
        raise ValueError(f"{owner} option {name} must be one of {', '.join(choices)}, got {v!r}")
