"""Build the full profile at two commits and diff every result: the check that a refactor moved
no number (ARCHITECTURE.md, "Changing the structure").

    python scripts/compare_builds.py d80bdca            # d80bdca against HEAD
    python scripts/compare_builds.py d80bdca HEAD~3     # two commits
    python scripts/compare_builds.py --dirs A B          # two finished build/results/full folders

Each commit is checked out into ``build/compare/<sha>/`` (a detached git worktree) and built with
this Python (its packages; the worktree's own ``tempo`` first on ``PYTHONPATH``) by the
Makefile's target for the ledger notebook, which runs every chapter first.  A worktree that
already holds a finished build is reused, so an interrupted comparison resumes.

Compared: every ``build/results/full/*.csv`` cell by cell (exact equality, NaN equal to NaN),
the ``config`` of every ``*.meta.json`` and the ledger (``claims.csv``, ``claims_sensitivity.csv``).
Not compared, because they are not results of the code but of the clock or of the checkout:

* wall-clock columns (:data:`CLOCK_COLUMNS`, in every run of the experiment: tagged and under
  other readings) and the ledger rows whose value is a wall-clock time (:data:`CLOCK_CLAIMS`);
* the MILP's bound where the MILP stopped at its wall-clock limit without proving optimality
  (:data:`TIME_LIMITED`): how far HiGHS gets in 10 s depends on the machine's load, so those
  cells differ between two runs of one commit;
* the source hash and git commit in the ledger's provenance (``tempo 0.1.0+<hash>, commit <sha>``),
  which name the code, and
  module paths in its text that a structural change renamed (:data:`MODULE_RENAMES`, compared
  after mapping the old name to the new).

Exit status 0 when nothing differs, 1 when something does (each difference printed).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: an experiment's result file -> columns measured by the wall clock (they differ run to run on one
#: commit); they hold for its tagged runs and its runs under other readings too (:func:`study_file`)
CLOCK_COLUMNS = {
    "solver_vs_milp.csv": ["tempo_ms", "milp_s"],
    "drift16_stages.csv": ["solve_ms"],
    "solver_runtime.csv": ["wall_ms", "cpu_ms"],
}
#: ledger rows whose value is a wall-clock time (left out of claims.csv and claims_sensitivity.csv)
CLOCK_CLAIMS = {"solver_time_small_b", "solver_speedup"}
#: an experiment's result file -> (rows whose MILP hit its time limit, columns computed from the MILP's
#: bound there, and whether it proved optimality); for its other runs too (:func:`study_file`)
TIME_LIMITED = {
    "solver_vs_milp.csv": (lambda df: ~df["milp_optimal"].astype(bool), ["milp_lb", "ratio_to_lb", "milp_optimal"]),
    "thm2_probe.csv": (lambda df: (df["opt_from"] == "milp") & (df["opt_lo"] < df["opt_hi"] - 1e-9),
                       ["opt_lo", "rr_over_bound_hi", "rr_over_opt_max", "tempo_over_opt_max"]),
}
#: module renames: a provenance text naming an old module names the new one
MODULE_RENAMES = {
    "tempo.workloads": "tempo.world.workloads", "tempo.placement": "tempo.world.placement",
    "tempo.traces": "tempo.world.traces", "tempo.experiments": "tempo.studies", "tempo.theory": "tempo.theory.bounds",
    "tempo.cost": "tempo.core.cost", "tempo.claims": "tempo.book.claims",
}
VERSION = re.compile(r"tempo \d+\.\d+\.\d+\S*\+[0-9a-f]{12}(?:, commit [0-9a-f]{7,40}(?:-dirty)?)?")


def build(ref: str) -> Path:
    """The results folder of the full profile built at ``ref`` (built now unless finished)."""
    sha = subprocess.check_output(["git", "rev-parse", "--verify", f"{ref}^{{commit}}"], cwd=ROOT,
                                  text=True).strip()
    tree = ROOT / "build" / "compare" / sha[:12]
    if not tree.exists():
        subprocess.check_call(["git", "worktree", "add", "--detach", str(tree), sha], cwd=ROOT)
    results = tree / "build" / "results" / "full"
    done = tree / "build" / "executed" / "full" / "99_claims_ledger.ipynb"
    if not done.exists():
        env = dict(os.environ, PYTHONPATH=str(tree), TEMPO_ROOT=str(tree))
        print(f"building the full profile at {ref} ({sha[:12]}) in {tree} ...", flush=True)
        subprocess.check_call(["make", "--no-print-directory", f"TEMPO_PYTHON={sys.executable}", "PROFILE=full",
                               "build/executed/full/99_claims_ledger.ipynb"], cwd=tree, env=env)
    return results


def study_file(name: str) -> str:
    """The file name of the experiment a result file belongs to: ``solver_vs_milp.csv`` for
    ``solver_vs_milp-eplb_ties=index_order.csv`` (:class:`tempo.studies.results.ResultKey`)."""
    from tempo.studies.results import ResultKey

    try:
        return ResultKey.parse(name.removesuffix(".csv")).name + ".csv"
    except ValueError:
        return name


def _frame(path: Path) -> pd.DataFrame:
    df = pd.read_csv(path)
    return df.drop(columns=[c for c in CLOCK_COLUMNS.get(study_file(path.name), []) if c in df.columns])


def _unlimited(name: str, a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """Blank the MILP-bound cells of rows where either run's MILP stopped at its time limit."""
    name = study_file(name)
    if name not in TIME_LIMITED or len(a) != len(b):
        return a, b, 0
    rows, cols = TIME_LIMITED[name]
    hit = (rows(a).to_numpy() | rows(b).to_numpy())
    a, b = a.copy(), b.copy()
    for c in cols:
        if c in a.columns and c in b.columns:
            a[c], b[c] = a[c].astype(object), b[c].astype(object)
            a.loc[hit, c] = np.nan
            b.loc[hit, c] = np.nan
    return a, b, int(hit.sum())


def _renamed(text: str) -> str:
    for old in sorted(MODULE_RENAMES, key=len, reverse=True):
        text = re.sub(rf"(?<![\w.]){re.escape(old)}(?![\w])",
                      lambda m, old=old: m.group(0) if m.string.startswith(MODULE_RENAMES[old], m.start())
                      else MODULE_RENAMES[old], text)
    return text


def _ledger(path: Path) -> pd.DataFrame:
    df = pd.read_csv(path)
    df = df[~df["id"].isin(CLOCK_CLAIMS)].reset_index(drop=True)
    if "provenance" in df.columns:
        df["provenance"] = df["provenance"].astype(str).str.replace(VERSION, "tempo <version>", regex=True)
    for col in ("provenance", "note", "evidence"):
        if col in df.columns:
            df[col] = df[col].map(lambda t: _renamed(t) if isinstance(t, str) else t)
    return df


def diff_frames(name: str, a: pd.DataFrame, b: pd.DataFrame, limit: int = 8) -> list[str]:
    """Lines describing every difference between two result tables (empty: identical)."""
    if list(a.columns) != list(b.columns):
        return [f"{name}: columns differ: {list(a.columns)} vs {list(b.columns)}"]
    if len(a) != len(b):
        return [f"{name}: {len(a)} rows before, {len(b)} after"]
    out = []
    for col in a.columns:
        x, y = a[col], b[col]
        same = (x == y) | (x.isna() & y.isna())
        if not same.all():
            rows = np.flatnonzero(~same.to_numpy())
            shown = ", ".join(f"row {r}: {x.iloc[r]!r} -> {y.iloc[r]!r}" for r in rows[:limit])
            out.append(f"{name}: column {col!r} differs in {len(rows)} of {len(a)} rows ({shown})")
    return out


def compare(before: Path, after: Path) -> list[str]:
    out = []
    names = sorted({p.name for p in before.glob("*.csv")} | {p.name for p in after.glob("*.csv")})
    for name in names:
        a, b = before / name, after / name
        if not a.exists() or not b.exists():
            out.append(f"{name}: only {'after' if b.exists() else 'before'}")
            continue
        read = _ledger if name in ("claims.csv", "claims_sensitivity.csv") else _frame
        fa, fb, limited = _unlimited(name, read(a), read(b))
        out += diff_frames(name, fa, fb)
        if limited:
            print(f"{name}: {limited} row(s) where the MILP stopped at its time limit: its bound there not compared")
    for a in sorted(before.glob("*.meta.json")):
        b = after / a.name
        if not b.exists():
            out.append(f"{a.name}: only before")
            continue
        ca, cb = json.loads(a.read_text())["config"], json.loads(b.read_text())["config"]
        if ca != cb:
            out.append(f"{a.name}: config differs: {ca} vs {cb}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", nargs="?", help="commit to compare against (e.g. d80bdca)")
    ap.add_argument("after", nargs="?", default="HEAD", help="commit to compare (default HEAD)")
    ap.add_argument("--dirs", nargs=2, metavar=("BEFORE", "AFTER"), type=Path,
                    help="compare two finished build/results/full folders instead of building")
    args = ap.parse_args(argv)
    if args.dirs:
        before, after = args.dirs
    elif args.before:
        before, after = build(args.before), build(args.after)
    else:
        ap.error("give a commit to compare against, or --dirs BEFORE AFTER")
    for d in (before, after):
        if not (d / "claims.csv").is_file():
            ap.error(f"{d} holds no finished build (no claims.csv)")
    lines = compare(before, after)
    n = len(list(before.glob("*.csv")))
    if lines:
        print(f"{len(lines)} difference(s) between {before} and {after}:")
        print("\n".join(f"- {line}" for line in lines))
        return 1
    print(f"no difference: {n} result tables, every experiment's config and the ledger "
          f"(clock columns {sum(map(len, CLOCK_COLUMNS.values()))}, clock claims {len(CLOCK_CLAIMS)} and the source hash left out)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
