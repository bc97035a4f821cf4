"""The experiments registry: :func:`experiment` registers ``fn(config) -> DataFrame`` under a
name in :data:`EXPERIMENTS`; :func:`tempo.studies.run` runs one by name.  The experiment
modules (simulator, replay, solver, toy) import this module, and the package imports them, so
nothing imports in a circle."""
from __future__ import annotations

from typing import Callable

import pandas as pd

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
    (:class:`tempo.core.readings.Reading`)."""
    def deco(fn):
        EXPERIMENTS[name] = fn
        READINGS[name] = tuple(readings)
        return fn

    return deco
