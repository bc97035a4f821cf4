"""The teaching chapter's experiments: the Fig. 1b toy batch and the cost curve of Fig. 1a."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.cost import CostModel
from ..core.instance import Instance
from ..policies import solve
from . import readings
from .registry import experiment

TOY_COUNTS = [600, 30, 30, 30, 30, 30, 30]
PROXY_NAMES = {"token_lp": "token balancing (token-LP)", "metro": "activation balancing (METRO)",
               "tempo": "time model (TEMPO)"}


def toy_instance(counts=None, n_gpus: int = 2) -> Instance:
    return Instance.full_replication(TOY_COUNTS if counts is None else counts, n_gpus)


#: The readings the toy studies depend on: Fig. 1b's token-LP face, which TEMPO, METRO's order.
TOY_READINGS = ("toy_token_lp_face", "tempo_preset", "chain_depth", "ensemble_lp", "metro_order")


def _toy_solve(inst, model, policy, reading):
    return readings.dispatch(inst, model, policy, reading, face_reading="toy_token_lp_face")


@experiment("toy_dispatch", readings=TOY_READINGS)
def toy_dispatch(config: dict) -> pd.DataFrame:
    """Per-GPU time of the Fig. 1b toy under each policy: one row per (policy, GPU).  Token-LP
    takes Fig. 1b's face (``toy_token_lp_face``: the even spread the figure draws), TEMPO the
    reading's preset and ensemble, METRO the reading's order."""
    inst = toy_instance(config.get("counts"), config.get("n_gpus", 2))
    model = CostModel(a=config.get("a", 0.0), b=config["b"], c=config.get("c", 0.0), beta=config["beta"])
    reading = readings.of(config)
    rows = []
    for policy in config.get("policies", list(PROXY_NAMES)):
        d = _toy_solve(inst, model, policy, reading)
        G, N, T = model.gpu_features(inst, d)
        t = model.time(G, N, T)
        for g in range(inst.n_gpus):
            rows.append({"policy": policy, "label": PROXY_NAMES.get(policy, policy), "gpu": g,
                         "activated": int(G[g]), "tokens": float(N[g]), "floor_us": model.a + model.b * G[g],
                         "compute_us": model.c + model.beta * N[g], "time_us": float(t[g]),
                         "makespan_us": float(t.max())})
    return pd.DataFrame(rows)


@experiment("toy_sweep", readings=TOY_READINGS)
def toy_sweep(config: dict) -> pd.DataFrame:
    """Makespan of each policy on the toy over a grid of (b, beta): one row per cell and
    policy, each policy as :func:`toy_dispatch` runs it under the reading."""
    inst = toy_instance(config.get("counts"), config.get("n_gpus", 2))
    reading = readings.of(config)
    rows = []
    for b in config["b_values"]:
        for beta in config["beta_values"]:
            model = CostModel(a=0.0, b=float(b), c=0.0, beta=float(beta))
            ms = {p: model.makespan(inst, _toy_solve(inst, model, p, reading)) for p in PROXY_NAMES}
            best = min(ms.values())
            for p, v in ms.items():
                rows.append({"b": float(b), "beta": float(beta), "policy": p, "label": PROXY_NAMES[p],
                             "makespan_us": v, "vs_best": v / best if best > 0 else 1.0})
    return pd.DataFrame(rows)


@experiment("cost_curve")
def cost_curve(config: dict) -> pd.DataFrame:
    """Fig. 1a: one expert's modeled time against its tokens, for named parameter sets."""
    n = np.unique(np.round(np.geomspace(1, config.get("n_max", 2048), config.get("points", 120))))
    rows = []
    for name in config["params"]:
        m = CostModel.named(name)
        t = m.expert_time(n)
        for ni, ti in zip(n, t):
            rows.append({"params": name, "tokens": float(ni), "time_us": float(ti),
                         "regime": "flat (weight streaming)" if ni < m.n_star else "linear (compute)",
                         "n_star": m.n_star})
    return pd.DataFrame(rows)
