#!/usr/bin/env python
"""The solver's guarantees measured on the full suites (the unit tests take samples of them).

    python scripts/solver_guarantees.py probe        # chapter 02's 1,296 probe instances x every option set
    python scripts/solver_guarantees.py grid         # chapter 04's full phase and scale grids, 8 seeds
    python scripts/solver_guarantees.py huge-milp    # 1,000 huge-count instances: the MILP's bound and status
    python scripts/solver_guarantees.py milp-limit   # the MILP's wall time against its time limit

probe: for each option set the readings and studies use (tests/test_solver_guarantees.py's),
the default against the paper preset under the same options and against each token-LP face the
options name (tau = 1%); the default without options against all three faces.
grid: per batch and per cell (the mean over a cell's batches, as chapter 04 scores), the default
(under the paper reading's ensemble, and with the library's own options) against every registered
fixed policy; the paper preset beside it.
huge-milp: totals from 2^20 to 2^52 over every model form and replica layout, and the
full-replication family whose optimum is 66.96 at every scale: HiGHS's lower bound never above a
feasible makespan, the objective equal to the re-priced dispatch, "optimal" only with a closed
gap; an instance the MILP cannot resolve is refused with a ValueError.
milp-limit: instances that reach the limit (tile models, tile = 1 among them).

``--workers`` processes (default 2), ``--limit N`` the first N instances or cells (a quick look).
Each prints its summary; ``--out F`` also writes the per-instance rows (CSV).
"""
from __future__ import annotations

import argparse
import itertools
import sys
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from conftest import random_instance, random_model  # noqa: E402
from test_solver_guarantees import _faces, _fixed, _option_sets  # noqa: E402

from tempo import CostModel, Instance  # noqa: E402
from tempo.policies import solve  # noqa: E402

TAU = 0.01
REL = 1e-9


# ---------------------------------------------------------------- probe suite
_SUITE = None


def _probe_row(j: int) -> dict:
    global _SUITE
    from tempo.policies.exact import token_lp_even, token_lp_highs, token_lp_vertex
    from tempo.theory.bounds import probe_suite

    if _SUITE is None:
        _SUITE = list(probe_suite(1296))
    kind, _name, inst, model = _SUITE[j]
    worse_paper = worse_face = 0
    worst_paper, worst_face = 0.0, 0.0
    faces = {}
    for kw in _option_sets():
        d = model.makespan(inst, solve(inst, model, "tempo", **kw).validate(inst))
        p = model.makespan(inst, solve(inst, model, "tempo", options="paper", **kw).validate(inst))
        worst_paper = max(worst_paper, d / p if p else 1.0)
        worse_paper += d > p * (1 + REL) + 1e-12
        if kw.get("ensemble", True) and inst.total_tokens:
            lp = kw.get("lp_variants", "auto")
            key = lp if isinstance(lp, str) else tuple(lp)
            if key not in faces:
                faces[key] = {k: model.makespan(inst, x) for k, x in _faces(inst, lp).items()}
            for mf in faces[key].values():
                worst_face = max(worst_face, d / mf if mf else 1.0)
                worse_face += d > mf / (1 - TAU) * (1 + REL) + 1e-12
    lib = model.makespan(inst, solve(inst, model, "tempo"))
    lib_face = 1.0
    if inst.total_tokens:
        best = min(model.makespan(inst, f(inst).shares) for f in (token_lp_vertex, token_lp_highs, token_lp_even))
        lib_face = lib / best if best else 1.0
    return {"instance": j, "kind": kind, "experts": inst.n_experts, "gpus": inst.n_gpus,
            "sets_worse_than_paper": int(worse_paper), "sets_beyond_tau_of_a_face": int(worse_face),
            "default_over_paper_max": worst_paper, "default_over_face_max": worst_face,
            "library_default_over_best_face": lib_face}


def probe_summary(df: pd.DataFrame) -> str:
    return "\n".join([
        f"probe suite: {len(df)} instances x {len(list(_option_sets()))} option sets",
        f"  instances where an option set's default is worse than the paper preset's: "
        f"{int((df.sets_worse_than_paper > 0).sum())} (worst ratio {df.default_over_paper_max.max():.6f})",
        f"  instances where the default is more than tau worse than a face its options name: "
        f"{int((df.sets_beyond_tau_of_a_face > 0).sum())} (worst ratio {df.default_over_face_max.max():.6f})",
        f"  the default without options against the best of the three faces: worst "
        f"{df.library_default_over_best_face.max():.6f}"])


# ---------------------------------------------------------------- chapter 04's grids
def grid_cells():
    """(grid, shape, EP, skew, replication, B, seed): the full profile's phase grid (three
    shapes, EP8, seeds 0-7) and scale grid (DSv3, EP 8-64, seeds 1-8)."""
    tokens = (16, 32, 64, 128, 256, 512, 1024, 2048)
    for seed, sh, s, r, B in itertools.product(range(8), ("DSv3", "Qwen3-30B", "DSv2-Lite"),
                                               (0.0, 0.3, 0.6, 0.9, 1.2, 1.5), (1.25, 1.5), tokens):
        yield ("phase", sh, 8, s, r, B, seed)
    for seed, ep, s, B in itertools.product(range(1, 9), (8, 16, 32, 64), (0.0, 1.2), tokens):
        yield ("scale", "DSv3", ep, s, 1.25, B, seed)


def _grid_rows(cell) -> list[dict]:
    from tempo.paper.readings import Reading
    from tempo.studies import readings
    from tempo.studies.simulator import SHAPES

    grid, shape, ep, skew, rep, B, seed = cell
    E, K, params = SHAPES[shape]
    model = CostModel.named(params)
    lp = readings.LP_VARIANTS[Reading.paper()["ensemble_lp"]]
    rows = []
    for b, inst in enumerate(readings.batches(Reading.paper(), E, ep, B, skew, rep, 3, seed=seed, top_k=K)):
        fixed = _fixed(inst, model)
        best_name = min(fixed, key=fixed.get)
        rows.append({"grid": grid, "shape": shape, "ep": ep, "skew": skew, "replication": rep, "B": B, "seed": seed,
                     "batch": b, "best_fixed": best_name, "ms_best_fixed": fixed[best_name],
                     **{f"fixed {k}": v for k, v in fixed.items()},
                     "ms_default": model.makespan(inst, solve(inst, model, "tempo", lp_variants=lp)),
                     "ms_default_own_options": model.makespan(inst, solve(inst, model, "tempo")),
                     "ms_paper": model.makespan(inst, solve(inst, model, "tempo", options="paper", lp_variants=lp))})
    return rows


def grid_summary(df: pd.DataFrame) -> str:
    out = [f"chapter 04's grids: {len(df)} batches, each against the best registered fixed policy on it; a cell's "
           "gain is 100 (1 - mean makespan / the lowest mean makespan of a fixed policy over the cell's batches)"]
    cell = ["grid", "shape", "ep", "skew", "replication", "B", "seed"]
    fixed = [c for c in df.columns if c.startswith("fixed ")]
    for (grid, shape), g in df.groupby(["grid", "shape"], sort=False):
        means = g.groupby(cell)[[*fixed, "ms_default", "ms_default_own_options", "ms_paper"]].mean()
        best = means[fixed].min(axis=1)  # a policy that cannot run on a layout is NaN: skipped
        line = [f"  {grid} {shape} ({len(means)} cells)"]
        for col, label in (("ms_default", "default, the reading's ensemble"), ("ms_default_own_options", "default, own options"),
                           ("ms_paper", "paper preset")):
            ratio = g[col] / g.ms_best_fixed
            gain = 100 * (1 - means[col] / best)
            line.append(f"{label}: worst batch {ratio.max():.4f}, batches beyond tau "
                        f"{int((ratio > 1 / (1 - TAU) * (1 + REL)).sum())}, cell min gain {gain.min():.3f}%, "
                        f"cells below -1% {int((gain < -100 * TAU).sum())}")
        out.append("\n    ".join(line))
    return "\n".join(out)


# ---------------------------------------------------------------- the MILP on huge counts
def huge_case(i: int):
    """Instance ``i`` of the huge-count suite: every tenth the full-replication family (optimum
    66.96 at every scale 10^k), else a random instance of every model form scaled to a total of
    2^20-2^52 tokens."""
    rng = np.random.default_rng(1000 + i)
    if i % 10 == 0:
        k = int(rng.integers(0, 15))
        base = np.array([9, 8, 7, 7, 6, 5, 5, 4, 3, 2, 1])
        return Instance.full_replication(base * 10**k, 4), CostModel(8.76, 19.4, 0, 0), f"full replication x 10^{k}"
    inst = random_instance(rng, max_gpus=5, max_experts=10, max_slots=3)
    if rng.random() < 0.25:  # an expert twice on one GPU
        rep = inst.replica_gpu.copy()
        e = int(rng.integers(inst.n_experts))
        free, held = np.flatnonzero(rep[e] < 0), rep[e][rep[e] >= 0]
        if free.size and held.size:
            rep[e, free[0]] = held[0]
            inst = Instance(inst.counts, rep, inst.n_gpus)
    scale = max(int(2 ** rng.uniform(20, 52) // max(inst.total_tokens, 1)), 1)
    inst = Instance(inst.counts * scale, inst.replica_gpu, inst.n_gpus)
    m = random_model(rng, tiles=rng.random() < 0.3)
    u = rng.random()
    if u < 0.3:
        m = CostModel(a=m.a, b=m.b, c=0.0, beta=0.0, b2=m.b2)
    elif u < 0.5:
        m = CostModel(a=m.a, b=m.b, c=m.c, beta=m.beta, b2=m.b2, c2=float(rng.uniform(0, 30)),
                      gamma=float(rng.uniform(0.01, 0.3)))
    return inst, m, "random"


def _huge_row(i: int) -> dict:
    from tempo.policies.milp import milp

    inst, model, kind = huge_case(i)
    row = {"instance": i, "kind": kind, "total": inst.total_tokens}
    try:
        d = milp(inst, model, time_limit=5.0)
    except ValueError as err:
        return {**row, "outcome": "refused", "reason": str(err)[:100]}
    t = model.makespan(inst, solve(inst, model, "tempo"))
    obj, lb, opt = d.meta["objective"], d.meta["lower_bound"], d.meta["optimal"]
    return {**row, "outcome": "solved", "objective": obj, "lower_bound": lb, "optimal": opt, "tempo": t,
            "bound_above_feasible": lb > min(t, obj) * (1 + REL),
            "objective_not_repriced": abs(model.makespan(inst, d) - obj) > 1e-8 * max(1.0, obj),
            "optimal_with_gap": bool(opt and d.meta["gap"] > 1e-5)}


def huge_summary(df: pd.DataFrame) -> str:
    s = df[df.outcome == "solved"]
    fam = s[s.kind != "random"]
    return "\n".join([
        f"huge counts: {len(df)} instances (totals up to 2^{np.log2(max(df.total.max(), 1)):.1f}): "
        f"{len(s)} solved ({int(s.optimal.sum())} proven optimal), {int((df.outcome == 'refused').sum())} refused",
        f"  lower bound above a feasible makespan: {int(s.bound_above_feasible.sum())}; objective not the re-priced "
        f"dispatch: {int(s.objective_not_repriced.sum())}; 'optimal' with an open gap: {int(s.optimal_with_gap.sum())}",
        f"  the full-replication family: {len(fam)} instances, objectives {sorted(set(fam.objective.round(6)))}"])


# ---------------------------------------------------------------- the MILP's time limit
def _limit_row(i: int, limit: float = 2.0) -> dict:
    from tempo.policies.milp import milp

    rng = np.random.default_rng([11, i])
    E, g = int(rng.integers(24, 65)), int(rng.choice([4, 8]))
    counts = (rng.zipf(1.3, E) * rng.integers(20, 200)).clip(0, 20000)
    inst = random_instance(rng, full=bool(rng.random() < 0.5), max_gpus=g, max_experts=E, max_slots=3)
    inst = Instance(counts[:inst.n_experts], inst.replica_gpu, inst.n_gpus)
    model = CostModel(a=float(rng.uniform(5, 20)), b=float(rng.uniform(0.5, 5)), c=float(rng.uniform(0, 10)),
                      beta=float(rng.uniform(0.01, 0.1)), b2=float(rng.uniform(1, 6)) if i % 2 == 0 else 0.0,
                      tile=1 if i % 4 == 0 else int(rng.choice([64, 128])))
    t0 = time.perf_counter()
    try:
        d = milp(inst, model, time_limit=limit)
    except ValueError:
        return {"instance": i, "outcome": "refused"}
    wall = time.perf_counter() - t0
    return {"instance": i, "outcome": "solved", "tile": model.tile, "optimal": d.meta["optimal"],
            "wall_s": wall, "over_limit": wall / limit}


def limit_summary(df: pd.DataFrame) -> str:
    s = df[df.outcome == "solved"]
    hit = s[~s.optimal]
    return (f"MILP time limit: {len(s)} solves, {len(hit)} stopped at the limit; wall / limit max "
            f"{s.over_limit.max():.3f}, solves over 1.10: {int((s.over_limit > 1.10).sum())}")


SUITES = {"probe": (_probe_row, 1296, probe_summary), "grid": (_grid_rows, None, grid_summary),
          "huge-milp": (_huge_row, 1000, huge_summary), "milp-limit": (_limit_row, 200, limit_summary)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", choices=sorted(SUITES))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None, help="only the first N instances or cells")
    ap.add_argument("--out", help="also write the rows here (CSV)")
    a = ap.parse_args(argv)
    fn, n, summary = SUITES[a.suite]
    items = list(grid_cells()) if n is None else list(range(n))
    items = items[:a.limit] if a.limit else items
    workers = 1 if a.suite == "milp-limit" else max(1, a.workers)  # timings: one at a time
    rows, t0 = [], time.time()
    pool = Pool(workers) if workers > 1 else None
    try:
        results = pool.imap(fn, items, chunksize=4) if pool else map(fn, items)
        for k, r in enumerate(results):
            rows.extend(r if isinstance(r, list) else [r])
            if (k + 1) % max(1, len(items) // 20) == 0:
                print(f"{a.suite}: {k + 1}/{len(items)} in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    finally:
        if pool:
            pool.terminate()
    df = pd.DataFrame(rows)
    if a.out:
        df.to_csv(a.out, index=False)
    print(summary(df))
    return 0


if __name__ == "__main__":
    sys.exit(main())
