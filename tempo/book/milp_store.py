"""``python -m tempo milp-references``: the MILP references of chapter 03's ``solver_vs_milp``
grids proven once into ``data/milp/`` (:mod:`tempo.studies.milp_references`), so that the
ledger's MILP claims compare against the same answers on every machine."""
from __future__ import annotations

import sys

import numpy as np

from ..core import paths
from ..core.cost import CostModel
from ..paper.readings import Reading
from ..studies import milp_references as refs
from ..studies import readings
from ..studies.registry import READINGS
from .chapters.ch03_solver import SIZES

#: the readings of solver_vs_milp that change its batches (the others reuse the same MILP answers)
BATCH_READINGS = ("synthetic_router", "placement_loads", "eplb_ties")


def grid_batches(profiles=("smoke", "full"), alternatives: bool = True) -> list:
    """``[(label, Instance, CostModel)]``: every batch ``solver_vs_milp`` solves in chapter 03's
    build (:data:`~tempo.book.chapters.ch03_solver.SIZES`) under the paper's reading and, with
    ``alternatives``, under each alternative of :data:`BATCH_READINGS` the ledger runs; each
    batch once, the paper's first."""
    paper = Reading.paper()
    variants = [paper] + ([alt for rid in BATCH_READINGS if rid in READINGS["solver_vs_milp"]
                           for alt in paper.alternatives(rid)] if alternatives else [])
    model = CostModel.named("dsv3-offline")
    seen, out = set(), []
    for r in variants:
        for prof in profiles:
            sz = SIZES[prof]
            cfg = {**sz["phase"], "batches": sz["batches"]}
            for g in cfg["eps"]:
                for E in cfg.get("experts", [256]):
                    for s in cfg["skews"]:
                        for rep in cfg["replications"]:
                            for B in cfg["tokens"]:
                                for b, inst in enumerate(readings.batches(r, E, g, B, s, rep, cfg["batches"], seed=B)):
                                    k = refs.key(inst, model)
                                    if k not in seen:
                                        seen.add(k)
                                        out.append((f"{prof} {r.label(BATCH_READINGS)} EP{g} s={s:g} {rep:g}x B={B} "
                                                    f"#{b}", inst, model))
    return out


def main(argv=None) -> int:
    """``python -m tempo milp-references``: prove the MILP references of chapter 03's
    solver_vs_milp grids once, single-threaded with a generous wall-clock limit, into data/milp/
    (resumable: stored answers are kept)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tempo milp-references", description=main.__doc__)
    ap.add_argument("--profile", action="append", choices=("smoke", "full"),
                    help="the grids to cover (repeatable; default both)")
    ap.add_argument("--time-limit", type=float, default=refs.GENERATE_TIME_LIMIT,
                    help="seconds per batch (default %(default)s)")
    ap.add_argument("--paper-only", action="store_true", help="only the paper's reading's batches, no alternatives")
    ap.add_argument("--check", action="store_true", help="re-verify every stored reference by re-pricing, and exit")
    a = ap.parse_args(argv)
    if not (np.isfinite(a.time_limit) and a.time_limit > 0):
        ap.error(f"--time-limit must be a positive number of seconds, got {a.time_limit}")
    batches = grid_batches(tuple(a.profile or ("smoke", "full")), alternatives=not a.paper_only)
    if a.check:
        n = sum(refs.reference(inst, model) is not None for _, inst, model in batches)
        print(f"{n} of {len(batches)} batches have a stored reference, and every one re-prices")
        return 0
    cmd = " ".join(["python -m tempo milp-references", *(argv if argv is not None else sys.argv[2:])])
    got = refs.generate(batches, a.time_limit, command=cmd)
    ks = [refs.key(i, m) for _, i, m in batches]
    print(f"{sum(got[k]['optimal'] for k in ks)} of {len(ks)} batches proven optimal; stored in "
          f"{refs.STORE.relative_to(paths.ROOT) if refs.STORE.is_relative_to(paths.ROOT) else refs.STORE}")
    return 0
