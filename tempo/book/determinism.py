"""Verdicts that do not depend on the machine: the experiments whose answers once rested on a
wall-clock limit, run as the chapters run them (:func:`run_clock_experiments`), with every time
limit of their configs scaled by a factor and optionally under busy loops that keep the cores
busy; :func:`compare` diffs two ledgers: no status may differ, and no value except a machine
figure's (a time on the machine, ``tempo.book.claims.registry.CATEGORIES``).

``python -m tempo.book.determinism A/claims.csv B/claims.csv`` prints that diff for two builds'
ledgers."""
from __future__ import annotations

import subprocess
import sys
from contextlib import contextmanager

import pandas as pd

#: the results whose computation solves a MILP (Section 4.2's "10 s HiGHS MILP", Theorem 1,
#: Lemmas 1-2, Theorem 2's OPT): (stem, chapter)
CLOCK_RESULTS = (("thm1_partition", "02"), ("lemmas", "02"), ("thm2_probe", "02"), ("solver_vs_milp", "03"))


def clock_configs(profile: str) -> dict:
    """``{experiment: config}`` of :data:`CLOCK_RESULTS` as chapters 02 and 03 run them for
    ``profile`` (``notebooks/02_theory.md``, ``notebooks/03_solver.md``)."""
    from .chapters import ch02_theory, ch03_solver

    c2, c3 = ch02_theory.sizes(profile), ch03_solver.sizes(profile)
    return {"thm1_partition": {"sizes": c2["sizes"], "reps": c2["reps"], "time_limit": 30.0},
            "lemmas": {"n": c2["lemma_n"], "seed": 0},
            "thm2_probe": {"n": c2["probe_n"], "max_experts": c2["probe_max_e"], "max_gpus": c2["probe_gpus"],
                           "time_limit": 1.0, "milp_max_vars": 64},
            "solver_vs_milp": {**c3["phase"], "batches": c3["batches"], "time_limit": c3["milp_limit"]}}


@contextmanager
def busy_loops(n: int):
    """``n`` processes (``while True: pass``) that keep a core busy each while the block runs;
    stopped by their own handles on exit, whatever happens."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(10)


def run_clock_experiments(profile: str, scale: float = 1.0, busy: int = 0, alternatives: bool = True) -> None:
    """Run :data:`CLOCK_RESULTS` for ``profile`` into ``build/results/<profile>/`` (recomputed,
    never from the cache) with every ``time_limit`` of their configs multiplied by ``scale``,
    under ``busy`` busy loops; with ``alternatives`` also under each reading the ledger shows.
    ``scale`` must be > 0."""
    from .. import studies
    from ..paper.readings import Reading
    from . import readings

    if not (isinstance(scale, (int, float)) and scale > 0):
        raise ValueError(f"scale must be a number > 0, got {scale!r}")
    cfgs = clock_configs(profile)
    with busy_loops(busy):
        for name, cfg in cfgs.items():
            cfg = {**cfg, **({"time_limit": cfg["time_limit"] * scale} if "time_limit" in cfg else {}),
                   "progress": False}
            if alternatives and readings.alternative_ids(name):
                studies.run_alternatives(name, cfg, profile, reading=Reading.paper(), refresh=True,
                                         ids=readings.alternative_ids(name))
            else:
                studies.run(name, cfg, profile, refresh=True)


def clock_claims() -> list:
    """The claims.yaml rows of the claims computed from :data:`CLOCK_RESULTS` alone."""
    from .claims import REGISTRY, claim_rows

    stems = {s for s, _ in CLOCK_RESULTS}
    return [r for r in claim_rows() if r["id"] in REGISTRY and REGISTRY[r["id"]].inputs
            and set(REGISTRY[r["id"]].inputs) <= stems]


def compare(a, b) -> pd.DataFrame:
    """Two ledgers (``claims.csv`` paths or DataFrames with ``id``, ``status``, ``ours``): one
    row per claim whose status differs, or whose value differs and is not a machine figure's,
    with ``what`` ("status" or "value").  Empty when the two agree as they must."""
    def load(x):
        return x if isinstance(x, pd.DataFrame) else pd.read_csv(x, dtype={"ours": str}, keep_default_na=False)

    a, b = load(a).set_index("id"), load(b).set_index("id")
    rows = []
    for cid in a.index.union(b.index):
        sa, sb = a.status.get(cid, "(absent)"), b.status.get(cid, "(absent)")
        va, vb = str(a.ours.get(cid, "")), str(b.ours.get(cid, ""))
        if sa != sb:
            rows.append({"id": cid, "what": "status", "a": sa, "b": sb, "ours a": va, "ours b": vb})
        elif va != vb and sa != "machine figure":
            rows.append({"id": cid, "what": "value", "a": sa, "b": sb, "ours a": va, "ours b": vb})
    return pd.DataFrame(rows, columns=["id", "what", "a", "b", "ours a", "ours b"])


def main(argv=None) -> int:
    """``python -m tempo.book.determinism A B``: the claims whose status or (non-machine-figure)
    value differs between two ledgers; exit 1 when any does."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tempo.book.determinism", description=main.__doc__)
    ap.add_argument("a", help="a claims.csv")
    ap.add_argument("b", help="another build's claims.csv")
    args = ap.parse_args(argv)
    d = compare(args.a, args.b)
    a = pd.read_csv(args.a, keep_default_na=False).set_index("id")
    b = pd.read_csv(args.b, keep_default_na=False).set_index("id")
    mf = [i for i in a.index if a.status[i] == "machine figure" and i in b.index]
    print(f"{len(a)} claims; statuses identical for {len(a) - int((d.what == 'status').sum())}; "
          f"values differ for {int((d.what == 'value').sum())} claims that are not machine figures")
    for i in mf:
        print(f"  machine figure {i}: {a.ours[i]} vs {b.ours[i]}")
    if len(d):
        print(d.to_string(index=False))
    return 1 if len(d) else 0


if __name__ == "__main__":
    sys.exit(main())
