"""Experiments: each is a function ``(config: dict) -> pandas.DataFrame`` (tidy, one row per
cell and policy), registered by name.  :func:`run` caches the result and writes it to
``build/results/<profile>/<experiment>.csv``, the one place chapters and the ledger read."""
from __future__ import annotations

import json
import time
from typing import Callable

import pandas as pd

from .. import paths
from ..cache import atomic_write_csv, atomic_write_text, cached, code_version

EXPERIMENTS: dict[str, Callable[[dict], pd.DataFrame]] = {}

#: The paper's "static" baseline: SGLang's static dispatch (each source rank uses its local
#: replica, otherwise a spread over the replicas; ``tempo.policies`` name ``static_sglang``).
#: Every result column, ratio and chart labelled "static" uses it.  The other map, every token
#: of an expert on its first replica (``tempo.policies`` name ``static``), is labelled
#: ``first_replica`` wherever a result shows it.
STATIC = "static_sglang"
FIRST_REPLICA = "static"


def experiment(name: str):
    def deco(fn):
        EXPERIMENTS[name] = fn
        return fn

    return deco


def run(name: str, config: dict, profile: str, refresh: bool = False, tag: str | None = None) -> pd.DataFrame:
    """Run (or load from cache) experiment ``name`` and write its tidy CSV,
    ``<name>.csv`` (or ``<name>-<tag>.csv`` when one notebook runs the same experiment twice)."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; known: {', '.join(sorted(EXPERIMENTS))}")
    if profile not in ("smoke", "full", "gpu"):
        raise ValueError(f"profile must be 'smoke', 'full' or 'gpu', got {profile!r}")
    df = cached(name, config, EXPERIMENTS[name], refresh=refresh)
    stem = f"{name}-{tag}" if tag else name
    atomic_write_csv(df, paths.results_dir(profile) / f"{stem}.csv")
    # provenance for the claims ledger: which experiment, config and code wrote this CSV, and when
    meta = {"experiment": name, "tag": tag, "config": config, "profile": profile, "code_version": code_version(),
            "written_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    atomic_write_text(paths.results_dir(profile) / f"{stem}.meta.json", json.dumps(meta, default=str, indent=1))
    return df


def load(name: str, profile: str, tag: str | None = None) -> pd.DataFrame:
    """The tidy CSV an earlier :func:`run` wrote."""
    path = paths.results_dir(profile) / (f"{name}-{tag}.csv" if tag else f"{name}.csv")
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: run the notebook that computes {name!r} first")
    return pd.read_csv(path)


from . import replay, simulator, solver, toy  # noqa: E402,F401
