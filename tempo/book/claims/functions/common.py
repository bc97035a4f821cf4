"""What the claim functions of several chapters share: the provenance texts of synthetic
routing, drift-16 and the paper's parameters, and the slices of results computed on a trace."""
from __future__ import annotations

import pandas as pd

SYN = "synthetic routing (tempo.world.workloads generators, Zipf popularity; parameters in brackets)"
DRIFT = "synthetic drift-16 batches (tempo.studies.scenarios.drift_batches, Zipf(1.0), R = 64)"
PARAMS = "the paper's Table 6/7 parameters (data/params/cost_params.csv)"


def routing(df: pd.DataFrame, which: str) -> pd.DataFrame:
    """The rows of a result computed on ``which`` routing ("synthetic" or "trace").  A result
    run on a trace next to its synthetic grid (``mixed_regime``, ``solver_vs_milp``) has a
    ``routing`` column; a claim about recorded routing reads its trace rows, a claim about the
    synthetic grid its synthetic rows.  Without the column every row is one routing."""
    if "routing" not in df:
        return df
    sub = df[df.routing == which]
    return sub if len(sub) else df[df.routing == "synthetic"]


def grid_note(df: pd.DataFrame) -> str:
    """Where the batches of a phase-grid result came from, for a claim's note."""
    return ("batches drawn from the trace over the grid's EP sizes, replications and batch sizes"
            if "routing" in df and (df.routing == "trace").any() else "phase-grid batches, not real traces")


def seeded(df: pd.DataFrame, reading, col: str = "seed") -> tuple[pd.DataFrame, list]:
    """The rows of a seeded grid (``col``: ``seed`` of the phase grids, ``batch_seed`` of the
    ablation) a statistic is computed over under ``reading``'s ``random_maxima``: every seed
    (``"seeds"``, the paper's reading: at least 8), or the first only (``"one_seed"``).  A
    result without the column is one seed.  Returns (rows, seeds)."""
    if col not in df:
        return df, [0]
    seeds = sorted(df[col].unique())
    if reading is not None and reading["random_maxima"] == "one_seed":
        seeds = seeds[:1]
    return df[df[col].isin(seeds)], [int(x) for x in seeds]


def seeds_text(per_seed: pd.Series, fmt: str = ".2f") -> str:
    """``"median M, range L-H over N seeds"`` of a statistic computed once per seed."""
    if len(per_seed) == 1:
        return f"one seed ({per_seed.index[0]})"
    return (f"median {per_seed.median():{fmt}}, range {per_seed.min():{fmt}} to {per_seed.max():{fmt}} "
            f"over {len(per_seed)} seeds")


def named_model(name):
    """The cost model of a named parameter set (paper Tables 6, 7)."""
    from ....core.cost import CostModel

    return CostModel.named(name)
