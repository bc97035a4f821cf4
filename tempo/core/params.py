"""Named cost-parameter sets from the paper (Tables 6 and 7), read from data/params/.

This module only reads the table; :meth:`tempo.core.cost.CostModel.named` turns a row into a
cost model (so the cost model imports this module, never the other way round)."""
from __future__ import annotations

from functools import lru_cache

import pandas as pd

from . import paths
from .io import read_csv


@lru_cache(maxsize=None)
def params_table() -> pd.DataFrame:
    """All parameter sets of ``data/params/cost_params.csv``, indexed by name."""
    df = read_csv(paths.PARAMS / "cost_params.csv", 16 * 2**20)
    return df.set_index("name")


def names() -> list[str]:
    """The parameter-set names :meth:`~tempo.core.cost.CostModel.named` accepts."""
    return list(params_table().index)
