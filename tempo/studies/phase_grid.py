"""The phase explorer's grid (chapter 04): the phase diagram of Fig. 6 on a finer grid of batch
sizes, over EP sizes, replications and skews, with what a page needs to re-price it.

Each cell draws the phase diagram's batches under the same reading (:mod:`tempo.studies.readings`:
router and placement; the same seed, so a cell on the phase diagram's grid has the same instances
as :func:`tempo.studies.simulator.phase_cell`) and dispatches them with the phase diagram's fixed
policies (:data:`tempo.studies.simulator.FIXED`, with the reading's token-LP face and METRO
order), TEMPO (the reading's preset and ensemble candidates) and, as rows ``tempo_default``, the
library's default ``tempo.solve(inst, model, "tempo")``, under the shape's Table 6 model.  A
row keeps, per dispatch, the busiest GPU's activated replicas ``max_G`` and tokens ``max_N``:
under Eq. 1 (no tile or traffic term) a GPU's time is ``max(a + b G, c + beta N)``, so the
makespan is ``max(a + b max_G, c + beta max_N)`` and any other (a, b, c, beta) re-prices a
dispatch exactly.  The fixed policies do not look at the model, so their re-priced rows are
what they would dispatch under any model; TEMPO's dispatch does, and with ``a = c = 0`` it
depends on b and beta only through ``n* = b / beta``: rows ``tempo_nstar`` are TEMPO solved at
the n* of ``config["n_stars"]`` (b = n* beta), from which a page prices TEMPO at a reader's own
b and beta (the best of these dispatches: an upper bound on the optimum, not a TEMPO run)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.cost import CostModel
from ..policies import solve
from . import readings
from .registry import experiment
from .simulator import DISPATCH_READINGS, FIXED, SHAPES
from .sweep import run_grid


def phase_grid_cell(cell: dict) -> pd.DataFrame:
    """One (shape, EP size, replication, skew) column of the grid: for every batch size of
    ``cell["tokens"]`` and batch, each fixed policy's and TEMPO's busiest-GPU features and
    makespan, and TEMPO's at every n* of ``cell["n_stars"]``; under ``cell["reading"]`` (missing:
    the paper's)."""
    E, K, params = SHAPES[cell["shape"]]
    reading = readings.of(cell)
    model = CostModel.named(params)
    ladder = [(float(ns), CostModel(a=0.0, b=float(ns) * model.beta, c=0.0, beta=model.beta)) for ns in cell["n_stars"]]
    rows = []
    for B in cell["tokens"]:
        insts = readings.batches(reading, E, cell["ep"], B, cell["skew"], cell["replication"], cell["batches"],
                           seed=cell["seed"], top_k=K)
        for b, inst in enumerate(insts):
            runs = [(p, np.nan, model) for p in list(FIXED) + ["tempo", "tempo_default"]] + \
                   [("tempo_nstar", ns, m) for ns, m in ladder]
            for policy, ns, m in runs:
                if policy == "tempo_default":  # the library's default preset, whatever the reading
                    d = solve(inst, m, "tempo")
                else:
                    d = readings.dispatch(inst, m, "tempo" if policy == "tempo_nstar" else policy, reading)
                G, N, T = model.gpu_features(inst, d)
                rows.append({"B": int(B), "batch": b, "policy": policy,
                             "n_star_solved": model.n_star if policy in ("tempo", "tempo_default") else ns,
                             "max_G": int(G.max()), "max_N": float(N.max()),
                             "makespan_us": float(model.time(G, N, T).max())})
    return pd.DataFrame(rows)


@experiment("phase_grid", readings=DISPATCH_READINGS)
def phase_grid(config: dict) -> pd.DataFrame:
    """The phase explorer's grid: one row per (shape, ep, replication, skew, B, batch, policy
    [, n*]) with ``max_G``, ``max_N`` and ``makespan_us`` (module docstring); policies: the fixed
    ones, ``tempo`` (the reading's preset), ``tempo_default`` (the library's default) and
    ``tempo_nstar``.  Config: ``shapes``,
    ``eps``, ``replications``, ``skews``, ``tokens`` (tokens per GPU), ``batches``, ``n_stars``
    (the n* ladder of TEMPO's extra solves), ``seed`` (0, the phase diagram's), ``workers`` and
    ``reading`` (written by :func:`tempo.studies.run`; missing: the paper's)."""
    for key in ("shapes", "eps", "replications", "skews", "tokens", "batches", "n_stars"):
        if key not in config:
            raise ValueError(f"phase_grid config needs {key!r}")
    for sh in config["shapes"]:
        if sh not in SHAPES:
            raise ValueError(f"shapes: unknown shape {sh!r}; known: {', '.join(SHAPES)}")
        if CostModel.named(SHAPES[sh][2]).a or CostModel.named(SHAPES[sh][2]).c:
            raise ValueError(f"shapes: {sh!r}'s parameter set has a or c != 0; the n* ladder assumes a = c = 0")
    cells = [{"shape": sh, "ep": int(ep), "replication": float(r), "skew": float(s), "tokens": list(config["tokens"]),
              "batches": int(config["batches"]), "n_stars": list(config["n_stars"]), "seed": config.get("seed", 0),
              "reading": readings.of(config).select(DISPATCH_READINGS)}
             for sh in config["shapes"] for ep in config["eps"] for r in config["replications"] for s in config["skews"]]
    return run_grid(phase_grid_cell, cells, workers=config.get("workers"), progress=config.get("progress", True),
                    desc="phase grid")


def phase_grid_means(df: pd.DataFrame) -> pd.DataFrame:
    """Per (shape, ep, replication, skew, B): each policy's mean makespan over the batches
    (``ms_<policy>``, with ``ms_tempo_default`` when ``df`` holds the library default's rows), the
    winning fixed policy's code (ties go to the first of :data:`~tempo.studies.simulator.FIXED`, as
    in the phase diagram) and TEMPO's gain over it (%): the numbers
    :func:`tempo.studies.simulator.phase_cell` computes for the same cell."""
    need = {"shape", "ep", "replication", "skew", "B", "policy", "makespan_us"}
    if not need <= set(df.columns):
        raise ValueError(f"df must be a phase_grid result (columns {sorted(need)})")
    keys = ["shape", "ep", "replication", "skew", "B"]
    pols = list(FIXED) + ["tempo"] + (["tempo_default"] if (df.policy == "tempo_default").any() else [])
    sub = df[df.policy.isin(pols)]
    wide = sub.groupby(keys + ["policy"], sort=False).makespan_us.mean().unstack("policy")
    out = pd.DataFrame({f"ms_{p}": wide[p] for p in pols})
    fixed = out[[f"ms_{p}" for p in FIXED]].to_numpy()
    first = fixed.argmin(axis=1)  # numpy's argmin takes the first of equal minima
    codes = np.array(list(FIXED.values()))
    out["winner"] = codes[first]
    out["gain_pct"] = 100 * (1 - out.ms_tempo.to_numpy() / fixed[np.arange(len(out)), first])
    return out.reset_index()
