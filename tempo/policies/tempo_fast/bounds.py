"""The lower bound on the makespan (Section 3.1, Appendix A.4)."""
from __future__ import annotations

import math

from .jit import njit
from .pricing import gpu_time


@njit(cache=True)
def lower_bound(p, counts, pairs, g):
    """:meth:`CostModel.lower_bound` without its tile term: ``gpu_time(m, z, m)`` with
    ``m = ceil(L / g)`` for ``L`` live experts and ``z = max(total / g, max_e n_e / d_e)``, ``d_e``
    the distinct replica GPUs of expert ``e``; an idle GPU's time when there are no tokens.

    Parameters:
        p: Pricer
        counts: int64[E]
        pairs: Pairs
        g: int

    Returns:
        float
    """
    ptr, first = pairs.ptr, pairs.first
    L = 0
    total = 0.0
    zmax = 0.0
    for e in range(counts.size):
        if counts[e] > 0:
            L += 1
            total += counts[e]
            d = 0
            for q in range(ptr[e], ptr[e + 1]):
                if first[q]:
                    d += 1
            zmax = max(zmax, counts[e] / d)
    if L == 0:
        return gpu_time(p, 0.0, 0.0, 0.0)
    z = max(total / g, zmax)
    m = math.ceil(L / g)
    return gpu_time(p, m, z, m)
