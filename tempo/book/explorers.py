"""The book's two explorers: what the build embeds in a page for the JavaScript of
``_static/explorers/`` to run on, with no kernel and no network.

* The **instance explorer** (chapter 01, :func:`instance_explorer`): the reader's own small batch
  (up to 8 experts on up to 4 GPUs) dispatched by every policy of
  ``_static/explorers/policies.js``, one routine per library policy (tested against the library
  in ``tests/test_explorers.py``), TEMPO's paper preset among them (``tempo_fast.js``, which the
  page steps through move by move) and the exact optimum of Eq. 3.  The page gets the named parameter sets
  of ``data/params/cost_params.csv``, a few starting batches and the policies' colours.
* The **phase explorer** (chapter 04, :func:`phase_explorer`): the ``phase_grid`` study's
  results (:mod:`tempo.studies.phase_grid`) as compact columns, one per (shape, EP size,
  replication, skew), with each column's analytic flip boundary B*
  (:func:`tempo.theory.bounds.flip_boundary`) and its replicas per popularity rank, from which
  the page recomputes B* for a reader's own n*; TEMPO under the chapter reading's preset and
  under the library's default, each named; the recorded routing profiles as presets, placed at
  their Zipf-equivalent skew.

Each explorer is one ``<div class="tempo-explorer">`` holding its data as JSON in a
``<script type="application/json">``; the scripts (``_config.yml``: ``html_js_files``) find it
when the page loads."""
from __future__ import annotations

import html
import json
import math

import numpy as np
import pandas as pd

from ..core.cost import CostModel
from ..core.params import params_table
from ..paper.readings import Reading
from ..policies import spec
from ..studies.phase_grid import phase_grid_means
from ..studies.readings import tempo_options
from ..studies.scenarios import zipf_placement
from ..studies.simulator import FIXED, SHAPES, TIE_REL
from ..theory.bounds import flip_boundary
from ..world.workloads import zipf_popularity

#: the rows of the instance explorer, in its order (policies.js ``ORDER``), and the library policy
#: each runs: ``tempo_paper`` is tempo_fast's paper preset (``_static/explorers/tempo_fast.js``),
#: ``optimum`` the exact optimum of Eq. 3 (what ``milp`` computes)
INSTANCE_POLICIES = {"static": "static", "static_sglang": "static_sglang", "uniform": "uniform", "metro": "metro",
                     "llep": "llep", "round_robin": "round_robin", "token_lp": "token_lp", "tempo_paper": "tempo",
                     "optimum": "milp"}

#: the instance explorer's starting batches: counts, GPUs, replica sets (None: full replication)
#: and a model (own a, b, c, beta) or a named parameter set
INSTANCE_PRESETS = {
    "toy": {"label": "Chapter 01's toy batch (Fig. 1b)", "counts": [600, 30, 30, 30, 30, 30, 30], "n_gpus": 2,
            "replicas": None, "params": "own", "model": {"a": 0.0, "b": 15.0, "c": 0.0, "beta": 0.1}},
    "metro_wins": {"label": "Chapter 01's counterexample: METRO is optimal", "counts": [54, 297, 54, 27, 54, 27],
                   "n_gpus": 2, "replicas": None, "params": "own", "model": {"a": 0.0, "b": 13.9, "c": 0.0, "beta": 0.156}},
    "restricted": {"label": "A restricted placement, DSv3 fit", "counts": [400, 150, 90, 60, 40, 30, 20, 10], "n_gpus": 4,
                   "replicas": [[0, 1, 2, 3], [1, 2], [0], [1], [2], [3], [3], [0]], "params": "dsv3-offline"},
    "above_optimum": {"label": "A batch where TEMPO's paper preset stops above the optimum", "counts": [37, 11, 35, 555, 123],
                      "n_gpus": 2, "replicas": None, "params": "own", "model": {"a": 0.0, "b": 5.0, "c": 0.0, "beta": 0.05}},
}


def _html(kind: str, data: dict, title: str) -> str:
    """The explorer's element: a placeholder (what a reader without the scripts sees) and the data."""
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    return (f'<div class="tempo-explorer" data-explorer="{kind}">'
            f'<div class="tempo-explorer-ui"><p><em>{html.escape(title)}: this explorer runs in the built book '
            f'(its scripts are served from the book\'s _static folder).</em></p></div>'
            f'<script type="application/json" class="tempo-explorer-data">{payload}</script></div>')


class ExplorerHTML:
    """What a notebook cell displays: the explorer's HTML (``text/html``)."""

    def __init__(self, html_text: str, data: dict):
        self.html = html_text
        self.data = data

    def _repr_html_(self) -> str:
        return self.html


# ---------------------------------------------------------------------------- the instance explorer
def param_sets() -> list[dict]:
    """Every named parameter set of ``data/params/cost_params.csv`` (Tables 6 and 7) as the page
    uses it: name, a, b, c, beta, c2 and gamma (None without the traffic piece), b2 (the tile
    term, which the page does not model), the paper's row (source)."""

    out = []
    for name, row in params_table().iterrows():
        def num(key, default=None):
            v = row[key]
            return default if pd.isna(v) else float(v)

        out.append({"name": str(name), "a": num("a", 0.0), "b": num("b", 0.0), "c": num("c", 0.0), "beta": num("beta", 0.0),
                    "c2": num("c2"), "gamma": num("gamma"), "b2": num("b2", 0.0), "source": str(row["source"])})
    return out


def instance_explorer_data(default_preset: str = "toy") -> dict:
    """The instance explorer's data: named parameter sets, presets (:data:`INSTANCE_PRESETS`),
    the starting preset and each policy's chart colour from the registry."""

    if default_preset not in INSTANCE_PRESETS:
        raise ValueError(f"default_preset must be one of {', '.join(INSTANCE_PRESETS)}, got {default_preset!r}")
    sets = param_sets()
    names = {s["name"] for s in sets}
    for key, p in INSTANCE_PRESETS.items():
        if p["params"] != "own" and p["params"] not in names:
            raise ValueError(f"preset {key!r} names an unknown parameter set {p['params']!r}")
    return {"params": sets, "presets": INSTANCE_PRESETS, "default_preset": default_preset,
            "colors": {row: spec(p).color for row, p in INSTANCE_POLICIES.items()}}


def instance_explorer(default_preset: str = "toy") -> ExplorerHTML:
    """Chapter 01's instance explorer, starting from ``default_preset`` (the toy of Fig. 1b)."""
    data = instance_explorer_data(default_preset)
    return ExplorerHTML(_html("instance", data, "Instance explorer"), data)


# ---------------------------------------------------------------------------- the phase explorer
def _rle(values) -> list[list[int]]:
    out: list[list[int]] = []
    for v in values:
        v = int(v)
        if out and out[-1][0] == v:
            out[-1][1] += 1
        else:
            out.append([v, 1])
    return out


def column_boundary(shape: str, ep: int, replication: float, skew: float, seed: int = 0, reading=None) -> dict:
    """One grid column's analytic flip boundary (Section 3.2) at the shape's Table 6 n*, and its
    replicas per popularity rank (run-length ``[[replicas, count], ...]``, hottest first), from
    which the page recomputes B* for another n* (:func:`tempo.theory.bounds.flip_boundary` on
    the phase diagram's placement, as :func:`tempo.studies.simulator.boundary_table` does).
    ``reading`` (the grid's, default the paper's): the router and placement the grid ran under.
    The page computes B* from the router weights ``p``: the reading's ``hot_share`` must give
    them (the pair shares under independent draws are ``p`` itself), else ``ValueError``."""

    reading = Reading.of(reading) if reading is not None else Reading.paper()
    if reading["hot_share"] == "pair_share" and reading["synthetic_router"] != "independent":
        raise ValueError("reading: the explorer's B* uses the router weights; hot_share=pair_share under "
                         f"synthetic_router={reading['synthetic_router']!r} needs the pair shares")
    E, K, params = SHAPES[shape]
    pop = zipf_popularity(E, skew, seed=seed)
    reps = np.bincount(zipf_placement(E, skew, seed, K, ep, replication, reading["synthetic_router"],
                                      reading["placement_loads"]), minlength=E)
    bstar = flip_boundary(pop, reps, CostModel.named(params).n_star, K, ep)[0]
    return {"bstar": float(bstar), "rle": _rle(reps[np.argsort(-pop, kind="stable")])}


def _tok(a: np.ndarray) -> list:
    """Token counts to 0.1 token, whole ones written as integers (a shorter page)."""
    r = np.round(np.asarray(a, dtype=np.float64), 1)
    return np.frompyfunc(lambda v: int(v) if v == int(v) else float(v), 1, 1)(r).tolist()


def _sig(v: float, digits: int = 12) -> float:
    """``v`` to ``digits`` significant digits (the page's copy of a result: equal to it to 1e-11)."""
    return float(f"{v:.{digits}g}")


def phase_explorer_data(grid: pd.DataFrame, profile: str, config: dict | None = None,
                        profiles: pd.DataFrame | None = None) -> dict:
    """The phase explorer's data from a ``phase_grid`` result: the grid's axes (read from the
    result, so the page shows whatever grid the build computed), per shape its routing (experts,
    top-k) and Table 6 fit, and per (shape, EP size, replication, skew) column: each policy's
    mean makespan per batch size (``ms``, the build's numbers to 12 significant digits:
    :func:`tempo.studies.phase_grid.phase_grid_means`), the busiest GPU's activated replicas
    (``G``) and tokens (``N``, to 0.1 token) per batch size and batch, also for TEMPO's n* ladder
    (``tempo_nstar``: per batch size, n* and batch), and the column's B* and replicas per rank
    (:func:`column_boundary`, under ``config["reading"]``, default the paper's: the grid's).
    TEMPO's presets: ``tempo`` (the reading's) and, when the grid holds them, ``tempo_default``
    (the library's), each named in ``presets``.  ``profiles`` (chapter 04's table of the named
    routing profiles on the phase diagram) become the page's routing presets, each placed on its
    Zipf-equivalent skew."""

    need = {"shape", "ep", "replication", "skew", "B", "batch", "policy", "n_star_solved", "max_G", "max_N", "makespan_us"}
    if not isinstance(grid, pd.DataFrame) or not need <= set(grid.columns) or grid.empty:
        raise ValueError(f"grid must be a non-empty phase_grid result (columns {sorted(need)})")
    seed = int((config or {}).get("seed", 0))
    reading = (config or {}).get("reading")
    keys = ["shape", "ep", "replication", "skew"]
    tokens = sorted(int(b) for b in grid.B.unique())
    batches = int(grid.batch.max()) + 1
    lad = grid[grid.policy == "tempo_nstar"]
    n_stars = sorted(float(v) for v in lad.n_star_solved.unique())
    fixed = list(FIXED)
    pols = fixed + ["tempo"] + (["tempo_default"] if (grid.policy == "tempo_default").any() else [])
    means = {k: g for k, g in phase_grid_means(grid).groupby(keys, sort=True)}
    main = {k: g for k, g in grid[grid.policy.isin(pols)].groupby(keys, sort=True)}
    ladder = {k: g for k, g in lad.groupby(keys, sort=True)}
    nb, nt, nn = batches, len(tokens), len(n_stars)
    columns = []
    for key, col in main.items():
        sh, ep, rep, sk = key
        if len(col) != nt * nb * len(pols):
            raise ValueError(f"phase_grid column {key} is incomplete ({len(col)} rows, expected {nt * nb * len(pols)})")
        entry = {"shape": sh, "ep": int(ep), "replication": float(rep), "skew": float(sk),
                 **column_boundary(sh, int(ep), float(rep), float(sk), seed, reading)}
        m = means[key].set_index("B").loc[tokens]
        entry["ms"] = {p: [_sig(v) for v in m[f"ms_{p}"]] for p in pols}
        c = col.sort_values(["policy", "B", "batch"]).set_index("policy")
        entry["G"] = {p: c.loc[p].max_G.to_numpy().reshape(nt, nb).astype(int).tolist() for p in pols}
        entry["N"] = {p: _tok(c.loc[p].max_N.to_numpy().reshape(nt, nb)) for p in pols}
        if nn:
            L = ladder[key].sort_values(["B", "n_star_solved", "batch"])
            entry["G"]["tempo_nstar"] = L.max_G.to_numpy().reshape(nt, nn, nb).astype(int).tolist()
            entry["N"]["tempo_nstar"] = _tok(L.max_N.to_numpy().reshape(nt, nn, nb))
        else:
            entry["G"]["tempo_nstar"] = entry["N"]["tempo_nstar"] = [[] for _ in tokens]
        columns.append(entry)
    shape_rows = []
    for sh in [s for s in SHAPES if s in set(grid["shape"])]:
        E, K, params = SHAPES[sh]
        m = CostModel.named(params)
        shape_rows.append({"label": sh, "E": E, "K": K, "params": params, "b": m.b, "beta": m.beta, "n_star": m.n_star})
    preset = tempo_options(Reading.of(reading) if reading is not None else Reading.paper())
    presets = [{"key": "tempo", "name": preset["options"], "label": _preset_label(preset)}]
    if "tempo_default" in pols:
        presets.append({"key": "tempo_default", "name": "default",
                        "label": 'the library\'s default: tempo.solve(inst, model, "tempo")'})
    return {"profile": profile, "seed": seed, "batches": batches, "tokens": tokens, "n_stars": n_stars,
            "eps": sorted(int(v) for v in grid.ep.unique()), "replications": sorted(float(v) for v in grid.replication.unique()),
            "skews": sorted(float(v) for v in grid["skew"].unique()), "shapes": shape_rows, "fixed": fixed,
            "codes": dict(FIXED), "colors": {p: spec(p if p in FIXED else "tempo").color for p in pols},
            "columns": columns,
            # the presets TEMPO ran with (the tempo_preset reading's, the library default) and Fig. 6's tie
            # tolerance, for the page's labels
            "tempo_preset": preset["options"], "presets": presets, "tie_rel": TIE_REL,
            "profiles": _profile_rows(profiles, set(grid["shape"]))}


def _preset_label(options: dict) -> str:
    """The ``tempo.solve`` call of the reading's TEMPO (:func:`tempo.studies.readings.tempo_options`)."""
    args = ", ".join(f"{k}={v!r}".replace("'", '"') for k, v in options.items())
    name = {"paper": "the paper's preset (Section 4.2 as written)", "default": "the library's default preset"}
    return f'{name.get(options["options"], options["options"])}: tempo.solve(inst, model, "tempo", {args})'


def _profile_rows(profiles: pd.DataFrame | None, shapes: set) -> list[dict]:
    """The named routing profiles placed on the grid (chapter 04's table,
    :func:`tempo.book.chapters.ch04_routing.profiles_on_phase_diagram`): per profile its shape,
    max/mean pair share (median layer), Zipf-equivalent skew, the grid's nearest skew column and
    its analytic B*; only the profiles whose shape the grid holds."""
    if profiles is None:
        return []
    from ..world.profiles import PROFILES

    need = {"shape", "max/mean (median)", "Zipf-equivalent skew", "grid column", "B* (paper's rule, median layer)"}
    if not need <= set(profiles.columns):
        raise ValueError(f"profiles must be chapter 04's profiles table (columns {sorted(need)})")
    out = []
    for name, r in profiles.iterrows():
        if r["shape"] in shapes:
            out.append({"name": str(name), "about": PROFILES[name].about if name in PROFILES else "",
                        "shape": r["shape"], "max_mean": _sig(float(r["max/mean (median)"]), 4),
                        "skew": _sig(float(r["Zipf-equivalent skew"]), 4), "column": float(r["grid column"]),
                        "bstar": _sig(float(r["B* (paper's rule, median layer)"]), 6)})
    return out


def phase_explorer(grid: pd.DataFrame, profile: str, config: dict | None = None,
                   profiles: pd.DataFrame | None = None) -> ExplorerHTML:
    """Chapter 04's phase explorer over a ``phase_grid`` result (:func:`phase_explorer_data`)."""
    data = phase_explorer_data(grid, profile, config, profiles)
    if not all(math.isfinite(c["bstar"]) for c in data["columns"]):
        raise ValueError("a column's flip boundary is not finite")
    return ExplorerHTML(_html("phase", data, "Phase explorer"), data)
