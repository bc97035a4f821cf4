"""Named cost-parameter sets from the paper (Tables 6 and 7), read from data/params/."""
from __future__ import annotations

from functools import lru_cache

import pandas as pd

from . import paths


@lru_cache(maxsize=None)
def params_table() -> pd.DataFrame:
    """All parameter sets of ``data/params/cost_params.csv``, indexed by name."""
    df = pd.read_csv(paths.PARAMS / "cost_params.csv")
    return df.set_index("name")


def names() -> list[str]:
    return list(params_table().index)


def load_params(name: str, **overrides):
    """A :class:`~tempo.core.cost.CostModel` for the parameter set ``name``.

    ``overrides`` replace fields (e.g. ``b2=0`` to price a Testbed B set tile-blind).
    """
    from .cost import CostModel

    table = params_table()
    if name not in table.index:
        raise ValueError(f"unknown parameter set {name!r}; known: {', '.join(table.index)}")
    row = table.loc[name]

    def val(key, default=None):
        v = row[key]
        return default if pd.isna(v) else float(v)

    kw = dict(a=val("a", 0.0), b=val("b", 0.0), c=val("c", 0.0), beta=val("beta", 0.0),
              b2=val("b2", 0.0), c2=val("c2"), gamma=val("gamma"), name=name)
    kw.update(overrides)
    return CostModel(**kw)
