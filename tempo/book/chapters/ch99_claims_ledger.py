"""Chapter 99, *The claims ledger* (``notebooks/99_claims_ledger.md``): the ledger's summary
line and its coloured table as the page shows them, and the list of ingested recordings.  The
ledger itself is :mod:`tempo.book.claims`."""
from __future__ import annotations

import pandas as pd

#: background colour of a ledger row per status (in the order of ``claims.STATUSES``)
STATUS_COLORS = ["#d9f2d9", "#eef7ee", "#f9d6d5", "#eeeeee", "#fbf0c9", "#dbe8f6", "#e8f1fa"]


def summary_markdown(df: pd.DataFrame, profile: str) -> str:
    """The ledger's one-paragraph summary (:func:`tempo.book.claims.summary_markdown`) without
    its link to this chapter."""
    from .. import claims

    return claims.summary_markdown(df, profile).replace(" See the [Claims ledger](claims-ledger) chapter.", "")


def ledger_html(df: pd.DataFrame) -> str:
    """The ledger (:func:`tempo.book.claims.ledger`) as the page's scrollable HTML table, each
    row coloured by its status."""
    from .. import claims

    show = claims.show_table(df)
    if len(STATUS_COLORS) != len(claims.STATUSES):
        raise ValueError(f"STATUS_COLORS has {len(STATUS_COLORS)} colours for {len(claims.STATUSES)} statuses")
    colors = dict(zip(claims.STATUSES, STATUS_COLORS))
    table = (show.style.apply(lambda r: [f"background-color: {colors[r.status]}"] * len(r), axis=1)
             .set_properties(subset=["claim", "note", "provenance", "tolerance"], **{"min-width": "14em"})
             .hide(axis="index").to_html())
    return f'<div style="overflow-x: auto; font-size: 0.85em">{table}</div>'


def recordings_view(root=None) -> list:
    """The ingested recordings (:func:`tempo.book.recordings.recordings`: kind, machine, date,
    folder), or that there is none, and which claims read each kind.  A list to display."""
    from IPython.display import Markdown

    from .. import recordings
    from ..claims.ledger import claims_reading

    rec = recordings.recordings(root=root)
    if rec.empty:
        out = [Markdown("No recording has been ingested yet (`python -m tempo ingest`): every cluster claim "
                        "above reads *needs a cluster*.")]
    else:
        out = [rec.assign(folder=rec.path.map(lambda p: p.name))[["kind", "machine", "date", "folder"]]]
    out.append(Markdown("Claims read from ingested recordings: " + "; ".join(
        f"{k}: {', '.join(claims_reading(k))}" for k in ("epbench", "serve-bench"))))
    return out
