"""Synthetic routing (paper Section 3.2): Zipf popularity, Dirichlet batch-to-batch
fluctuation, multinomial token-expert counts."""
from __future__ import annotations

import numpy as np


def zipf_popularity(n_experts: int, skew: float, seed: int | np.random.Generator = 0,
                    shuffle: bool = True) -> np.ndarray:
    """float64[E]: expert popularity ``p_e`` proportional to ``rank^-skew`` (skew 0 = uniform);
    ranks are shuffled over expert ids unless ``shuffle=False``."""
    if n_experts < 1:
        raise ValueError(f"n_experts must be positive, got {n_experts}")
    if skew < 0:
        raise ValueError(f"skew must be non-negative, got {skew}")
    rng = np.random.default_rng(seed)
    p = np.arange(1, n_experts + 1, dtype=np.float64) ** (-float(skew))
    p /= p.sum()
    return rng.permutation(p) if shuffle else p


def sample_counts(popularity, tokens_per_gpu: int, top_k: int, n_gpus: int, n_batches: int = 1,
                  kappa: float | None = 2000.0, seed: int | np.random.Generator = 0) -> np.ndarray:
    """int64[n_batches, E]: per-expert token counts of decode batches.

    Each batch routes ``T = tokens_per_gpu * top_k * n_gpus`` token-expert pairs (the paper's
    ``T = B K n_gpus``).  The batch's popularity is ``Dirichlet(kappa * p)`` (kappa = 2000:
    batch-to-batch fluctuation; ``None`` uses p itself) and counts are multinomial in it.
    We draw pairs independently (a token may pick one expert twice), as the paper's
    ``E_eff`` formula does.
    """
    p = np.asarray(popularity, dtype=np.float64)
    if p.ndim != 1 or np.any(p < 0) or not np.isclose(p.sum(), 1.0):
        raise ValueError("popularity must be a 1-d probability vector")
    for name, v in (("tokens_per_gpu", tokens_per_gpu), ("top_k", top_k), ("n_gpus", n_gpus), ("n_batches", n_batches)):
        if int(v) < 1:
            raise ValueError(f"{name} must be a positive integer, got {v}")
    rng = np.random.default_rng(seed)
    T = int(tokens_per_gpu) * int(top_k) * int(n_gpus)
    if kappa is None:
        probs = np.broadcast_to(p, (n_batches, p.size))
    else:
        if kappa <= 0:
            raise ValueError(f"kappa must be positive, got {kappa}")
        alpha = np.maximum(kappa * p, 1e-12)
        probs = rng.dirichlet(alpha, size=n_batches)
    return np.stack([rng.multinomial(T, pr / pr.sum()) for pr in probs]).astype(np.int64)


# ---------------------------------------------------------------------------- routing traces
TRACE_VERSION = 1


def write_trace(path, counts, **metadata) -> None:
    """Save a routing trace: ``counts`` int[steps, layers, experts] plus JSON-able metadata
    (model, top_k, n_gpus, source, ...), as a compressed ``.npz``, written atomically."""
    import io
    import json

    from .cache import atomic_write_bytes

    counts = np.asarray(counts)
    if counts.ndim != 3:
        raise ValueError(f"counts must be [steps, layers, experts], got shape {counts.shape}")
    if np.any(counts < 0):
        raise ValueError("counts must be non-negative")
    meta = {"version": TRACE_VERSION, **metadata}
    buf = io.BytesIO()
    np.savez_compressed(buf, counts=counts.astype(np.int64), metadata=np.array(json.dumps(meta, default=str)))
    atomic_write_bytes(path, buf.getvalue())


def read_trace(path):
    """Load a routing trace written by :func:`write_trace`: (counts int64[steps, layers,
    experts], metadata dict)."""
    import json

    with np.load(path, allow_pickle=False) as z:
        if "counts" not in z or "metadata" not in z:
            raise ValueError(f"{path} is not a tempo routing trace (needs 'counts' and 'metadata')")
        counts = z["counts"].astype(np.int64)
        meta = json.loads(str(z["metadata"]))
    if counts.ndim != 3:
        raise ValueError(f"{path}: counts has shape {counts.shape}, expected [steps, layers, experts]")
    return counts, meta


def synthetic_trace(steps: int, layers: int, n_experts: int, tokens_per_gpu: int, top_k: int = 8,
                    n_gpus: int = 8, skew: float = 1.0, drift: float = 0.05, seed: int = 0):
    """A synthetic routing trace in the :func:`write_trace` layout, for demos and tests: per
    layer a Zipf(skew) popularity that drifts slowly (each step multiplies it by
    ``exp(drift * N(0, 1))`` per expert) and decode batches drawn around it.  Returns
    (counts int64[steps, layers, experts], metadata) with ``source = "synthetic"``."""
    rng = np.random.default_rng(seed)
    counts = np.zeros((steps, layers, n_experts), np.int64)
    for layer in range(layers):
        p = zipf_popularity(n_experts, skew, seed=rng)
        for s in range(steps):
            p = p * np.exp(drift * rng.standard_normal(n_experts))
            p /= p.sum()
            counts[s, layer] = sample_counts(p, tokens_per_gpu, top_k, n_gpus, seed=rng)[0]
    meta = {"source": "synthetic", "top_k": top_k, "n_gpus": n_gpus, "skew": skew, "drift": drift, "seed": seed}
    return counts, meta


def _np(x) -> np.ndarray:
    """A torch tensor, list or array as a numpy array (no torch import needed)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def sglang_dump_counts(dumps) -> np.ndarray:
    """Routing counts int64[steps, layers, experts] from SGLang expert-distribution recorder
    dumps, already loaded (``torch.load``) into dicts (NOTES-sglang, "Recording routing
    traces").

    * ``per_pass`` mode: one dict per rank, ``{"records": [{"forward_pass_id", "rank",
      "global_physical_count": [L, P]}, ...], "last_physical_to_logical_map": [L, P]}``.
      Counts of the same forward pass are summed over ranks and mapped physical -> logical.
    * ``stat`` mode: one dict with ``"logical_count": [buffer, L, E]`` (rank 0's dump).
    """
    if isinstance(dumps, dict):
        dumps = [dumps]
    dumps = list(dumps)
    if not dumps:
        raise ValueError("no recorder dumps given")
    if all("logical_count" in d for d in dumps):
        counts = np.concatenate([_np(d["logical_count"]) for d in dumps]).astype(np.int64)
        if counts.ndim != 3:
            raise ValueError(f"stat dump logical_count must be [buffer, L, E], got {counts.shape}")
        if np.any(counts < 0):
            raise ValueError("stat dump has negative counts")
        return counts
    if not all("records" in d and "last_physical_to_logical_map" in d for d in dumps):
        raise ValueError("expected SGLang per_pass dumps (records + last_physical_to_logical_map) "
                         "or stat dumps (logical_count)")
    p2l = _np(dumps[0]["last_physical_to_logical_map"]).astype(np.int64)
    for d in dumps[1:]:
        if not np.array_equal(_np(d["last_physical_to_logical_map"]), p2l):
            raise ValueError("ranks disagree on last_physical_to_logical_map; dumps are from different placements")
    L, P = p2l.shape
    E = int(p2l.max()) + 1
    passes: dict[int, np.ndarray] = {}
    for d in dumps:
        for rec in d["records"]:
            phys = _np(rec["global_physical_count"]).astype(np.int64)
            if phys.shape != (L, P):
                raise ValueError(f"global_physical_count has shape {phys.shape}, map has {(L, P)}")
            key = int(rec["forward_pass_id"])
            passes[key] = passes.get(key, 0) + phys
    if not passes:
        raise ValueError("the per_pass dumps hold no records")
    out = np.zeros((len(passes), L, E), np.int64)
    rows = np.repeat(np.arange(L), P)
    for i, key in enumerate(sorted(passes)):
        valid = p2l.ravel() >= 0
        np.add.at(out[i], (rows[valid], p2l.ravel()[valid]), passes[key].ravel()[valid])
    if np.any(out < 0):
        raise ValueError("per_pass dumps have negative counts")
    return out


def import_sglang_dumps(paths, out, **metadata) -> np.ndarray:
    """Read SGLang recorder dump files (``torch.load``; torch needed only here), convert
    with :func:`sglang_dump_counts` and write a routing trace to ``out``."""
    import torch

    dumps = [torch.load(p, map_location="cpu", weights_only=False) for p in paths]
    counts = sglang_dump_counts(dumps)
    write_trace(out, counts, source="sglang-recorder", files=[str(p) for p in paths], **metadata)
    return counts


def import_main(argv=None) -> int:
    """``python -m tempo import-trace DUMP... -o trace.npz``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tempo import-trace",
                                 description="convert SGLang recorder dumps (per_pass: one file per rank; or stat)")
    ap.add_argument("dumps", nargs="+")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--model", default="", help="model name stored in the trace metadata")
    a = ap.parse_args(argv)
    counts = import_sglang_dumps(a.dumps, a.out, model=a.model)
    print(f"wrote {a.out}: {counts.shape[0]} steps x {counts.shape[1]} layers x {counts.shape[2]} experts")
    return 0
