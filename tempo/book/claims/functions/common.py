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


def named_model(name):
    """The cost model of a named parameter set (paper Tables 6, 7)."""
    from ....core.cost import CostModel

    return CostModel.named(name)
