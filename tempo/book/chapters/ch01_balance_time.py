"""Chapter 01, *Balance time, not tokens* (``notebooks/01_balance_time.md``): the cost curve's
size, the roofline table of Section 2.2, the toy batch of Fig. 1b and its (b, beta) map, and
the METRO counterexample, with the numbers the chapter's prose quotes, and the instance explorer."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...core.cost import CostModel
from ...core.instance import Instance
from ...theory.bounds import TESTBED_A_HBM, expert_bytes, roofline_floor_us
from .common import sizes

#: the parameter sets of Fig. 1a's cost curves (the paper's offline fits, Table 6)
COST_CURVE_PARAMS = ["dsv3-offline", "dsv2lite-offline", "qwen3-30b-offline"]


def cost_curve_config(profile: str) -> dict:
    """The ``cost_curve`` experiment's config of a book profile: the Table 6 offline fits, 40
    points per curve in the smoke build and 120 otherwise."""
    return {"params": list(COST_CURVE_PARAMS), "points": sizes({"smoke": 40, "full": 120}, profile)}


# ---------------------------------------------------------------------------- roofline (Section 2.2)
#: each expert shape's Table 6 offline fit, whose floor b the roofline table compares
ROOFLINE_FITS = {"DSv3": "dsv3-offline", "DSv2-Lite": "dsv2lite-offline", "Qwen3-30B": "qwen3-30b-offline"}


def roofline_table(fits: dict | None = None, hbm_bytes_per_s: float = TESTBED_A_HBM) -> pd.DataFrame:
    """Section 2.2: each shape's expert bytes (fp8), its roofline floor, the fitted floor b of
    the named parameter set ``fits[shape]``, their ratio, the share of peak bandwidth a kernel
    paying the fitted floor streams at (roofline / fitted), and the fitted inflection n* = b/beta."""
    rows = []
    for shape, params in (fits or ROOFLINE_FITS).items():
        m = CostModel.named(params)
        roof = roofline_floor_us(shape, hbm_bytes_per_s)
        rows.append({"shape": shape, "expert MB (fp8)": expert_bytes(shape) / 1e6, "roofline floor (us)": roof,
                     "fitted b (us)": m.b, "fitted / roofline": m.b / roof,
                     "share of peak bandwidth %": 100 * roof / m.b, "n* (tokens)": m.n_star})
    return pd.DataFrame(rows)


def shape_glue() -> dict:
    """The expert sizes (MB, fp8) and inflections n* of the three shapes, as the exercises quote
    them (``mb_<shape>``, ``ns_<shape>``, and ``ns_dsv3_h200``: DSv3's n* scaled to 4.8 TB/s), for
    :func:`tempo.book.paper.glue`."""
    t = roofline_table().set_index("shape")
    return {"mb_dsv3": t.loc["DSv3", "expert MB (fp8)"], "mb_qwen3": t.loc["Qwen3-30B", "expert MB (fp8)"],
            "mb_dsv2": t.loc["DSv2-Lite", "expert MB (fp8)"], "ns_dsv3": t.loc["DSv3", "n* (tokens)"],
            "ns_qwen3": t.loc["Qwen3-30B", "n* (tokens)"], "ns_dsv2": t.loc["DSv2-Lite", "n* (tokens)"],
            # DSv3's n* on a GPU with 4.8 TB/s and the same compute: n* scales as bandwidth^-1
            "ns_dsv3_h200": t.loc["DSv3", "n* (tokens)"] * TESTBED_A_HBM / 4.8e12}


def roofline_glue(roof: pd.DataFrame) -> dict:
    """What the roofline section's prose glues: the paper's n* and fitted-over-roofline range
    (claim ids), the range of peak-bandwidth shares in ``roof`` (:func:`roofline_table`) and
    DeepSeek-V3's expert size in millions of parameters."""
    return {"p_nstar": "nstar_dsv3", "p_roof_lo": "roofline_ratio_min", "p_roof_hi": "roofline_ratio_max",
            "roof_eff_lo": roof["share of peak bandwidth %"].min(), "roof_eff_hi": roof["share of peak bandwidth %"].max(),
            "dsv3_mparams": expert_bytes("DSv3") / 1e6}


# ---------------------------------------------------------------------------- the toy batch (Fig. 1b)
def toy_headlines(toy: pd.DataFrame) -> dict:
    """The toy_dispatch numbers the chapter's prose quotes: each policy's makespan (us) and
    token-LP's makespan over the time model's."""
    ms = toy.groupby("policy").makespan_us.first()
    if not {"token_lp", "tempo"} <= set(ms.index):
        raise ValueError("toy must be a toy_dispatch result with the token_lp and tempo policies")
    return {**{f"{p}_us": float(v) for p, v in ms.items()}, "token_lp_over_tempo": float(ms["token_lp"] / ms["tempo"])}


#: the (b, beta) grids of the chapter's slider and map: b in us, beta in us per token
SWEEP_GRIDS = {"smoke": (np.linspace(0, 30, 4), np.array([0.02, 0.16, 0.3])),
               "full": (np.arange(0, 30.1, 2.5), np.round(np.arange(0.02, 0.301, 0.02), 3))}


def sweep_config(profile: str) -> dict:
    """The toy_sweep config of a book profile (``gpu`` uses the full grid)."""
    if profile not in ("smoke", "full", "gpu"):
        raise ValueError(f"profile must be 'smoke', 'full' or 'gpu', got {profile!r}")
    b_vals, beta_vals = SWEEP_GRIDS.get(profile, SWEEP_GRIDS["full"])
    return {"b_values": [float(v) for v in b_vals], "beta_values": [float(v) for v in beta_vals]}


def proxy_gain(sweep: pd.DataFrame, threshold: float = 1.01) -> pd.DataFrame:
    """Over a toy_sweep result: where on the (b, beta) map the time model beats both proxies by
    more than ``threshold``, the b/beta band (tokens) of those points, and the largest and
    smallest best-proxy / tempo ratio.  One row."""
    if not {"b", "beta", "policy", "makespan_us"} <= set(sweep.columns):
        raise ValueError("sweep must be a toy_sweep result (columns b, beta, policy, makespan_us)")
    wide = sweep.pivot_table(index=["b", "beta"], columns="policy", values="makespan_us").reset_index()
    ratio = wide[["token_lp", "metro"]].min(axis=1) / wide["tempo"]
    band = (wide.b / wide.beta)[ratio > threshold]
    return pd.DataFrame([{"grid points": len(wide), f"tempo > {100 * (threshold - 1):g}% better than both proxies": len(band),
                          "there, b / beta from (tokens)": band.min(), "to (tokens)": band.max(),
                          "best proxy / tempo, largest": ratio.max(), "best proxy / tempo, smallest": ratio.min()}])


# ---------------------------------------------------------------------------- the METRO counterexample
def dispatcher_makespans(inst: Instance, model: CostModel, policies=("tempo", "metro", "token_lp", "milp")) -> pd.DataFrame:
    """Makespan (us) of each dispatcher on one instance, one row per dispatcher (Eq. 1 pricing),
    and how far above the best of them each lies (%)."""
    from ...policies import solve

    if not policies:
        raise ValueError("policies must name at least one dispatcher")
    df = pd.DataFrame([{"dispatcher": p, "makespan (us)": model.makespan(inst, solve(inst, model, p))}
                       for p in policies])
    return df.assign(**{"above the best %": 100 * (df["makespan (us)"] / df["makespan (us)"].min() - 1)})


#: the tempo configurations the counterexample compares: the library's default, the paper's
#: preset (Section 4.2 as written) and one local search from our water-filling seed with no
#: ensemble and no restarts (a single stage of the solver on its own)
CX_TEMPO = {"tempo (library default)": {},
            "tempo, paper preset (Section 4.2)": {"options": "paper"},
            "tempo, one search from our seed": {"seed": "greedy", "ensemble": False, "restarts": False,
                                                "balancer": False}}


def counterexample_table(inst: Instance, model: CostModel) -> pd.DataFrame:
    """The METRO counterexample's makespans (us), indexed by dispatcher: the three tempo
    configurations of :data:`CX_TEMPO`, METRO, token-LP and the exact MILP, each with how far
    above the best it lies (%)."""
    from ...policies import solve

    def row(label, d):
        G = model.gpu_features(inst, d)[0]
        return {"dispatcher": label, "makespan (us)": model.makespan(inst, d),
                "floors on the busiest GPU": int(G[int(np.argmax(model.gpu_times(inst, d)))])}

    rows = [row(label, solve(inst, model, "tempo", **kw)) for label, kw in CX_TEMPO.items()]
    rows += [row(p, solve(inst, model, p)) for p in ("metro", "token_lp", "milp")]
    df = pd.DataFrame(rows).set_index("dispatcher")
    return df.assign(**{"above the best %": 100 * (df["makespan (us)"] / df["makespan (us)"].min() - 1)})


#: two makespans closer than this (relative) are the same answer
SAME = 1e-9


def counterexample_glue(table: pd.DataFrame) -> tuple[dict, dict]:
    """What the counterexample's passage glues, from :func:`counterexample_table`:
    ``(numbers, words)`` for :func:`tempo.book.paper.glue` and :func:`~tempo.book.paper.glue_text`.
    numbers: each configuration's makespan (us), its excess over METRO (%) and the floors on its
    busiest GPU; words: the verdicts (METRO optimal or not, the default and the single search
    reaching METRO's answer or stopping above it)."""
    ms, floors = table["makespan (us)"], table["floors on the busiest GPU"]
    metro, milp = ms["metro"], ms["milp"]
    default, single = ms["tempo (library default)"], ms["tempo, one search from our seed"]
    numbers = {"cx_metro": metro, "cx_milp": milp, "cx_default": default, "cx_single": single,
               "cx_paper": ms["tempo, paper preset (Section 4.2)"],
               "cx_default_above": 100 * (default / metro - 1), "cx_single_above": 100 * (single / metro - 1),
               "cx_single_floors": floors["tempo, one search from our seed"], "cx_metro_floors": floors["metro"]}

    def reaches(v):
        return "stops above it" if v > metro * (1 + SAME) else "reaches it"

    words = {"cx_optimal": "is the exact optimum" if metro <= milp * (1 + SAME) else "is not the optimum",
             "cx_default_verdict": reaches(default), "cx_single_verdict": reaches(single)}
    return numbers, words


def proxy_gain_glue(gain: pd.DataFrame, b_beta_lo: float = 390 / 7, b_beta_hi: float = 690 / 4) -> tuple[dict, dict]:
    """What the (b, beta) map's passage glues, from :func:`proxy_gain` on the toy sweep:
    ``(numbers, words)``.  numbers: the grid points, the points where tempo beats both proxies,
    the largest and smallest best-proxy / tempo ratio and the band the toy's arithmetic predicts
    (b/beta between 390/7 and 690/4 tokens); words: whether a proxy beats tempo anywhere and the
    b/beta band of tempo's wins."""
    g = gain.iloc[0]
    wins = int(g.filter(like="better than both proxies").iloc[0])
    smallest = g["best proxy / tempo, smallest"]
    numbers = {"gain_points": g["grid points"], "gain_wins": wins, "gain_largest": g["best proxy / tempo, largest"],
               "gain_smallest": smallest, "gain_pred_lo": b_beta_lo, "gain_pred_hi": b_beta_hi}
    lo, hi = g["there, b / beta from (tokens)"], g["to (tokens)"]
    words = {"gain_proxy": "no proxy beats" if smallest >= 1 - SAME else "a proxy beats",
             "gain_band": f"b/β from {lo:.1f} to {hi:.1f} tokens" if wins else "nowhere"}
    return numbers, words


# ---------------------------------------------------------------------------- the instance explorer
def instance_explorer():
    """The page's instance explorer (:func:`tempo.book.explorers.instance_explorer`): the
    reader's own batch of up to 8 experts on up to 4 GPUs, dispatched in the browser by each
    policy, starting from the toy batch of Fig. 1b."""
    from .. import explorers

    return explorers.instance_explorer("toy")


# ---------------------------------------------------------------------------- the running example's regimes
def toy_regime(model: CostModel | None = None, share: float = 0.2) -> tuple[dict, dict]:
    """The toy batch (:func:`.common.toy`) classified as Fig. 5 classifies a batch (the
    ``mixed_regime`` study's rule): an activated expert is flat below the inflection ``n*`` of
    ``model`` (the toy's own model when None) and linear from it; the batch is mixed when at
    least ``share`` of its activated experts are flat and at least ``share`` of its tokens sit in
    linear experts.  Returns ``(numbers, words)``: ``toy4_ns``, ``toy4_flat_pct`` (% of activated
    experts flat), ``toy4_linear_pct`` (% of tokens in linear experts), and ``toy4_mixed``
    ("mixed" or "not mixed"), for a page's glue."""
    from .common import toy

    inst, own = toy()
    m = own if model is None else model
    c = np.asarray(inst.counts, float)
    act = c > 0
    flat = act & (c < m.n_star)
    flat_pct = 100 * flat.sum() / max(act.sum(), 1)
    lin_pct = 100 * c[c >= m.n_star].sum() / max(c.sum(), 1)
    mixed = flat_pct >= 100 * share and lin_pct >= 100 * share
    return ({"toy4_ns": float(m.n_star), "toy4_flat_pct": float(flat_pct), "toy4_linear_pct": float(lin_pct)},
            {"toy4_mixed": "mixed" if mixed else "not mixed"})
