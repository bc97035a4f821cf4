"""A live run of the serving runtime on CPU: batches of a drifting, skewed workload routed
by the reference kernel through the live table while the refresher publishes new tables from
a solver process (Section 4.4).  Each batch is priced with the cost model under the table in
force and under EPLB's uniform split of the same batch.  Used by the runtime chapter and the
soak test."""
from __future__ import annotations

import threading
import time

import numpy as np
import pandas as pd


def live_run(seconds: float, n_experts: int = 256, n_gpus: int = 8, top_k: int = 8, tokens: int = 32,
             layers: int = 1, skew: float = 1.0, drift: int = 16, replication: float = 1.25,
             params: str = "proxy-serving", interval_s: float = 0.1, deadline_s: float = 2.0, walk: float = 0.02,
             seed: int = 0, on_publish=None, min_published: int = 0, max_seconds: float | None = None):
    """Run for ``seconds``, then on until ``min_published`` tables have been published (at
    most ``max_seconds`` in all: a loaded machine solves slower); returns (rows, refresher stats).

    Placement: EPLB from drift-K corrupted statistics (per layer); routing: Zipf(skew)
    popularity taking a multiplicative random walk (``walk``) every batch; ``tokens`` per GPU
    per batch.  Rows (one per batch and layer): ``t_s``, ``layer``, ``table_vs_uniform``
    (modeled block time under the live table over the uniform split's), ``tables_published``
    and ``invalid_routes`` (routed pairs that landed on a slot not holding their expert).
    """
    import torch

    from ..core.cost import CostModel
    from ..core.instance import Instance
    from ..policies import solve
    from ..world.placement import drift_corrupt, eplb_placement
    from ..world.workloads import expected_loads, route_tokens, zipf_popularity
    from ..serving.kernels import dispatch_and_count_reference as kernel
    from ..serving.refresher import Refresher
    from ..serving.settings import ServingSettings
    from ..serving.tables import DispatchTable, effective_probabilities

    model = CostModel.named(params)
    rng = np.random.default_rng(seed)
    pop = zipf_popularity(n_experts, skew, seed=seed + 1)
    loads = expected_loads(pop, top_k)  # the long-run pair loads a recorder would average
    p2l = np.stack([eplb_placement(drift_corrupt(loads, drift, seed=seed + 7 + l), n_gpus, replication)
                    for l in range(layers)])
    table = DispatchTable.from_placement(p2l)
    phys = table.phys
    counts = torch.zeros((layers, n_experts), dtype=torch.int64)
    lock = threading.Lock()
    published = []

    def snapshot():
        with lock:
            return counts.numpy().copy()

    def publish_hook(new, window):
        published.append(time.monotonic())
        if on_publish is not None:
            on_publish(new, window)

    settings = ServingSettings(params=params, refresh_ms=interval_s * 1e3, deadline_ms=deadline_s * 1e3,
                               pricing="fixed", batch_tokens=tokens * top_k * n_gpus)
    r = Refresher(table, snapshot, p2l, n_gpus, settings, on_publish=publish_hook)
    holders = [[set(phys[l, e][phys[l, e] >= 0].tolist()) for e in range(n_experts)] for l in range(layers)]
    rows, t0 = [], time.monotonic()
    r.start()
    try:
        p = pop.copy()
        limit = max(seconds, max_seconds or seconds)
        while True:
            elapsed = time.monotonic() - t0
            if elapsed >= limit or (elapsed >= seconds and len(published) >= min_published):
                break
            p = p * np.exp(walk * rng.standard_normal(n_experts))
            p /= p.sum()
            ids = torch.tensor(route_tokens(p, tokens * n_gpus, top_k, rng))  # top-k distinct experts per token
            n = np.bincount(ids.flatten().numpy(), minlength=n_experts)
            for l in range(layers):
                live = table.prob[0, l].copy()  # what the kernel reads for this batch
                c = counts[l].clone()
                out = kernel(ids, torch.tensor(live), torch.tensor(phys[l]), c, torch.rand(ids.numel()))
                with lock:
                    counts[l] = c
                bad = sum(int(o) not in holders[l][int(e)] for o, e in zip(out.flatten().tolist(), ids.flatten().tolist()))
                inst = Instance.from_placement(n, p2l[l], n_gpus)
                w = inst.replica_gpu.shape[1]
                ms = model.makespan(inst, n[:, None] * effective_probabilities(live[:, :w], phys[l][:, :w]))
                uni = model.makespan(inst, solve(inst, model, "uniform"))
                rows.append({"t_s": time.monotonic() - t0, "layer": l, "table_vs_uniform": ms / uni,
                             "tables_published": len(published), "invalid_routes": bad})
    finally:
        r.stop()
    return pd.DataFrame(rows), dict(r.stats)
