"""Chapter 08, *Your model* (``notebooks/08_your_model.md``): the tables the walk-through shows
while it takes a new expert shape from its roofline estimate to a fitted cost model and a
dispatch comparison."""
from __future__ import annotations

import pandas as pd

from ...core.cost import CostModel
from ...core.models import ModelShape
from .ch01_balance_time import dispatcher_makespans  # noqa: F401  (the chapter compares dispatchers with it)
from .common import recordings_table  # noqa: F401  (the chapter lists the recordings with it)


def floor_estimate(shape: ModelShape, hbm_bytes_per_s: float = 4.8e12) -> pd.DataFrame:
    """What to expect of an expert's floor b before measuring (Section 2.2): its fp8 bytes, the
    roofline floor bytes / bandwidth, and that floor times the paper's range of fitted floors
    over their roofline bounds.  One row."""
    from .. import paper

    if not hbm_bytes_per_s > 0:
        raise ValueError(f"hbm_bytes_per_s must be positive, got {hbm_bytes_per_s}")
    bound_us = shape.bytes(1.0) / hbm_bytes_per_s * 1e6                     # fp8: one byte per weight
    lo, hi = (paper.text_number("roofline", f"fitted_over_roofline_{q}") for q in ("min", "max"))
    return pd.DataFrame([{"expert MB (fp8)": shape.bytes(1.0) / 1e6, "roofline floor (us)": bound_us,
                          "expected b, from (us)": lo * bound_us, "to (us)": hi * bound_us}])


def fit_summary(model: CostModel, samples: pd.DataFrame) -> pd.DataFrame:
    """A fitted cost model's parameters and its mean relative error (%) on ``samples``."""
    from ...calib import fit_error

    return pd.DataFrame([{"a (us)": model.a, "b (us)": model.b, "c (us)": model.c,
                          "beta (us/token)": model.beta, "mean fit error %": 100 * fit_error(model, samples)}])
