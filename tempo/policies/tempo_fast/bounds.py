"""The lower bound on the makespan (Section 3.1, Appendix A.4).
"""
from __future__ import annotations

import math

from .jit import njit
from .pricing import gpu_time


@njit(cache=True)
def lower_bound(p, counts, pairs, g):
    """:meth:`CostModel.lower_bound` (Section 3.1, Appendix A.4) without its tile term.

    ``gpu_time(ceil(L/g), z, ceil(L/g))`` with ``L`` live experts and ``z = max(total/g,
    max_e n_e / |distinct replica GPUs of e|)``; for a layer without tokens, an idle GPU's time
    ``gpu_time(0, 0, 0) = max(a, c, c2)`` (the traffic constant too, Eq. 4).

    Parameters
    ----------
    p : Pricer
    counts : int64[E]
    pairs : Pairs
    g : int
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
