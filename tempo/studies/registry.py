"""The experiments registry: :func:`experiment` registers ``fn(config) -> DataFrame`` under a
name in :data:`EXPERIMENTS`; :func:`tempo.studies.run` runs one by name.  The experiment
modules (simulator, replay, solver, toy) import this module, and the package imports them, so
nothing imports in a circle."""
from __future__ import annotations

from typing import Callable

import pandas as pd

from ..paper.readings import Reading
from .cache import cached

EXPERIMENTS: dict[str, Callable[[dict], pd.DataFrame]] = {}
#: The readings (ids of ``data/paper/readings.yaml``) each experiment's numbers depend on:
#: :func:`tempo.studies.run` writes exactly these choices into the config (``"reading"``), so
#: they are part of the cache key and a reading the study does not use never reruns it.
READINGS: dict[str, tuple[str, ...]] = {}

#: The paper's "static" baseline: SGLang's static dispatch (each source rank uses its local
#: replica, otherwise a spread over the replicas; ``tempo.policies`` name ``static_sglang``).
#: Every result column, ratio and chart labelled "static" uses it.  The other map, every token
#: of an expert on its first replica (``tempo.policies`` name ``static``), is labelled
#: ``first_replica`` wherever a result shows it.
STATIC = "static_sglang"
FIRST_REPLICA = "static"


def experiment(name: str, readings: tuple[str, ...] = ()):
    """Decorator: register an experiment function ``(config: dict) -> pandas.DataFrame`` under
    ``name``; ``readings`` names the readings it takes from ``config["reading"]``
    (:class:`tempo.paper.readings.Reading`)."""
    def deco(fn):
        EXPERIMENTS[name] = fn
        READINGS[name] = tuple(readings)
        return fn

    return deco


def with_reading(name: str, config: dict, reading: Reading | None = None) -> dict:
    """``config`` with ``"reading"`` set to the choices experiment ``name`` depends on
    (:data:`READINGS`), taken from ``reading`` (default: the paper's,
    :meth:`tempo.paper.readings.Reading.paper`) with any choices ``config["reading"]`` already
    names on top.  An experiment that depends on no reading gets no ``"reading"`` key (a
    reading never changes its cache key)."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; known: {', '.join(sorted(EXPERIMENTS))}")
    if reading is not None and not isinstance(reading, Reading):
        raise TypeError(f"reading must be a tempo.paper.readings.Reading, got {type(reading).__name__}")
    ids = READINGS.get(name, ())
    own = config.get("reading")
    base = reading if reading is not None else Reading.paper()
    if isinstance(own, Reading):
        base = own
    elif own is not None:
        if not isinstance(own, dict):
            raise TypeError(f"config['reading'] must be a dict of reading id -> choice, got {own!r}")
        base = base.with_(**own)
    out = {k: v for k, v in config.items() if k != "reading"}
    if ids:
        out["reading"] = base.select(ids)
    return out


def result_of(name: str, config: dict) -> pd.DataFrame:
    """Experiment ``name`` on ``config`` under the choices ``config["reading"]`` names for the
    readings ``name`` depends on: the cached result when a run computed it, else computed now.
    How a study derived from another one reads it.  The fallbacks of a cached result are
    counted again (:func:`tempo.policies._fallback.add_count`), so the derived result's
    ``.meta.json`` carries them."""
    from ..policies._fallback import add_count, fallback_count

    before = fallback_count()
    df = cached(name, with_reading(name, config), EXPERIMENTS[name])
    if fallback_count() == before:  # served from the cache
        add_count(int(df.attrs.get("fallbacks", 0)))
    return df
