"""Calibration (paper Sections 2.2, 4.1, 5.2, Appendix B): microbenchmark backends that time
the routed-expert FFN on real hardware, cost-model fitting, and recordings under
``data/measured/``.  ``import tempo.calib`` needs numpy/scipy/pandas only; the backends
import torch (and deep_gemm) when they run."""
from .fit import FORMS, Fit, bootstrap, fit_cost_model, fit_error, proxy_spreads
from .grid import plan_grid
from .shapes import SHAPES, roofline_us, shape

__all__ = ["FORMS", "Fit", "bootstrap", "fit_cost_model", "fit_error", "proxy_spreads", "plan_grid", "SHAPES",
           "roofline_us", "shape"]
