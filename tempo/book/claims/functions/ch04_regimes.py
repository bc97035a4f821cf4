"""Claims of chapter 04 (the simulator), regimes and scale: the mixed regime (Fig. 5), proxy
mispricing (Table 1), the phase diagram and its boundary (Section 3.2, Fig. 6) and the scale
study (Section 3.3, Fig. 12)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..registry import Value, bootstrap_ci, claim
from .common import SYN, routing


# ------------------------------------------------------------------ Fig. 5
@claim("mixed_zipf", ["mixed_regime"], "synthetic", SYN + ", Zipf(1.2), DSv3 shape, EP8")
def mixed_zipf(f):
    m = routing(f["mixed_regime"], "synthetic")
    per_b = m.groupby("tokens_per_gpu").mixed.mean() * 100
    return Value(float(per_b.min()), note=f"lowest share of mixed batches over the ladder B = "
                                          f"{per_b.index.min()}-{per_b.index.max()}")


@claim("mixed_real_min", ["mixed_regime"], "synthetic", SYN + ", Zipf(1.2)")
def mixed_real_min(f):
    m = routing(f["mixed_regime"], "trace")
    per_b = m[m.tokens_per_gpu.between(128, 512)].groupby("tokens_per_gpu").mixed.mean() * 100
    return (float(per_b.min()), float(per_b.max())) if len(per_b) else None


@claim("linear_token_share", ["mixed_regime"], "synthetic", SYN + ", Zipf(1.2)")
def linear_token_share(f):
    m = routing(f["mixed_regime"], "trace")
    v = m[m.tokens_per_gpu == 512].linear_token_share * 100
    return Value(float(v.mean()), ci=bootstrap_ci(v, np.mean)) if len(v) else None


# ------------------------------------------------------------------ Table 1 (the paper: recorded proxy traces)
_T1 = SYN + ", DSv3-shape proxy (EP8, R = 64, fresh EPLB placement), Zipf(1.0), three-term serving model"


def _t1(f, B, col):
    t = f["proxy_mispricing"]
    v = t[t.B == B][col]
    return Value(float(v.median()), ci=bootstrap_ci(v), note=f"p95 {v.quantile(0.95):.3f}") if len(v) else None


for _cid, _B, _col in [("t1_uniform_b128", 128, "uniform"), ("t1_metro_b128", 128, "metro"),
                       ("t1_static_b1024", 1024, "static"), ("t1_tokenlp_b512", 512, "token_lp"),
                       ("t1_spread_b1024", 1024, "spread")]:
    claim(_cid, ["proxy_mispricing"], "synthetic", _T1)(lambda f, B=_B, c=_col: _t1(f, B, c))


# ------------------------------------------------------------------ phase diagram (Section 3.2, Fig. 6)
_PHASE = SYN + ", EP8 phase grid (Section 3.2's skews x replications x batch ladder)"


def _best_fixed(p):
    return p[["ms_metro", "ms_token_lp", "ms_uniform"]].min(axis=1)


@claim("phase_min_gain", ["phase_diagram"], "synthetic", _PHASE)
def phase_min_gain(f):
    return float(f["phase_diagram"].gain_pct.min())


def _max_gain(f, shape, rep=None):
    p = f["phase_diagram"]
    sub = p[(p["shape"] == shape) & ((p.replication == rep) if rep else True)]
    return float(sub.gain_pct.max()) if len(sub) else None


claim("phase_max_gain_dsv3", ["phase_diagram"], "synthetic", _PHASE + ", DSv3")(lambda f: _max_gain(f, "DSv3"))
claim("phase_max_gain_qwen3", ["phase_diagram"], "synthetic", _PHASE + ", Qwen3-30B")(lambda f: _max_gain(f, "Qwen3-30B"))
claim("phase_max_gain_dsv2", ["phase_diagram"], "synthetic", _PHASE + ", DSv2-Lite at 1.5x")(
    lambda f: _max_gain(f, "DSv2-Lite", 1.5))


@claim("phase_metro_worst", ["phase_diagram"], "synthetic", _PHASE + ", cells where token-LP wins")
def phase_metro_worst(f):
    p = f["phase_diagram"]
    c = p[p.winner == "L"]
    return float((c.ms_metro / _best_fixed(c)).max()) if len(c) else None


@claim("phase_tokenlp_memory_max", ["phase_diagram"], "synthetic", _PHASE + ", cells where METRO wins")
def phase_tokenlp_memory_max(f):
    # the paper: "token-LP in the memory regime costs 5-17%": both ends, over the cells where METRO wins
    p = f["phase_diagram"]
    m = p[p.winner == "M"]
    if m.empty:
        return None
    pen = 100 * (m.ms_token_lp / _best_fixed(m) - 1)
    return (float(pen.min()), float(pen.max()))


def boundary_hits(phase: pd.DataFrame, shape: str = "DSv3", ep: int = 8) -> pd.DataFrame:
    """Per (skew, replication) column: the analytic B* (Section 3.2) and whether it lands in
    the observed flip band.  A column whose winner never flips from M to L on the ladder has
    no band, and counts as a miss (``flips`` False)."""
    from ....studies.simulator import boundary_table

    bt = boundary_table(phase, shape, ep)
    sub = phase[(phase["shape"] == shape) & (phase.ep == ep)]
    flips = []
    for r in bt.itertuples():
        w = sub[(sub["skew"] == r.skew) & (sub.replication == r.replication)].sort_values("B").winner.to_numpy()
        m = np.flatnonzero(w == "M")
        flips.append(bool(m.size and (np.flatnonzero(w == "L") > m.max()).any()))
    bt["flips"] = flips
    bt["hit"] = bt.hit & bt.flips
    return bt


@claim("phase_boundary_hits", ["phase_diagram"], "synthetic", _PHASE + ", DSv3 columns")
def phase_boundary_hits(f):
    bt = boundary_hits(f["phase_diagram"])
    if bt.empty:
        return None
    return Value(100 * float(bt.hit.mean()), note=f"{int(bt.hit.sum())} of {len(bt)} columns (paper: 12 of 12); "
                                                 f"{int((~bt.flips).sum())} columns never flip on our ladder")


# ------------------------------------------------------------------ scale (Section 3.3, Fig. 12)
_SCALE = SYN + ", DSv3 shape, 1.25x replication, EP 8-64"


@claim("scale_max_gain", ["phase_diagram-scale"], "synthetic", _SCALE + ", s = 0")
def scale_max_gain(f):
    # the paper's "(max 15.5%)" belongs to the s = 0 clause on EP32-64 (P:237)
    s = f["phase_diagram-scale"]
    sub = s[(s.ep >= 32) & (s["skew"] == 0.0)]
    return float(sub.gain_pct.max()) if len(sub) else None


@claim("scale_mean_gain_s0", ["phase_diagram-scale"], "synthetic", _SCALE + ", s = 0")
def scale_mean_gain_s0(f):
    # "mean 6-6.5% at s = 0 on EP32-64": the mean over the batch ladder, one per EP; both ends
    s = f["phase_diagram-scale"]
    m = s[(s.ep >= 32) & (s["skew"] == 0.0)].groupby("ep").gain_pct.mean()
    return (float(m.min()), float(m.max())) if len(m) else None


@claim("scale_mean_gain_s12", ["phase_diagram-scale"], "synthetic", _SCALE + ", s = 1.2, EP32")
def scale_mean_gain_s12(f):
    s = f["phase_diagram-scale"]
    sub = s[(s.ep == 32) & (s["skew"] == 1.2)]
    return float(sub.gain_pct.mean()) if len(sub) else None


@claim("scale_comm_effect", ["phase_diagram-scale"], "synthetic", _SCALE + ", scored with k_r = 0.0037 us/token")
def scale_comm_effect(f):
    s = f["phase_diagram-scale"]
    shift = (s.groupby(["ep", "skew"]).gain_comm_pct.mean() - s.groupby(["ep", "skew"]).gain_pct.mean()).abs()
    flips = int((s.winner != s.winner_comm).sum())
    return Value(float(shift.max()), note=f"the best fixed policy changes in {flips} of {len(s)} cells")
