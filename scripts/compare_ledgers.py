#!/usr/bin/env python
"""List the verdicts that moved between two ledgers.

    python scripts/compare_ledgers.py BEFORE/claims.csv AFTER/claims.csv [--sensitivity AFTER/claims_sensitivity.csv]

Prints the counts per status before and after and, for each claim whose status moved, both
values, the after ledger's note (its computed cause) and the alternative readings under which
the after build gives the old status back (the readings that moved it;
tempo.book.chapters.ch99_claims_ledger.compare_ledgers)."""
from __future__ import annotations

import argparse
import sys

import pandas as pd


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="the earlier build's claims.csv")
    ap.add_argument("after", help="the later build's claims.csv")
    ap.add_argument("--sensitivity", help="the later build's claims_sensitivity.csv (default: beside AFTER)")
    ap.add_argument("--width", type=int, default=100, help="characters of each note to print (default 100)")
    a = ap.parse_args(argv)
    from tempo.book.chapters.ch99_claims_ledger import compare_ledgers

    try:
        counts, moved = compare_ledgers(a.before, a.after, a.sensitivity)
    except ValueError as exc:
        ap.error(str(exc))
    print(counts.to_string())
    print(f"\n{len(moved)} verdicts moved:\n")
    with pd.option_context("display.max_colwidth", a.width, "display.width", 250, "display.max_rows", None):
        print(moved.to_string(index=False) if len(moved) else "(none)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
