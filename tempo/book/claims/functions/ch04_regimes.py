"""Claims of chapter 04 (the studies), regimes and scale: the mixed regime (Fig. 5), proxy
mispricing (Table 1), the phase diagram and its boundary (Section 3.2, Fig. 6) and the scale
study (Section 3.3, Fig. 12)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ....paper.claims_file import claim_row, precision
from ..registry import Value, bootstrap_ci, cause_of, claim, printed, seed_range
from .common import SYN, routing, seeded, seeds_text


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
# Every statistic of the phase grids is computed over the seeds the grid ran with, as the
# random_maxima reading has it (data/paper/readings.yaml): an extreme (a maximum, a minimum, the
# ends of a range) is one value per seed and agrees when the paper's value lies within the seeds'
# range (Value.seeds); a bound stated for every cell must hold on every seed; a mean or a share gets
# its bootstrap interval over seeds.  Under random_maxima=one_seed only the first seed counts.
_PHASE = SYN + ", EP8 phase grid (Section 3.2's skews x replications x batch ladder)"
_RM = ("random_maxima",)


def _best_fixed(p):
    return p[["ms_metro", "ms_token_lp", "ms_uniform"]].min(axis=1)


def _where(row) -> str:
    return f"s = {row['skew']:g}, {row.replication:g}x, B = {int(row.B)}" + (f", seed {int(row.seed)}" if "seed" in row else "")


#: TEMPO's switching tolerance (Section 4.2 stage 4): it keeps its own dispatch unless a candidate
#: (token-LP) is more than 1% better
_TAU_PCT = 1.0
_FIXED = ("metro", "token_lp", "uniform")


def _best_of(row) -> str:
    return min(_FIXED, key=lambda q: row[f"ms_{q}"])


def _min_gain_cause(p, edge: float, paper: float) -> str:
    """Which cells break "min gain >= paper" (below ``edge``): those inside TEMPO's own 1%
    switching band where token-LP is best (Proposition 1 allows them), counted apart from the
    rest (a flat cell where a whole activation is missing), and the seeds that fail without the
    latter."""
    from .ch03 import whole_step

    bad = p[p.gain_pct < edge]
    best = bad.apply(_best_of, axis=1)
    band = bad[(best == "token_lp") & (bad.gain_pct >= -_TAU_PCT)]
    rest = bad.drop(band.index)
    parts = [f"{len(bad)} of {len(p)} cells below {paper:g}%"]
    if len(band):
        parts.append(f"{len(band)} in TEMPO's {_TAU_PCT:g}% switching band (token-LP best, B = {_list(band.B)}; TEMPO "
                     f"{-band.gain_pct.max():.2f}-{-band.gain_pct.min():.2f}% above it)")
    if len(rest):
        w = rest.loc[rest.gain_pct.idxmin()]
        k = whole_step(-float(w.gain_pct))
        step = f", a whole step of 100/{k}" if k else ""
        parts.append(f"{len(rest)} {'other ' if len(band) else ''}below the best fixed policy, lowest at {w['shape']}, "
                     f"{_where(w)}: {_best_of(w)} {w[f'ms_{_best_of(w)}']:.2f} us, TEMPO {w['ms_tempo']:.2f} us{step}")
    if "seed" in p and len(band) and len(rest):
        without = p.drop(rest.index).groupby("seed").gain_pct.min()
        parts.append(f"without these, {int((without < edge).sum())} of {p.seed.nunique()} seeds fail "
                     f"(per-seed minimum {without.min():.2f} to {without.max():.2f}%)")
    return "; ".join(parts)


def _list(values) -> str:
    v = sorted({int(x) for x in values})
    return ", ".join(map(str, v))


@claim("phase_min_gain", ["phase_diagram"], "synthetic", _PHASE, uses=_RM)
def phase_min_gain(f, reading=None):
    # "min gain >= -0.3%" on the grid: a bound for every cell, so it must hold on every seed
    p, seeds = seeded(f["phase_diagram"], reading)
    per = p.groupby("seed").gain_pct.min() if "seed" in p else pd.Series([p.gain_pct.min()], index=[0])
    w = p.loc[p.gain_pct.idxmin()]
    row = claim_row("phase_min_gain")
    edge = float(row["paper"]) - precision(row["paper_text"])
    cause = cause_of(lambda: _min_gain_cause(p, edge, float(row["paper"])), p,
                     ("ms_metro", "ms_token_lp", "ms_uniform", "ms_tempo", "shape", "B"))
    return Value(float(per.min()), seeds=seed_range(per), n_seeds=len(per), cause=cause,
                 note=f"lowest cell gain per seed: {seeds_text(per, '.3f')}; lowest at {w['shape']}, {_where(w)}")


def _max_gain_cause(sub, per, paper: float) -> str:
    """Where the largest gain sits (cell, best fixed policy, regime by that policy), how many
    cells exceed the paper's maximum and how much faster their best fixed policy would have to
    be for it to hold, and what the excess is not (the spread over seeds, one cell)."""
    w = sub.loc[sub.gain_pct.idxmax()]
    best = _best_of(w)
    over = sub[sub.gain_pct > paper]
    n_cells = len(sub) // max(len(per), 1)
    per_seed = over.groupby("seed").size().reindex(per.index, fill_value=0) if "seed" in sub else pd.Series([len(over)])
    by_best = over.apply(_best_of, axis=1).value_counts()
    # the best fixed policy's time at which TEMPO's gain is the paper's maximum: ms_tempo / (1 - paper/100)
    cut = 100 * (1 - over.ms_tempo / (1 - paper / 100) / over[[f"ms_{q}" for q in _FIXED]].min(axis=1))
    from .ch03 import whole_step

    k = whole_step(float(w.gain_pct), tol=0.05)
    step = f", a whole step of 100/{k}" if k else ""
    head = (f"largest at {_where(w)}: {best} {w[f'ms_{best}']:.1f} us, TEMPO {w['ms_tempo']:.1f} us "
            f"(mean of {int(w['batches'])} batches{step}); ours / paper = {per.median() / paper:.2f}; ")
    if over.empty:
        return head + f"no cell above {paper:g}%; lowest seed's maximum {per.min():.2f}%"
    return (head + f"{int(per_seed.median())} of {n_cells} cells per seed (median) above {paper:g}%, at B = "
            f"{_list(over.B)}, best fixed there " + ", ".join(f"{k} {v}" for k, v in by_best.items())
            + f"; lowest seed's maximum {per.min():.2f}%; best fixed policy {cut.median():.1f}% faster "
            f"(median; up to {cut.max():.1f}%) gives {paper:g}%")


def _max_gain(f, shape, rep=None, reading=None):
    p, seeds = seeded(f["phase_diagram"], reading)
    sub = p[(p["shape"] == shape) & ((p.replication == rep) if rep else True)]
    if sub.empty:
        return None
    per = sub.groupby("seed").gain_pct.max() if "seed" in sub else pd.Series([sub.gain_pct.max()], index=[0])
    w = sub.loc[sub.gain_pct.idxmax()]
    cid = {"DSv3": "phase_max_gain_dsv3", "Qwen3-30B": "phase_max_gain_qwen3", "DSv2-Lite": "phase_max_gain_dsv2"}[shape]
    cause = cause_of(lambda: _max_gain_cause(sub, per, float(claim_row(cid)["paper"])), sub,
                     ("ms_metro", "ms_token_lp", "ms_uniform", "ms_tempo", "batches", "B"))
    return Value(float(per.median()), seeds=seed_range(per), n_seeds=len(per), cause=cause,
                 note=f"largest gain over the grid per seed: {seeds_text(per)}; the largest at {_where(w)}")


claim("phase_max_gain_dsv3", ["phase_diagram"], "synthetic", _PHASE + ", DSv3", uses=_RM)(
    lambda f, reading=None: _max_gain(f, "DSv3", reading=reading))
claim("phase_max_gain_qwen3", ["phase_diagram"], "synthetic", _PHASE + ", Qwen3-30B", uses=_RM)(
    lambda f, reading=None: _max_gain(f, "Qwen3-30B", reading=reading))
claim("phase_max_gain_dsv2", ["phase_diagram"], "synthetic", _PHASE + ", DSv2-Lite at 1.5x", uses=_RM)(
    lambda f, reading=None: _max_gain(f, "DSv2-Lite", 1.5, reading=reading))


def _per_seed(p, fn) -> pd.Series:
    """``fn(rows)`` per seed of a phase grid (one value when the grid has no seed column), NaN
    where a seed has no rows ``fn`` can use."""
    if "seed" not in p:
        return pd.Series([fn(p)], index=[0], dtype=float)
    return pd.Series({int(s): fn(g) for s, g in p.groupby("seed")}, dtype=float)


@claim("phase_metro_worst", ["phase_diagram"], "synthetic", _PHASE + ", cells where token-LP wins", uses=_RM)
def phase_metro_worst(f, reading=None):
    p, _ = seeded(f["phase_diagram"], reading)

    def worst(g):
        c = g[g.winner == "L"]  # a tied cell (M+L) is won by neither (the ties reading)
        return float((c.ms_metro / _best_fixed(c)).max()) if len(c) else float("nan")

    per = _per_seed(p, worst).dropna()
    if per.empty:
        return None
    return Value(float(per.median()), seeds=seed_range(per), n_seeds=len(per),
                 note=f"METRO over the best fixed policy, worst cell where token-LP wins alone, per seed: {seeds_text(per)}")


@claim("phase_tokenlp_memory_max", ["phase_diagram"], "synthetic", _PHASE + ", cells where METRO wins", uses=_RM)
def phase_tokenlp_memory_max(f, reading=None):
    # the paper: "token-LP in the memory regime costs 5-17%": both ends, over the cells where METRO wins
    p, _ = seeded(f["phase_diagram"], reading)

    def pen(g):
        m = g[g.winner == "M"]
        return 100 * (m.ms_token_lp / _best_fixed(m) - 1)

    lo = _per_seed(p, lambda g: pen(g).min() if (g.winner == "M").any() else float("nan")).dropna()
    hi = _per_seed(p, lambda g: pen(g).max() if (g.winner == "M").any() else float("nan")).dropna()
    if lo.empty:
        return None
    def cause_text():
        from .ch03 import whole_step

        m = p[p.winner == "M"].assign(pen=lambda d: 100 * (d.ms_token_lp / _best_fixed(d) - 1))
        w = m.loc[m.pen.idxmax()]
        k = whole_step(float(w.pen))
        small = int((m.pen < 5 - 0.5).sum())
        step = f", a whole step of 100/{k}" if k else ""
        return (f"highest at {w['shape']}, {_where(w)}: token-LP {w.ms_token_lp:.2f} us, METRO {w.ms_metro:.2f} us "
                f"(+{w.pen:.2f}%{step}); {small} of {len(m)} METRO-only cells under 4.5%, lowest {m.pen.min():.2f}%")

    return Value((float(lo.median()), float(hi.median())), seeds=(seed_range(lo), seed_range(hi)), n_seeds=len(lo),
                 cause=cause_of(cause_text, p, ("ms_metro", "ms_token_lp", "ms_uniform", "winner", "shape")),
                 note=f"token-LP's cost where METRO wins alone, lowest cell per seed: {seeds_text(lo)}; "
                      f"highest: {seeds_text(hi)}")


@claim("phase_boundary_hits", ["phase_boundary"], "synthetic", _PHASE + ", DSv3 columns", uses=_RM)
def phase_boundary_hits(f, reading=None):
    b, seeds = seeded(f["phase_boundary"], reading)
    b = b[(b["shape"] == "DSv3") & (b.ep == 8)]
    tables = {s: b[b.seed == s] for s in seeds}
    tables = {s: t for s, t in tables.items() if not t.empty}
    if not tables:
        return None
    share = pd.Series({s: 100 * float(t.hit.mean()) for s, t in tables.items()})
    cols = len(next(iter(tables.values())))
    never = pd.Series({s: int((~t.flips).sum()) for s, t in tables.items()})
    ci = bootstrap_ci(share.to_numpy(), np.mean) if len(share) > 1 else None
    return Value(float(share.mean()), ci=ci, n_seeds=len(share),
                 note=f"{share.mean() * cols / 100:.1f} of {cols} columns on average (paper: 12 of 12); per seed "
                      f"{int(share.min() * cols / 100 + 0.5)} to {int(share.max() * cols / 100 + 0.5)} of {cols}; "
                      f"{never.min()} to {never.max()} columns per seed never flip from M to L")


# ------------------------------------------------------------------ scale (Section 3.3, Fig. 12)
_SCALE = SYN + ", DSv3 shape, 1.25x replication, EP 8-64"


def _s0_cause(sub, claim_id: str) -> str:
    """What the scale grid's s = 0 gains (EP32-64) lack against the paper: per EP the mean (or
    largest) gain, the points TEMPO would have to add over the best fixed policy, and the cells
    where TEMPO only ends where a fixed policy ends (ties) or behind it."""
    def text():
        row = claim_row(claim_id)
        paper = row["paper"]
        lo = float(paper[0]) if isinstance(paper, list) else float(paper)
        parts = []
        for ep, g in sub.groupby("ep"):
            stat = float(g.gain_pct.mean() if isinstance(paper, list) else g.gain_pct.max())
            tie = int((g.gain_pct.abs() <= 0.05).sum())
            lose = int((g.gain_pct < -0.05).sum())
            best = g[["ms_metro", "ms_token_lp", "ms_uniform"]].idxmin(axis=1).str[3:].value_counts().idxmax()
            parts.append(f"EP{int(ep)}: {'mean' if isinstance(paper, list) else 'largest'} {stat:.2f}%, "
                         f"{max(lo - stat, 0):.2f} points short; level with the best fixed policy in {tie} of {len(g)} "
                         f"cells, behind in {lose} ({best} best most often)")
        return f"paper {printed(row['paper_text'])}%: " + "; ".join(parts)

    return cause_of(text, sub, ("ms_metro", "ms_token_lp", "ms_uniform", "ms_tempo", "gain_pct"))


@claim("scale_max_gain", ["phase_diagram-scale"], "synthetic", _SCALE + ", s = 0", uses=_RM)
def scale_max_gain(f, reading=None):
    # the paper's "(max 15.5%)" belongs to the s = 0 clause on EP32-64 (P:237)
    s, _ = seeded(f["phase_diagram-scale"], reading)
    sub = s[(s.ep >= 32) & (s["skew"] == 0.0)]
    if sub.empty:
        return None
    per = _per_seed(sub, lambda g: float(g.gain_pct.max()))
    return Value(float(per.median()), seeds=seed_range(per), n_seeds=len(per), cause=_s0_cause(sub, "scale_max_gain"),
                 note=f"largest gain at s = 0 on EP32-64 per seed: {seeds_text(per)}")


@claim("scale_mean_gain_s0", ["phase_diagram-scale"], "synthetic", _SCALE + ", s = 0", uses=_RM)
def scale_mean_gain_s0(f, reading=None):
    # "mean 6-6.5% at s = 0 on EP32-64": the mean over the batch ladder (and the seeds), one per EP; both ends
    s, seeds = seeded(f["phase_diagram-scale"], reading)
    sub = s[(s.ep >= 32) & (s["skew"] == 0.0)]
    m = sub.groupby("ep").gain_pct.mean()
    if m.empty:
        return None
    return Value((float(m.min()), float(m.max())), n_seeds=len(seeds), cause=_s0_cause(sub, "scale_mean_gain_s0"),
                 note="mean over the batch ladder and " + (f"{len(seeds)} seeds" if len(seeds) > 1 else "one seed")
                      + ": " + ", ".join(f"EP{int(e)} {v:.2f}%" for e, v in m.items()))


@claim("scale_mean_gain_s12", ["phase_diagram-scale"], "synthetic", _SCALE + ", s = 1.2, EP32", uses=_RM)
def scale_mean_gain_s12(f, reading=None):
    s, seeds = seeded(f["phase_diagram-scale"], reading)
    sub = s[(s.ep == 32) & (s["skew"] == 1.2)]
    if sub.empty:
        return None
    # a mean over a designed ladder whose random part is the batches: bootstrap the seeds within each B
    ci = bootstrap_ci(sub.gain_pct.to_numpy(), np.mean, strata=sub.B.to_numpy()) if len(seeds) > 1 else None
    per = _per_seed(sub, lambda g: float(g.gain_pct.mean()))
    return Value(float(sub.gain_pct.mean()), ci=ci, n_seeds=len(seeds),
                 note=f"mean over the batch ladder and the seeds; per seed {seeds_text(per)}"
                      + (f"; 95% bootstrap interval {ci[0]:.2f} to {ci[1]:.2f} (seeds resampled within each B)" if ci else ""))


@claim("scale_comm_effect", ["phase_diagram-scale"], "synthetic", _SCALE + ", scored with k_r = 0.0037 us/token", uses=_RM)
def scale_comm_effect(f, reading=None):
    # "changes no conclusion (< 1 p)": a bound, so it must hold on every seed
    s, _ = seeded(f["phase_diagram-scale"], reading)

    def shift(g):
        return float((g.groupby(["ep", "skew"]).gain_comm_pct.mean() - g.groupby(["ep", "skew"]).gain_pct.mean()).abs().max())

    per = _per_seed(s, shift)
    flips = int((s.winner != s.winner_comm).sum())
    return Value(float(per.max()), seeds=seed_range(per), n_seeds=len(per),
                 note=f"largest shift of a mean gain (EP, skew) per seed: {seeds_text(per, '.3f')}; the best fixed "
                      f"policy changes in {flips} of {len(s)} cells")
