"""Synthetic routing (paper Sections 2.4, 3.2, 5.5, 5.12): Zipf popularity, a top-K router
(:func:`route_tokens`: ``int64[n_tokens, top_k]``, distinct experts per token), popularity
timelines that drift (:func:`popularity_timeline`: ``float64[n_steps, E]``), per-batch counts
(:func:`sample_counts`) and routing statistics for any workload or trace (:func:`routing_stats`).
"""
from __future__ import annotations

import functools

import numpy as np

from .profiles import PROFILES, profile


def _rng(seed) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, (bool, float)) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"rng must be a numpy Generator or an integer seed, got {seed!r}")
    return np.random.default_rng(int(seed))


def _int_arg(name: str, v, lo: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or int(v) < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    return int(v)


def _popularity(popularity, name: str = "popularity", ndim=(1,)) -> np.ndarray:
    p = np.asarray(popularity, dtype=np.float64)
    if p.ndim not in ndim or p.shape[-1] < 1:
        raise ValueError(f"{name} must be a {' or '.join(f'{d}-d' for d in ndim)} array of expert weights, got shape {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueError(f"{name} must be finite and non-negative")
    if np.any(p.sum(axis=-1) <= 0):
        raise ValueError(f"{name} must have positive total weight")
    return p


def zipf_popularity(n_experts: int, skew: float, seed: int | np.random.Generator = 0,
                    shuffle: bool = True) -> np.ndarray:
    """float64[E]: expert popularity ``p_e`` proportional to ``rank^-skew`` (skew 0 = uniform);
    ranks are shuffled over expert ids unless ``shuffle=False``."""
    if n_experts < 1:
        raise ValueError(f"n_experts must be positive, got {n_experts}")
    if skew < 0:
        raise ValueError(f"skew must be non-negative, got {skew}")
    rng = np.random.default_rng(seed)
    p = np.arange(1, n_experts + 1, dtype=np.float64) ** (-float(skew))
    p /= p.sum()
    return rng.permutation(p) if shuffle else p


# ---------------------------------------------------------------------------- the router
_MAX_REDRAWS = 64


# The router: a token picks the top_k largest of log p_e + G_te (G i.i.d. Gumbel, standing in for
# token-dependent logits), which is sampling top_k experts without replacement proportional to p
# (Plackett-Luce).  Drawn sequentially (redrawing a repeat): n_tokens * top_k draws, not
# n_tokens * E Gumbels, same distribution.  Expert e is in a token's set with probability
# pi_e(p, K) (sum pi_e = K): ~K p_e for a cold expert (the independent-pair model of Section
# 3.2's E_eff), saturating at 1 for a hot one, so no expert holds more than 1/K of the pairs.
# ``popularity`` is thus a token's first-choice weight, not the pair share (Zipf(1.0), E = 256,
# top-8: the hottest weighs 16.3%, its pair share is about 9.8%; inclusion_probabilities).
def route_tokens(popularity, n_tokens: int, top_k: int, rng: int | np.random.Generator = 0) -> np.ndarray:
    """int64[n_tokens, top_k]: the logical experts each token is routed to, distinct within
    a row (ordered by choice).  Gumbel-top-k over ``log popularity``, i.e. successive
    sampling without replacement proportional to ``popularity``.

    Vectorised over tokens: column ``j`` is drawn for all tokens by inverse CDF, rows that
    repeat an earlier choice redraw (rejection; exact), and the few rows still repeating after
    64 rounds draw from their exact conditional distribution.
    """
    p = _popularity(popularity)
    n = _int_arg("n_tokens", n_tokens, lo=0)
    k = _int_arg("top_k", top_k)
    E = p.size
    if k > np.count_nonzero(p):
        raise ValueError(f"top_k={k} exceeds the {np.count_nonzero(p)} experts with positive popularity")
    gen = _rng(rng)
    cdf = np.cumsum(p)
    out = np.empty((n, k), np.int64)

    def draw(m):  # u < cdf[-1], so an expert of zero weight (a flat step of the cdf) is never drawn
        return np.minimum(np.searchsorted(cdf, gen.random(m) * cdf[-1], side="right"), E - 1)

    for j in range(k):
        cand = draw(n)
        todo = np.flatnonzero((out[:, :j] == cand[:, None]).any(axis=1)) if j else np.empty(0, np.int64)
        for _ in range(_MAX_REDRAWS):
            if not todo.size:
                break
            c = draw(todo.size)
            cand[todo] = c
            todo = todo[(out[todo, :j] == c[:, None]).any(axis=1)]
        if todo.size:  # exact conditional draw for the rows still stuck
            w = np.broadcast_to(p, (todo.size, E)).copy()
            np.put_along_axis(w, out[todo, :j], 0.0, axis=1)
            cw = np.cumsum(w, axis=1)
            u = gen.random(todo.size) * cw[:, -1]
            cand[todo] = np.minimum((cw <= u[:, None]).sum(axis=1), E - 1)
        out[:, j] = cand
    return out


def expert_counts(routes, n_experts: int) -> np.ndarray:
    """int64[n_experts]: token-expert pairs per expert of a routing ``int[n_tokens, top_k]``."""
    r = np.asarray(routes)
    E = _int_arg("n_experts", n_experts)
    if r.ndim != 2:
        raise ValueError(f"routes must be int[n_tokens, top_k], got shape {r.shape}")
    if r.size and (r.min() < 0 or r.max() >= E):
        raise ValueError(f"routes hold expert ids outside [0, {E})")
    return np.bincount(r.ravel(), minlength=E).astype(np.int64)


def route_counts(popularity, n_tokens: int, top_k: int, rng: int | np.random.Generator = 0) -> np.ndarray:
    """int64[E]: per-expert pair counts of ``n_tokens`` tokens routed by :func:`route_tokens`
    (each entry <= n_tokens; total ``n_tokens * top_k``)."""
    p = _popularity(popularity)
    return expert_counts(route_tokens(p, n_tokens, top_k, rng), p.size)


def inclusion_probabilities(popularity, top_k: int, n_tokens: int = 200_000, rng=0) -> np.ndarray:
    """float64[E]: the router's marginal, ``pi_e`` = probability that a token picks expert
    ``e`` among its ``top_k`` (sums to ``top_k``).  Exact enumeration of the Plackett-Luce
    choice sequences when ``E`` and ``top_k`` are small (at most 50,000 sequences), else a
    Monte Carlo estimate over ``n_tokens`` tokens (standard error <= 0.5/sqrt(n_tokens))."""
    p = _popularity(popularity)
    k = _int_arg("top_k", top_k)
    E = p.size
    if k > np.count_nonzero(p):
        raise ValueError(f"top_k={k} exceeds the {np.count_nonzero(p)} experts with positive popularity")
    p = p / p.sum()
    n_seq = np.prod(np.arange(E - k + 1, E + 1, dtype=np.float64))
    if n_seq > 50_000:
        return route_counts(p, _int_arg("n_tokens", n_tokens), k, rng) / float(n_tokens)
    pi = np.zeros(E)

    def walk(chosen, prob, left):
        if len(chosen) == k:
            pi[list(chosen)] += prob
            return
        for e in range(E):
            if e not in chosen and p[e] > 0:
                walk(chosen + (e,), prob * p[e] / left, left - p[e])

    walk((), 1.0, 1.0)
    return pi


def expected_loads(popularity, top_k: int) -> np.ndarray:
    """float64[E]: the long-run share of the token-expert pairs each expert carries under the
    top-``top_k`` router, ``pi_e / top_k`` (sums to 1, each at most ``1 / top_k``): what an EPLB
    placement is built from (Sections 1, 3.2).  Deterministic (agrees with
    :func:`inclusion_probabilities` to about 1e-10); equal popularities get bit-identical shares.
    Cached per (popularity, top_k); each call returns a fresh array."""
    # Pairs, not router weights p: a hot expert saturates at one pair per token (Zipf(1.5), 256
    # experts, top-8: p about 0.40, pair share about 0.124), so placing from p over-replicates it;
    # SGLang's EPLB places from its recorder's per-expert pair counts.  Not sampled: Monte Carlo
    # noise reorders near-equal experts and so the placement.  Successive sampling is the arrival
    # order of clocks T_j ~ Exp(p_j): pi_e = int p_e exp(-p_e t) P(< K other clocks before t) dt,
    # the count Poisson-binomial, by a prefix/suffix recursion on a log grid of t (trapezoid).
    # Equal shares stay bit-identical so rounding never decides EPLB's ties; the per-batch
    # Dirichlet noise of sample_counts moves the mean only at second order (kappa = 2000).
    p = _popularity(popularity)
    k = _int_arg("top_k", top_k)
    if k > np.count_nonzero(p):
        raise ValueError(f"top_k={k} exceeds the {np.count_nonzero(p)} experts with positive popularity")
    return _expected_loads(tuple((p / p.sum()).tolist()), k).copy()


@functools.lru_cache(maxsize=256)
def _expected_loads(p: tuple, k: int, n_grid: int = 3000) -> np.ndarray:
    w = np.asarray(p, dtype=np.float64)
    E, pos = w.size, w[w > 0]
    t = np.exp(np.linspace(np.log(1e-10 / pos.max()), np.log(50.0 / pos.min()), n_grid))
    q = -np.expm1(-np.outer(w, t))  # [E, T]: P(T_j < t)

    def push(pmf, qj):  # add one clock to a pmf over 0..k-1 earlier clocks (mass beyond k-1 dropped)
        out = pmf * (1.0 - qj)[:, None]
        out[:, 1:] += pmf[:, :-1] * qj[:, None]
        return out

    pre = np.zeros((E, t.size, k))  # pre[e]: pmf of the clocks of experts < e
    cur = np.zeros((t.size, k))
    cur[:, 0] = 1.0
    for j in range(E):
        pre[j] = cur
        cur = push(cur, q[j])
    below = np.empty((E, t.size))  # P(fewer than k of the other clocks before t)
    suf = np.zeros((t.size, k))
    suf[:, 0] = 1.0
    for j in range(E - 1, -1, -1):
        below[j] = (pre[j] * np.cumsum(suf, axis=1)[:, ::-1]).sum(axis=1)
        suf = push(suf, q[j])
    f = w[:, None] * t[None, :] * np.exp(-np.outer(w, t)) * below  # integrand per d(log t)
    lt = np.log(t)
    pi = ((f[:, 1:] + f[:, :-1]) * 0.5 * np.diff(lt)).sum(axis=1)
    _, grp = np.unique(w, return_inverse=True)  # equal popularity -> bit-identical share, so rounding
    pi = (np.bincount(grp, pi) / np.bincount(grp))[grp]  # never breaks a tie in the placement
    out = pi / pi.sum()
    out.setflags(write=False)
    return out


def hottest_pair_share(popularity, top_k: int, n_grid: int = 3000) -> float:
    """The long-run pair share of the most popular expert under the distinct top-``top_k``
    router: ``expected_loads(popularity, top_k).max()`` computed for that expert alone (the same
    clock integral, ``O(E * n_grid * top_k)`` instead of the prefix/suffix sweep over every
    expert; agrees to about 1e-9)."""
    p = _popularity(popularity)
    k = _int_arg("top_k", top_k)
    if k > np.count_nonzero(p):
        raise ValueError(f"top_k={k} exceeds the {np.count_nonzero(p)} experts with positive popularity")
    w = p / p.sum()
    e = int(np.argmax(w))
    pos = w[w > 0]
    t = np.exp(np.linspace(np.log(1e-10 / pos.max()), np.log(50.0 / pos.min()), n_grid))
    pmf = np.zeros((t.size, k))  # clocks of the other experts before t: 0..k-1 of them
    pmf[:, 0] = 1.0
    for j in np.flatnonzero(w > 0):
        if j == e:
            continue
        q = -np.expm1(-w[j] * t)
        nxt = pmf * (1.0 - q)[:, None]
        nxt[:, 1:] += pmf[:, :-1] * q[:, None]
        pmf = nxt
    f = w[e] * t * np.exp(-w[e] * t) * pmf.sum(axis=1)
    pi = float(((f[1:] + f[:-1]) * 0.5 * np.diff(np.log(t))).sum())
    return pi / k


def router_weights(pair_shares, top_k: int, rtol: float = 1e-7, max_iter: int = 50) -> np.ndarray:
    """float64[E]: the router weights ``p`` whose long-run pair shares under the distinct
    top-``top_k`` router are ``pair_shares`` (the inverse of :func:`expected_loads`; sums to 1).

    A recorded profile gives pair shares; routing tokens with those shares as weights would
    understate every hot expert (its inclusion saturates below ``top_k`` times its weight).
    Start from the exponential-clock approximation ``p_e ~ -log(1 - K s_e)`` and iterate
    ``p <- p * s / expected_loads(p)`` until every share is matched within ``rtol`` (relative;
    about five rounds).  Needs every share below ``1 / top_k`` (no expert takes more than one
    pair per token) and at least ``top_k`` positive shares; zero shares stay zero."""
    s = _popularity(pair_shares, "pair_shares")
    k = _int_arg("top_k", top_k)
    s = s / s.sum()
    if k > np.count_nonzero(s):
        raise ValueError(f"top_k={k} exceeds the {np.count_nonzero(s)} experts with a positive pair share")
    if s.max() * k >= 1.0:
        raise ValueError(f"pair_shares hold a share of {s.max():.4f} >= 1/top_k = {1 / k:.4f}: no top-{k} router of "
                         "distinct experts gives it")
    p = -np.log1p(-k * s)
    p /= p.sum()
    pos = s > 0
    for _ in range(_int_arg("max_iter", max_iter)):
        el = _expected_loads.__wrapped__(tuple(p.tolist()), k)  # intermediate rounds stay out of the cache
        if np.abs(el[pos] / s[pos] - 1.0).max() <= rtol:
            return p
        p = np.where(pos, p * s / np.where(pos, el, 1.0), 0.0)
        p /= p.sum()
    raise ValueError(f"router_weights did not match the pair shares within rtol={rtol} in {max_iter} rounds")


def _dirichlet_rows(rng, w: np.ndarray, kappa) -> np.ndarray:
    """Each row of ``w`` (normalised) as the mean of a Dirichlet(kappa * w) draw."""
    w = w / w.sum(axis=-1, keepdims=True)
    if kappa is None:
        return w
    if not np.isfinite(kappa) or kappa <= 0:
        raise ValueError(f"kappa must be positive (or None), got {kappa}")
    q = np.stack([rng.dirichlet(np.maximum(kappa * row, 1e-12)) for row in w])
    q[w == 0] = 0.0  # an expert with zero popularity stays unrouted
    return q / q.sum(axis=-1, keepdims=True)


#: The synthetic routers of :func:`sample_counts` (the ``synthetic_router`` reading of
#: ``data/paper/readings.yaml``): ``"distinct_topk"`` (the default) and ``"independent"``.
ROUTERS = ("distinct_topk", "independent")


def sample_counts(popularity, tokens_per_gpu: int, top_k: int, n_gpus: int, n_batches: int = 1,
                  kappa: float | None = 2000.0, seed: int | np.random.Generator = 0,
                  router: str = "distinct_topk") -> np.ndarray:
    """int64[n_batches, E]: per-expert token-expert pair counts of decode batches.

    A batch has ``tokens_per_gpu * n_gpus`` tokens and ``T = B K n_gpus`` token-expert pairs
    (Section 3.2).  The batch's router weights are ``Dirichlet(kappa * p)`` (kappa = 2000, the
    paper's batch-to-batch fluctuation; ``None`` uses ``p`` itself).  ``popularity`` is one
    vector ``p[E]`` shared by every batch, or a timeline ``p[n_batches, E]`` (e.g.
    :func:`popularity_timeline`), one row per batch.

    ``router`` says how the pairs are drawn from the batch's weights ``q``:

    * ``"distinct_topk"`` (default; serving, the live demo and every study that models a real
      router): each token goes to ``top_k`` *distinct* experts by :func:`route_tokens`, so no
      expert gets more pairs than the batch has tokens;
    * ``"independent"``: the ``T`` pairs are ``T`` independent draws from ``q``, i.e. the
      counts are ``Multinomial(T, q)``.  This is the law behind Section 3.2's
      ``E_eff = sum_e (1 - (1 - p_e)^T) r_e`` (expert ``e`` receives none of the ``T`` draws
      with probability ``(1 - p_e)^T``) and the paper's synthetic grids (the
      ``synthetic_router`` reading); an expert may receive more pairs than there are tokens.
    """
    if router not in ROUTERS:
        raise ValueError(f"router must be one of {', '.join(ROUTERS)}, got {router!r}")
    p = _popularity(popularity, ndim=(1, 2))
    B = _int_arg("tokens_per_gpu", tokens_per_gpu)
    k = _int_arg("top_k", top_k)
    g = _int_arg("n_gpus", n_gpus)
    nb = _int_arg("n_batches", n_batches)
    if p.ndim == 2:
        if p.shape[0] != nb and n_batches != 1:
            raise ValueError(f"popularity has {p.shape[0]} rows but n_batches={nb}")
        nb = p.shape[0]
    else:
        p = np.broadcast_to(p, (nb, p.size))
    if k > np.count_nonzero(p, axis=1).min():
        raise ValueError(f"top_k={k} exceeds the experts with positive popularity")
    rng = _rng(seed)
    q = _dirichlet_rows(rng, p, kappa)
    if router == "independent":
        return np.stack([rng.multinomial(B * k * g, row) for row in q]).astype(np.int64)
    return np.stack([route_counts(row, B * g, k, rng) for row in q])


def pair_shares(popularity, top_k: int, router: str = "distinct_topk") -> np.ndarray:
    """float64[E]: each expert's long-run share of the token-expert pairs under ``router``
    (:data:`ROUTERS`): under independent draws the popularity itself (normalised), under the
    distinct top-K router :func:`expected_loads`.  What an EPLB placement "from long-run
    averages" (Section 3.2) is built from, and the ``p_1`` of the hot-expert boundary."""
    if router not in ROUTERS:
        raise ValueError(f"router must be one of {', '.join(ROUTERS)}, got {router!r}")
    if router == "independent":
        p = _popularity(popularity)
        _int_arg("top_k", top_k)
        return p / p.sum()
    return expected_loads(popularity, top_k)


# ---------------------------------------------------------------------------- recorded popularity profiles
def popularity(n_experts: int | None, skew, seed: int = 0, layer: int | None = None) -> np.ndarray:
    """float64[E]: router weights for ``skew``, a Zipf skew (a number:
    :func:`zipf_popularity` with ``seed`` shuffling the ranks) or a
    profile name (:data:`tempo.world.profiles.PROFILES`: the weights of the profile's layer ``layer``, default
    ``seed mod L``, so seeds that give different Zipf shuffles give different recorded layers).
    ``n_experts`` must match a profile's experts (None: the profile's)."""
    if isinstance(skew, str):
        prof = profile(skew)
        if n_experts is not None and int(n_experts) != prof.n_experts:
            raise ValueError(f"routing profile {skew!r} has {prof.n_experts} experts, not n_experts={n_experts}")
        idx = (int(seed) % prof.n_layers) if layer is None else _int_arg("layer", layer, lo=0)
        if idx >= prof.n_layers:
            raise ValueError(f"layer={layer} is past the profile's {prof.n_layers} layers")
        return prof.weights[idx].copy()
    if isinstance(skew, bool) or not isinstance(skew, (int, float, np.integer, np.floating)):
        raise ValueError(f"skew must be a number or a routing profile name ({', '.join(PROFILES)}), got {skew!r}")
    if n_experts is None:
        raise ValueError("n_experts is needed for a Zipf skew")
    return zipf_popularity(int(n_experts), float(skew), seed=seed)


def sample_profile(name: str, tokens_per_gpu: int, n_gpus: int, n_batches: int = 1, kappa: float | None = 2000.0,
                   seed: int = 0, layers=None) -> tuple[np.ndarray, np.ndarray]:
    """(counts int64[n_batches, E], layer int64[n_batches]): decode batches under the routing
    profile ``name`` (:mod:`tempo.world.profiles`) of
    ``tokens_per_gpu * n_gpus`` tokens routed to the profile's ``top_k`` distinct experts
    (:func:`sample_counts`, Dirichlet(``kappa``) batch fluctuation around
    the layer's weights), batch ``i`` on layer ``layers[i % len(layers)]`` (default: every layer
    of the profile, in order)."""
    prof = profile(name)
    nb = _int_arg("n_batches", n_batches)
    lay = np.arange(prof.n_layers) if layers is None else np.asarray(layers, dtype=np.int64).ravel()
    if lay.size == 0 or lay.min() < 0 or lay.max() >= prof.n_layers:
        raise ValueError(f"layers must be indices in [0, {prof.n_layers}) of the profile's layers, got {layers!r}")
    which = lay[np.arange(nb) % lay.size]
    counts = sample_counts(prof.weights[which], tokens_per_gpu, prof.top_k, n_gpus, n_batches=nb, kappa=kappa,
                           seed=seed)
    return counts, which


# ---------------------------------------------------------------------------- drifting popularity
def drift_sigma(n_experts: int, kappa: float = 2000.0) -> float:
    """Default drift amplitude: the relative std that ``Dirichlet(kappa p)`` gives an expert
    of popularity ``1/E``, ``sqrt((E - 1) / (kappa + 1))`` (the comment above popularity_timeline)."""
    return float(np.sqrt((_int_arg("n_experts", n_experts) - 1) / (float(kappa) + 1)))


# The defaults' sources (none tuned against a claim): kappa = 2000 is the phase diagram's Dirichlet
# batch-to-batch fluctuation (Section 3.2); tau = 300 windows is one minute of 200 ms refresher
# windows (popularity "drifts far slower than 200 ms", Section 5.8; placement rebuilt on a minutes
# horizon, Section 1); sigma = drift_sigma, the relative fluctuation that Dirichlet gives an expert
# of mean popularity 1/E (0.357 at E = 256), so drift and per-batch noise share one scale;
# swap_rate = 0 in the drift-K studies, whose hot-set rotation is the placement's corruption.
def popularity_timeline(base, n_steps: int, tau: float = 300.0, sigma: float | None = None,
                        swap_rate: float = 0.0, hot: int = 16, kappa_for_sigma: float = 2000.0,
                        seed: int | np.random.Generator = 0) -> np.ndarray:
    """float64[n_steps, E]: the router weights ``w_t`` of a drifting timeline around the
    long-run popularity ``base`` (rows sum to 1; feed them to :func:`sample_counts`, which
    adds the per-batch Dirichlet noise and routes).

    ``log w_t = mu_t + z_t`` with ``z`` a stationary AR(1) per expert:
    ``z_0 ~ N(0, sigma^2)``, ``z_t = phi z_{t-1} + sigma sqrt(1 - phi^2) eps_t``,
    ``phi = exp(-1/tau)``, so ``corr(z_t, z_{t+l}) = exp(-l/tau)`` and ``std(z_t) = sigma``
    at every step.  ``mu_0 = log base``; each step, ``Poisson(swap_rate)`` swaps exchange the
    long-run weight of a random expert among the ``hot`` hottest (by ``mu``) with a random
    colder one.  ``sigma=None``: :func:`drift_sigma` of ``(E, kappa_for_sigma)``.  Experts with
    zero base popularity stay at zero.
    """
    b = _popularity(base, "base")
    T = _int_arg("n_steps", n_steps)
    E = b.size
    if not np.isfinite(tau) or tau <= 0:
        raise ValueError(f"tau must be positive (windows), got {tau}")
    sig = drift_sigma(E, kappa_for_sigma) if sigma is None else float(sigma)
    if not np.isfinite(sig) or sig < 0:
        raise ValueError(f"sigma must be non-negative, got {sigma}")
    if not np.isfinite(swap_rate) or swap_rate < 0:
        raise ValueError(f"swap_rate must be non-negative, got {swap_rate}")
    h = _int_arg("hot", hot)
    if swap_rate > 0 and h >= np.count_nonzero(b):
        raise ValueError(f"hot={h} must be smaller than the {np.count_nonzero(b)} experts with positive base popularity")
    rng = _rng(seed)
    phi = float(np.exp(-1.0 / tau))
    innov = sig * np.sqrt(1.0 - phi * phi)
    alive = b > 0
    mu = np.where(alive, np.log(np.where(alive, b, 1.0)), -np.inf)
    z = sig * rng.standard_normal(E)
    out = np.empty((T, E))
    for t in range(T):
        if t:
            z = phi * z + innov * rng.standard_normal(E)
            for _ in range(rng.poisson(swap_rate) if swap_rate else 0):
                order = np.argsort(-mu, kind="stable")
                cold = order[h:][np.isfinite(mu[order[h:]])]
                if not cold.size:
                    break
                i, j = order[rng.integers(h)], cold[rng.integers(cold.size)]
                mu[i], mu[j] = mu[j], mu[i]
        x = mu + z
        w = np.exp(x - x[np.isfinite(x)].max())
        out[t] = w / w.sum()
    return out


def drift_autocorrelation(tau: float, lag: int = 1) -> float:
    """The documented lag-``lag`` autocorrelation of the log-popularity drift ``z``:
    ``exp(-lag / tau)``."""
    return float(np.exp(-lag / tau))


# ---------------------------------------------------------------------------- routing statistics
def routing_stats(counts, top_k: int, n_star: float | None = None, lag: int = 1, placement=None,
                  n_gpus: int | None = None) -> dict:
    """Statistics of a routing workload or trace, ``counts`` int[batches, E] or
    int[steps, layers, E] (per layer, then pooled).  Returns a dict of floats (per-batch values
    averaged; the hottest share also as its max) plus ``batches`` and ``top_k``:

    * ``hottest_share`` (pairs; at most 1/K), ``hottest_over_tokens`` (at most 1),
      ``max_over_mean`` (hottest load / mean load), ``effective_experts`` (exp of the pair
      shares' entropy);
    * ``lag_corr``: Pearson correlation of per-expert load ``lag`` batches apart;
      ``lag_corr_dev`` the same on deviations from each expert's mean (about -1/(batches-1) for
      independent batches);
    * with ``placement`` (``phy2log`` of one layer, GPU-major) and ``n_gpus``:
      ``gpu_max_over_mean`` under EPLB's even split over replicas;
    * with ``n_star`` (Fig. 5's regimes): ``flat_activation_share`` (``0 < n_e < n*``),
      ``linear_token_share`` (pairs at ``n_e >= n*``), ``mixed_share`` (both >= 20%).
    """
    # lag_corr_dev is what a one-batch-old solution knows about the next batch beyond the
    # long-run popularity
    c = np.asarray(counts)
    if c.ndim == 2:
        c = c[:, None, :]
    if c.ndim != 3 or c.shape[0] < 1:
        raise ValueError(f"counts must be int[batches, E] or int[steps, layers, E], got shape {np.shape(counts)}")
    if not np.all(np.isfinite(c)) or np.any(c < 0):
        raise ValueError("counts must be finite and non-negative")
    k = _int_arg("top_k", top_k)
    lag = _int_arg("lag", lag)
    c = c.astype(np.float64)
    S, L, E = c.shape
    tot = c.sum(axis=2)
    ok = tot > 0
    if not ok.any():
        raise ValueError("counts hold no routed pairs")
    share = np.where(ok[..., None], c / np.where(ok, tot, 1)[..., None], 0.0)
    hot = share.max(axis=2)[ok]
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(share > 0, share * np.log(share), 0.0).sum(axis=2)[ok]
    out = {"batches": int(ok.sum()), "top_k": k, "ceiling": 1.0 / k,
           "hottest_share": float(hot.mean()), "hottest_share_max": float(hot.max()),
           "hottest_over_tokens": float((c.max(axis=2)[ok] / (tot[ok] / k)).max()),
           "max_over_mean": float((hot * E).mean()), "effective_experts": float(np.exp(ent).mean())}
    cors = []
    for layer in range(L):
        for t in range(S - lag):
            a, b = c[t, layer], c[t + lag, layer]
            if a.std() > 0 and b.std() > 0:
                cors.append(np.corrcoef(a, b)[0, 1])
    out["lag_corr"] = float(np.mean(cors)) if cors else float("nan")
    dev = c - c.mean(axis=0, keepdims=True)
    cors = [np.corrcoef(dev[t, layer], dev[t + lag, layer])[0, 1] for layer in range(L) for t in range(S - lag)
            if dev[t, layer].std() > 0 and dev[t + lag, layer].std() > 0]
    out["lag_corr_dev"] = float(np.mean(cors)) if cors and S > 2 else float("nan")
    if placement is not None:
        g = _int_arg("n_gpus", n_gpus)
        phy = np.asarray(placement).reshape(-1)
        if phy.size % g or phy.min() < 0 or phy.max() >= E:
            raise ValueError(f"placement must hold {g} GPUs' slots of expert ids in [0, {E})")
        reps = np.bincount(phy, minlength=E)
        if np.any((reps == 0) & (c.sum(axis=(0, 1)) > 0)):
            raise ValueError("placement leaves a routed expert without a replica")
        gpu = np.repeat(np.arange(g), phy.size // g)
        onehot = np.zeros((E, g))
        np.add.at(onehot, (phy, gpu), 1.0 / np.maximum(reps[phy], 1))
        per_gpu = c @ onehot  # [S, L, g]
        m = per_gpu.mean(axis=2)[ok]
        out["gpu_max_over_mean"] = float((per_gpu.max(axis=2)[ok] / m).mean())
    if n_star is not None:
        if not np.isfinite(n_star) or n_star <= 0:
            raise ValueError(f"n_star must be positive, got {n_star}")
        act = c > 0
        flat = act & (c < n_star)
        fa = (flat.sum(axis=2) / np.maximum(act.sum(axis=2), 1))[ok]
        lt = (np.where(c >= n_star, c, 0).sum(axis=2) / np.where(ok, tot, 1))[ok]
        out.update({"flat_activation_share": float(fa.mean()), "linear_token_share": float(lt.mean()),
                    "mixed_share": float(((fa >= 0.2) & (lt >= 0.2)).mean())})
    return out


# ---------------------------------------------------------------------------- routing traces
# Trace I/O (write_trace, read_trace, the SGLang recorder import) is tempo.world.traces.
def synthetic_trace(steps: int, layers: int, n_experts: int, tokens_per_gpu: int, top_k: int = 8,
                    n_gpus: int = 8, skew: float | str = 1.0, drift: float = 0.05, seed: int = 0):
    """A synthetic routing trace in the :func:`tempo.world.traces.write_trace` layout, for demos and tests: per
    layer a Zipf(skew) popularity (or, for a profile name, the profile's layer ``l mod L``
    router weights; ``n_experts`` must be the profile's) that drifts slowly (each step
    multiplies it by ``exp(drift * N(0, 1))`` per expert) and decode batches drawn around it.
    Returns (counts int64[steps, layers, experts], metadata) with ``source = "synthetic"``,
    ``step_kind = "batch"``."""
    rng = np.random.default_rng(seed)
    counts = np.zeros((steps, layers, n_experts), np.int64)
    for layer in range(layers):
        if isinstance(skew, str):
            p = popularity(n_experts, skew, layer=layer % profile(skew).n_layers)
        else:
            p = zipf_popularity(n_experts, skew, seed=rng)
        for s in range(steps):
            p = p * np.exp(drift * rng.standard_normal(n_experts))
            p /= p.sum()
            counts[s, layer] = sample_counts(p, tokens_per_gpu, top_k, n_gpus, seed=rng)[0]
    meta = {"source": "synthetic", "top_k": top_k, "n_gpus": n_gpus, "skew": skew, "drift": drift, "seed": seed,
            "step_kind": "batch", "step_tokens": [int(tokens_per_gpu * n_gpus)] * int(steps)}
    return counts, meta
