"""Fitting the cost models to measured per-GPU times (paper Section 2.2, Appendix B).

``fit_cost_model(samples, form) -> Fit(model, error)``; ``samples`` columns ``G`` (activated
experts), ``N`` (tokens), ``T`` (128-token tiles, tile form only), ``t_us``:

* ``"max_affine"`` -- Eq. 1, ``max(a + b*G, c + beta*N)``;
* ``"tile"`` -- Eq. 2, ``max(a + b*G + b2*(T - G), c + beta*N)``;
* ``"three_term"`` -- Eq. 4, ``max(a + b*G, c + beta*N, c2 + gamma*N)``.

``intercept=False`` fits ``a = c = 0`` (Table 6).  ``error``: mean ``|model - t| / t``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from ..core.cost import CostModel

FORMS = ("max_affine", "tile", "three_term")


def _designs(df: pd.DataFrame, form: str, intercept: bool):
    G = df.G.to_numpy(float)
    N = df.N.to_numpy(float)
    one = np.ones_like(G)
    cols = (lambda *c: np.column_stack(((one,) if intercept else ()) + c))
    if form == "max_affine":
        return [cols(G), cols(N)]
    if form == "tile":
        return [cols(G, df["T"].to_numpy(float) - G), cols(N)]
    return [cols(G), cols(N), cols(N)]


@dataclass
class Fit:
    """A fitted model: ``model`` (CostModel), ``error`` (mean relative error), the piece each
    sample was assigned to and the iterations used."""

    model: CostModel
    error: float
    pieces: np.ndarray
    iterations: int
    form: str

    def __iter__(self):  # ``model, err = fit_cost_model(...)``
        return iter((self.model, self.error))


def _to_model(form: str, params: list, intercept: bool, name: str) -> CostModel:
    p = [np.r_[0.0, q] if not intercept else q for q in params]
    if form == "max_affine":
        return CostModel(a=p[0][0], b=p[0][1], c=p[1][0], beta=p[1][1], name=name)
    if form == "tile":
        return CostModel(a=p[0][0], b=p[0][1], b2=p[0][2], c=p[1][0], beta=p[1][1], name=name)
    # three-term: the steeper of the two N-pieces is the traffic piece by convention
    (c, beta), (c2, gamma) = sorted([tuple(p[1]), tuple(p[2])], key=lambda q: q[1])
    return CostModel(a=p[0][0], b=p[0][1], c=c, beta=beta, c2=c2, gamma=gamma, name=name)


def _predict(designs, params) -> np.ndarray:
    return np.column_stack([D @ q for D, q in zip(designs, params)])


def _initial_splits(df: pd.DataFrame, form: str, k: int) -> list[np.ndarray]:
    n = (df.N / df.G.clip(lower=1)).to_numpy(float)
    qs = np.quantile(n, [0.2, 0.35, 0.5, 0.65, 0.8])
    inits = []
    for q in qs:
        lab = (n > q).astype(int)  # flat below the split, linear above
        if k == 3:
            q2 = np.quantile(df.N, 0.8)
            lab = np.where(df.N.to_numpy() > q2, 2, lab)
        inits.append(lab)
    return inits


def fit_cost_model(samples: pd.DataFrame, form: str = "max_affine", intercept: bool = True,
                   max_iter: int = 50, name: str = "", polish: bool = True) -> Fit:
    """Fit a cost model to measured per-GPU times; returns :class:`Fit` (unpacks as
    ``model, error``).  ``polish=False`` keeps the plain alternating fit."""
    # Appendix B's alternating assignment: each sample to the piece predicting the largest time,
    # each piece refit by least squares on its samples, until the assignment stops (max_iter),
    # from several initial splits, the best kept; then a polish of the same objective over the max
    # model.  Two choices the paper leaves open: squares weighted by 1/t (relative error: the grid
    # spans three decades of time, unweighted squares fit only the largest cells) and
    # non-negative (nnls: every parameter is a cost).
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, got {form!r}")
    need = {"G", "N", "t_us"} | ({"T"} if form == "tile" else set())
    missing = need - set(samples.columns)
    if missing:
        raise ValueError(f"samples lack column(s) {sorted(missing)}; need G, N, T (tile form) and t_us")
    df = samples[samples.t_us > 0].reset_index(drop=True)
    if len(df) < 6:
        raise ValueError(f"need at least 6 positive samples to fit, got {len(df)}")
    t = df.t_us.to_numpy(float)
    w = 1.0 / t  # relative least squares
    designs = _designs(df, form, intercept)
    k = len(designs)
    best = None
    for lab in _initial_splits(df, form, k):
        params = [np.zeros(D.shape[1]) for D in designs]
        it = 0
        for it in range(1, max_iter + 1):
            for j, D in enumerate(designs):
                m = lab == j
                if m.sum() >= D.shape[1]:
                    params[j] = nnls(D[m] * w[m, None], t[m] * w[m])[0]
            new = np.argmax(_predict(designs, params), axis=1)
            if np.array_equal(new, lab):
                break
            lab = new
        pred = _predict(designs, params).max(axis=1)
        err = float(np.mean(np.abs(pred - t) / t))
        if best is None or err < best[0]:
            best = (err, [p.copy() for p in params], lab.copy(), it)
    err, params, lab, it = best
    if polish:
        params, lab, err = _polish(designs, params, t)
    return Fit(_to_model(form, params, intercept, name), err, lab, it, form)


def _polish(designs, params, t):
    """Refine the alternating-assignment solution by non-negative least squares on the max
    model itself (relative residuals), which also settles the samples near the kink that
    the hard assignment may give to the wrong piece."""
    from scipy.optimize import least_squares

    sizes = [len(p) for p in params]
    x0 = np.concatenate(params)

    def split(x):
        return np.split(x, np.cumsum(sizes)[:-1])

    def resid(x):
        return (_predict(designs, split(x)).max(axis=1) - t) / t

    res = least_squares(resid, x0, bounds=(0, np.inf), method="trf", x_scale="jac")
    new = split(res.x) if np.sum(res.fun ** 2) <= np.sum(resid(x0) ** 2) else split(x0)
    pred = _predict(designs, new)
    return new, np.argmax(pred, axis=1), float(np.mean(np.abs(pred.max(axis=1) - t) / t))


def fit_error(model: CostModel, samples: pd.DataFrame) -> float:
    """Mean relative error of ``model`` on ``samples`` (columns G, N, T, t_us)."""
    T = samples["T"] if "T" in samples else None
    pred = model.time(samples.G, samples.N, T)
    return float(np.mean(np.abs(pred - samples.t_us) / samples.t_us))


def bootstrap(samples: pd.DataFrame, form: str = "max_affine", n_boot: int = 200, cluster: str = "G",
              seed: int = 0, intercept: bool = True) -> pd.DataFrame:
    """Cluster bootstrap of the fitted parameters (Section 5.2's identifiability analysis):
    resample whole clusters (default: all cells of one G value) with replacement and refit.
    One row per replicate with a, b, b2, c, beta (and c2, gamma) and n*."""
    rng = np.random.default_rng(seed)
    groups = [g for _, g in samples.groupby(cluster)]
    if len(groups) < 2:
        raise ValueError(f"need at least two {cluster!r} clusters to bootstrap")
    rows = []
    for _ in range(n_boot):
        pick = rng.integers(0, len(groups), len(groups))
        df = pd.concat([groups[i] for i in pick], ignore_index=True)
        try:
            m = fit_cost_model(df, form, intercept=intercept).model
        except ValueError:
            continue
        rows.append({"a": m.a, "b": m.b, "b2": m.b2, "c": m.c, "beta": m.beta, "c2": m.c2, "gamma": m.gamma,
                     "n_star": m.n_star})
    return pd.DataFrame(rows)


def proxy_spreads(samples: pd.DataFrame, rel_tol: float = 0.05) -> pd.DataFrame:
    """Fig. 9's proxy-equivalence sets on a measured grid: cells with the same total tokens N
    (within ``rel_tol``) but different G, and cells with the same G but different N; the
    spread of each set is max t / min t."""
    rows = []
    d = samples.sort_values("N").reset_index(drop=True)
    logN = np.log(d.N.to_numpy(float))
    for i in range(len(d)):
        m = np.abs(logN - logN[i]) <= np.log1p(rel_tol)
        s = d[m]
        if s.G.nunique() > 1:
            rows.append({"set": "same N, different G", "key": float(d.N[i]), "size": len(s),
                         "spread": s.t_us.max() / s.t_us.min()})
    for g, s in samples.groupby("G"):
        if s.N.nunique() > 1:
            rows.append({"set": "same G, different N", "key": float(g), "size": len(s),
                         "spread": s.t_us.max() / s.t_us.min()})
    return pd.DataFrame(rows).drop_duplicates(["set", "key"])


def tile_steps(samples: pd.DataFrame, boundaries=(1, 2), tile: int = 128) -> pd.DataFrame:
    """Fig. 4's staircase steps: per G, the jump in measured time from ``k*tile`` to
    ``k*tile + 1`` tokens per expert, in percent (columns G, boundary, step_pct); cells
    missing from the recording are skipped."""
    rows = []
    for g, s in samples.groupby("G"):
        by_n = s.groupby("n").t_us.first()
        for k in boundaries:
            lo, hi = k * tile, k * tile + 1
            if lo in by_n.index and hi in by_n.index:
                rows.append({"G": g, "boundary": lo, "step_pct": 100 * (by_n[hi] / by_n[lo] - 1)})
    return pd.DataFrame(rows, columns=["G", "boundary", "step_pct"])


def regime_evidence(samples: pd.DataFrame, n_star: float, G: int = 1) -> dict:
    """Model-free evidence of the two regimes on one G column of a recording: how much the
    measured time varies from 2 to ``n_star / 2`` tokens (``flat_variation``, relative) and
    the least-squares slope in us per token from ``4 * n_star`` on (``linear_slope``).
    One token is left out of the flat check: on CPUs a single row takes a matrix-vector
    path (its time is reported as ``t_one``)."""
    col = samples[samples.G == G].groupby("n").t_us.median()
    flat = col[(col.index >= 2) & (col.index <= max(2.0, n_star / 2))]
    lin = col[col.index >= 4 * n_star]
    return {"flat_hi_n": max(2.0, n_star / 2), "lin_lo_n": 4 * n_star,
            "flat_variation": float(flat.max() / flat.min() - 1) if len(flat) > 1 else float("nan"),
            "linear_slope": float(np.polyfit(lin.index, lin.values, 1)[0]) if len(lin) > 2 else float("nan"),
            "t_one": float(col.get(1, float("nan")))}
