"""``python -m tempo ledger``: the claims ledger of a build, as a person reads it in a terminal.

By default a summary: the claims per status, then the deviating claims, each with the paper's
number, ours and the computed cause, wrapped to the terminal's width.  ``--all`` prints every
claim; ``--status S`` the claims of one status.  Tables are drawn by ``tabulate``.
"""
from __future__ import annotations

import shutil
import sys
import textwrap

import pandas as pd
from tabulate import tabulate

from ...core import paths
from ...core.argtypes import ArgumentParser, choice, int_range
from ...studies.results import PROFILES, Results
from .ledger import build_ledger, counts, show_table, skipped_recordings
from .registry import CATEGORIES, EVIDENCE, STATUSES

#: what each status means, beside its count
MEANING = {
    "reproduced": "our computation agrees with the paper's number",
    "consistent": f"{EVIDENCE['paper-parameters']}: agrees, not counted as reproduced",
    "deviates": "our computation disagrees; each row below gives the computed cause",
    **{c.status: c.counted.split(" (", 1)[1].rstrip(")") if " (" in c.counted else c.counted for c in CATEGORIES},
    "not run in this build": "the chapter that computes it did not run in this profile",
    "needs a recorded trace": "needs routing recorded from a served model (make book TRACE=...)",
    "needs a GPU": "needs a GPU measurement (GPU.md)",
    "needs a cluster": "needs a multi-node cluster",
}


def terminal_width(default: int = 100) -> int:
    """The terminal's width in characters (``COLUMNS`` or the tty), ``default`` when unknown."""
    return shutil.get_terminal_size((default, 24)).columns


def _cell(v) -> str:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return ""
    return f"{v:g}" if isinstance(v, float) else str(v)


def table(df: pd.DataFrame, width: int, wrap: str) -> str:
    """``df`` as a plain-text table at most ``width`` characters wide where its other columns allow:
    every column at its natural width, ``wrap`` in what remains (at least 20 characters)."""
    cols = [str(c) for c in df.columns]
    rows = [[_cell(v) for v in r] for r in df.itertuples(index=False)]
    # tabulate pads a header by 2 (its MIN_PADDING)
    natural = [max([len(c) + 2] + [len(r[j]) for r in rows]) for j, c in enumerate(cols)]
    j = cols.index(wrap)
    widths = [None] * len(cols)
    widths[j] = max(20, width - (sum(natural) - natural[j]) - 2 * (len(cols) - 1))
    return tabulate(rows, headers=cols, tablefmt="simple", maxcolwidths=widths, disable_numparse=True)


def records(df: pd.DataFrame, text: str, width: int, indent: int = 4) -> str:
    """One aligned line per row of ``df``'s columns but ``text`` (a ``tabulate`` table), and under
    it the row's ``text`` wrapped to ``width``, indented."""
    cols = [c for c in df.columns if c != text]
    lines = tabulate([[_cell(v) for v in r] for r in df[cols].itertuples(index=False)], headers=cols,
                     tablefmt="simple", disable_numparse=True,
                     colalign=["right" if c in ("paper", "ours") else "left" for c in cols]).splitlines()
    out = lines[:2]
    for line, note in zip(lines[2:], df[text]):
        out.append(line.rstrip())
        note = _cell(note)
        if note:
            out += textwrap.wrap(note, width, initial_indent=" " * indent, subsequent_indent=" " * indent)
    return "\n".join(out)


def summary(df: pd.DataFrame, profile: str, width: int) -> str:
    """The counts per status, then the deviating claims with their causes."""
    c = counts(df)
    head = f"Claims ledger, profile {profile}: {len(df)} claims, each recomputed from this build's results"
    status_rows = pd.DataFrame([(s, str(c[s]), MEANING[s]) for s in STATUSES if c[s]],
                               columns=["status", "claims", "meaning"])
    parts = [textwrap.fill(head, width), "", table(status_rows, width, "meaning")]
    dev = show_table(df[df.status == "deviates"])
    if len(dev):
        dev = dev.assign(note=dev.note.str.replace("computed cause: ", "", regex=False))
        parts += ["", f"Deviating claims ({len(dev)}), with the computed cause:", "",
                  records(dev[["id", "paper", "ours", "unit", "note"]], "note", width)]
    parts += ["", textwrap.fill("Every claim: python -m tempo ledger --all; one status: --status 'needs a GPU'. "
                                "The book's Claims ledger page has the same table with the evidence.", width)]
    return "\n".join(parts)


def main(argv=None) -> int:
    """``python -m tempo ledger [--profile P] [--all | --status S]``."""
    ap = ArgumentParser(prog="python -m tempo ledger",
                        description="the claims ledger of a build: recomputed from build/results/<profile>/, written "
                                    "to claims.csv there, and shown as counts per status and the deviating claims")
    ap.add_argument("--profile", default="full", choices=PROFILES, help="the build whose results to read (default full)")
    show = ap.add_mutually_exclusive_group()
    show.add_argument("--all", action="store_true", help="every claim: id, status, paper, ours, unit, note")
    show.add_argument("--status", type=choice(STATUSES, "status"), help="only the claims with this status")
    ap.add_argument("--width", type=int_range(40, 1000), help="line width (default: the terminal's)")
    a = ap.parse_args(argv)
    width = a.width or terminal_width()
    df = build_ledger(a.profile)
    if a.all or a.status:
        rows = show_table(df if a.all else df[df.status == a.status])
        print(records(rows[["id", "status", "paper", "ours", "unit", "note"]], "note", width))
    else:
        print(summary(df, a.profile, width))
    skipped = skipped_recordings()
    if skipped:
        print(f"{len(skipped)} recording(s) under data/measured skipped (they do not load): "
              + "; ".join(f"{f.parent.name}/{f.name}: {why}" for f, why in skipped), file=sys.stderr)
    flagged = int((df.get("fallbacks", pd.Series(dtype=int)) > 0).sum())
    if flagged:
        print(f"{flagged} claim(s) computed with solver fallbacks (see their notes)", file=sys.stderr)
    print(f"written: {(Results(a.profile).dir / 'claims.csv').relative_to(paths.ROOT)}", file=sys.stderr)
    return 0
