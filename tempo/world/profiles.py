"""Named routing profiles: per-layer expert popularity recorded from trained MoE models, for
synthetic routing that looks like a real model's rather than a Zipf law's.

A profile is, per MoE layer, the recorded token-expert pairs per expert (``counts``) and the
router weights whose long-run pair shares under the distinct top-K router are exactly those
shares (``weights``, :func:`tempo.world.workloads.router_weights`).  A profile name is taken
wherever a Zipf skew is (:func:`tempo.world.workloads.popularity`,
:func:`tempo.world.workloads.sample_profile`, :func:`tempo.world.workloads.synthetic_trace`), and
the batches then carry the recorded skew: a hot expert saturates the way it did in the recording.
:mod:`tempo.world.skew` places a profile beside the Zipf workloads (its Zipf-equivalent skew).

The profiles (made by ``python -m tempo make-traces`` from the shipped traces, stored in
``data/traces/profiles.npz``):

* ``dsv3-sglang-decode``, ``dsv3-sglang-prefill``: DeepSeek-V3 served by SGLang (58 MoE layers x
  256 experts, top-8), the stat-mode recorder's whole-run pairs of the decode (four workloads)
  or prefill (eight workloads) benchmark runs, summed per layer.
* ``esft-dsv2lite``: ESFT-vanilla-lite, a DeepSeek-V2-Lite-architecture model (26 MoE layers x
  64 experts, top-6), its recorded routing of four tasks' prompts pooled per layer.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np


PROFILES_FILE = "profiles.npz"


@dataclass(frozen=True)
class ProfileSpec:
    """A named profile: the shipped trace whose steps it sums, and what it is."""

    trace: str
    about: str


PROFILES = {
    "dsv3-sglang-decode": ProfileSpec(
        "dsv3-sglang-decode.npz", "DeepSeek-V3 on SGLang, decode: the stat recorder's pairs of four decode benchmark "
                                  "runs summed per layer (58 MoE layers x 256 experts, top-8)"),
    "dsv3-sglang-prefill": ProfileSpec(
        "dsv3-sglang-prefill.npz", "DeepSeek-V3 on SGLang, prefill: the stat recorder's pairs of eight prefill "
                                   "benchmark runs summed per layer (58 MoE layers x 256 experts, top-8)"),
    "esft-dsv2lite": ProfileSpec(
        "esft-dsv2lite-t1024.npz", "ESFT-vanilla-lite (DeepSeek-V2-Lite architecture): recorded routing of four tasks' "
                                   "prompts pooled per layer (26 MoE layers x 64 experts, top-6)"),
}


@dataclass(frozen=True)
class Profile:
    """A loaded profile: ``counts`` int64[L, E] recorded pairs, ``weights`` float64[L, E] router
    weights (rows sum to 1), ``layers`` (the model's layer numbers), ``top_k``, ``model``."""

    name: str
    counts: np.ndarray
    weights: np.ndarray
    layers: tuple
    top_k: int
    model: str
    about: str

    @property
    def n_layers(self) -> int:
        return self.counts.shape[0]

    @property
    def n_experts(self) -> int:
        return self.counts.shape[1]

    def shares(self) -> np.ndarray:
        """float64[L, E]: each layer's recorded pair shares."""
        c = self.counts.astype(np.float64)
        return c / c.sum(axis=1, keepdims=True)


def write_profiles(path, made: dict) -> None:
    """Store built profiles (:func:`build_profile`) in one ``.npz`` (byte-identical for the same
    profiles): ``<name>.counts``, ``<name>.weights`` and a JSON ``metadata``."""
    from .traces import write_npz

    meta = {n: {k: v for k, v in m.items() if k not in ("counts", "weights")} for n, m in made.items()}
    arrays = {"metadata": np.array(json.dumps(meta))}
    for n, m in made.items():
        arrays[f"{n}.counts"] = np.asarray(m["counts"], np.int64)
        arrays[f"{n}.weights"] = np.asarray(m["weights"], np.float64)
    write_npz(Path(path), arrays)


@lru_cache(maxsize=8)
def _load(path: str) -> dict:
    from ..core.io import BadInput, loads_json, read_npz
    from .traces import MAX_TRACE_BYTES, MAX_TRACE_INFLATED

    p = Path(path)
    try:
        z = read_npz(p, str(p), MAX_TRACE_BYTES, MAX_TRACE_INFLATED)
    except FileNotFoundError:
        raise FileNotFoundError(f"{p} does not exist: the routing profiles are made by python -m tempo make-traces") \
            from None
    if "metadata" not in z or z["metadata"].ndim != 0 or z["metadata"].dtype.kind != "U":
        raise BadInput(f"{p}: a profiles file holds its metadata as one JSON string")
    meta = loads_json(str(z["metadata"][()]), f"{p}: metadata")
    out = {}
    try:
        for name, m in meta.items():
            counts, weights = z[f"{name}.counts"], z[f"{name}.weights"]
            counts.setflags(write=False)
            weights.setflags(write=False)
            out[name] = Profile(name, counts, weights, tuple(m["layers"]), int(m["top_k"]), m["model"], m["about"])
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise BadInput(f"{p} is not a routing profiles file ({type(exc).__name__}: {exc})") from None
    return out


def profile(name: str, path=None) -> Profile:
    """The named profile (:data:`PROFILES`), from ``data/traces/profiles.npz`` (or ``path``)."""
    from ..core import paths

    if name not in PROFILES:
        raise ValueError(f"unknown routing profile {name!r}; the profiles are {', '.join(PROFILES)}")
    got = _load(str(Path(path) if path is not None else paths.TRACES / PROFILES_FILE))
    if name not in got:
        raise ValueError(f"routing profile {name!r} is not in the profiles file (rerun python -m tempo make-traces)")
    return got[name]


def is_profile(skew) -> bool:
    """Is ``skew`` a profile name (rather than a Zipf skew)?"""
    return isinstance(skew, str) and skew in PROFILES


def skew_or_profile(text: str):
    """argparse type: a non-negative Zipf skew (float) or a profile name (str)."""
    import argparse
    import math

    if text in PROFILES:
        return text
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a Zipf skew (a number >= 0) or a routing profile "
                                         f"({', '.join(PROFILES)}), got {text!r}") from None
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"must be a finite Zipf skew >= 0, got {text!r}")
    return v
