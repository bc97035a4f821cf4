"""Chapter 99, *The claims ledger* (``notebooks/99_claims_ledger.md``): the ledger's summary
line and its coloured table as the page shows them, and the list of ingested recordings.  The
ledger itself is :mod:`tempo.book.claims`."""
from __future__ import annotations

import re

import pandas as pd

from ..claims.registry import STATUS_COLORS as _COLORS, STATUSES as _STATUSES

#: background colour of a ledger row per status (in the order of ``claims.STATUSES``)
STATUS_COLORS = [_COLORS[s][1] for s in _STATUSES]


def summary_markdown(df: pd.DataFrame, profile: str) -> str:
    """The ledger's one-paragraph summary (:func:`tempo.book.claims.summary_markdown`) without
    its link to this chapter."""
    from .. import claims

    return claims.summary_markdown(df, profile).replace(" See the [Claims ledger](claims-ledger) chapter.", "")


def _alternatives_html(sens: pd.DataFrame, cid: str) -> str:
    """A ledger cell: how many readings the claim depends on and how many move its verdict,
    expanding to each alternative's value and status."""
    import html

    from .. import claims

    rows = sens[sens.id == cid] if len(sens) else sens
    if rows.empty:
        return ""
    moves = [r for r in rows.itertuples() if claims.verdict_moves(r.paper_reading_status, r.status)]
    items = "".join(f"<li>{html.escape(r.reading)} = {html.escape(r.choice)}: {html.escape(str(r.ours) or '-')} "
                    f"({'<b>' if r in moves else ''}{html.escape(r.status)}{'</b>' if r in moves else ''})</li>"
                    for r in rows.itertuples())
    n = rows.reading.nunique()
    return (f"<details><summary>{n} reading{'s' if n > 1 else ''}, {len(rows)} alternatives; "
            f"{len(moves)} move the verdict</summary><ul>{items}</ul></details>")


#: what replaces the routing-trace recipe in each note: the page says the recipe once
TRACE_RECIPE_REF = "record one as the box above the table says"


def trace_recipe() -> str:
    """The recipe for recording a routing trace (:data:`tempo.book.claims.RECORD_TRACE`) as a
    Markdown sentence, said once above the ledger table."""
    from .. import claims

    return claims.RECORD_TRACE[0].upper() + claims.RECORD_TRACE[1:] + "."


def _inline_code(text: str) -> str:
    """HTML-escaped ``text`` with its `backtick` spans as <code>."""
    import html
    import re

    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


#: a note longer than this (characters) shows its first sentence and folds the rest
NOTE_FOLD = 240


def _note_html(note: str) -> str:
    """A ledger note as HTML: whole when short; else its first sentence, and the rest in a
    collapsed "the whole note" detail (nothing is cut)."""
    if len(note) <= NOTE_FOLD:
        return _inline_code(note)
    cut = note.find(". ", 40)
    if cut < 0 or cut > NOTE_FOLD:
        cut = note.rfind(" ", 0, NOTE_FOLD)
    head, rest = note[:cut + 1], note[cut + 1:]
    return (f"{_inline_code(head)}<details><summary>the whole note</summary>{_inline_code(rest.strip())}</details>")


def ledger_html(df: pd.DataFrame) -> str:
    """The ledger (:func:`tempo.book.claims.build_ledger`) as the page's HTML table, four columns
    that fit a 1280 px page without horizontal scrolling: the claim (its id and section above
    it; its note, tolerance, evidence, source and the values under other readings below it),
    the paper's number, ours and the status, each row coloured by its status.  The routing-trace
    recipe the trace claims share is replaced by a pointer to :func:`trace_recipe`."""
    import html

    from .. import claims

    show = claims.show_table(df)
    if len(STATUS_COLORS) != len(claims.STATUSES):
        raise ValueError(f"STATUS_COLORS has {len(STATUS_COLORS)} colours for {len(claims.STATUSES)} statuses")
    colors = dict(zip(claims.STATUSES, STATUS_COLORS))
    sens = df.attrs.get("sensitivity")
    rows = []
    for r in show.itertuples():
        note = str(r.note or "")
        note = "" if note == "nan" else note.replace(claims.RECORD_TRACE, TRACE_RECIPE_REF)
        unit = "" if str(r.unit) == "nan" else f" {html.escape(str(r.unit))}"
        detail = [f"tolerance: {html.escape(str(r.tolerance))}" if str(r.tolerance) not in ("", "nan") else "",
                  f"evidence: {html.escape(str(r.evidence))}" if str(r.evidence) not in ("", "nan") else ""]
        detail = "; ".join(d for d in detail if d)
        cell = (f'<b id="claim-{html.escape(r.id)}">{html.escape(r.id)}</b> <small>{html.escape(str(r.section))}</small>'
                f"<br>{html.escape(str(r.claim))}"
                + (f"<br><small>{_note_html(note)}</small>" if note else "")
                + (f"<br><small>{detail}</small>" if detail else "")
                + (f"<details><summary><small>source</small></summary><small>{_inline_code(str(r.provenance))}</small></details>"
                   if str(r.provenance or "").strip() not in ("", "nan") else "")
                + (_alternatives_html(sens, r.id) if sens is not None else ""))
        rows.append(f'<tr style="background-color: {colors[r.status]}"><td>{cell}</td>'
                    f"<td>{html.escape(str(r.paper))}{unit}</td><td>{html.escape(str(r.ours))}{unit}</td>"
                    f"<td>{html.escape(r.status)}</td></tr>")
    head = "<tr><th>claim</th><th>paper</th><th>this artifact</th><th>status</th></tr>"
    cols = '<col style="width: 58%"><col style="width: 13%"><col style="width: 13%"><col style="width: 16%">'
    return ('<div class="tempo-ledger" style="font-size: 0.85em"><table style="table-layout: fixed; width: 100%; '
            f'overflow-wrap: anywhere">{cols}<thead>{head}</thead><tbody>{"".join(rows)}</tbody></table></div>')


def readings_effects(df: pd.DataFrame) -> pd.DataFrame:
    """:func:`readings_claims` folded to fit a page: per claim some reading lists, the readings
    whose alternatives move its verdict, change only its value, change nothing, or were not run
    in this build (comma-separated)."""
    m = readings_claims(df)
    cols = {"verdict": "move the verdict", "value": "change the value", "=": "change nothing", "not run": "not run"}
    return pd.DataFrame([{label: ", ".join(r for r in m.columns if row[r] == effect) for effect, label in cols.items()}
                         for _, row in m.iterrows()], index=m.index, columns=list(cols.values()))


def readings_claims(df: pd.DataFrame) -> pd.DataFrame:
    """Readings x claims: for each claim some reading lists (rows) and each reading (columns),
    what the reading's alternatives do to the claim in this build: "verdict" (an alternative
    gives another verdict), "value" (another value, the same verdict), "=" (the same value) or
    "not run" (no alternative run in this build); empty where the reading does not list the
    claim.  From ``df.attrs["sensitivity"]`` (:func:`tempo.book.claims.build_ledger`)."""
    from .. import claims

    sens = df.attrs.get("sensitivity")
    if sens is None or sens.empty:
        return pd.DataFrame()
    rank = {"": 0, "=": 1, "not run": 2, "value": 3, "verdict": 4}

    def effect(r):
        if claims.verdict_moves(r.paper_reading_status, r.status):
            return "verdict"
        if r.status == "not run in this build":
            return "not run"
        return "value" if str(r.ours) != str(r.paper_reading_ours) else "="

    cells: dict = {}
    for r in sens.itertuples():
        k = (r.id, r.reading)
        e = effect(r)
        cells[k] = e if rank[e] > rank[cells.get(k, "")] else cells.get(k, e)
    ids = [i for i in df.id if any(k[0] == i for k in cells)]
    rids = list(dict.fromkeys(sens.reading))
    return pd.DataFrame([[cells.get((i, r), "") for r in rids] for i in ids], index=pd.Index(ids, name="claim"),
                        columns=rids)


def verdicts_moved_by(df: pd.DataFrame) -> pd.DataFrame:
    """One row per alternative reading (id = choice) that moves at least one verdict: the claims
    whose verdict it moves, each as ``claim (paper's reading's status -> this one's)``, and how
    many other claims it changes in value only."""
    from .. import claims

    sens = df.attrs.get("sensitivity")
    if sens is None or sens.empty:
        return pd.DataFrame(columns=["alternative", "verdict moves", "value changes only"])
    rows = []
    for (rid, choice), g in sens.groupby(["reading", "choice"], sort=False):
        mv = [f"{r.id} ({r.paper_reading_status} -> {r.status})" for r in g.itertuples()
              if claims.verdict_moves(r.paper_reading_status, r.status)]
        val = sum(1 for r in g.itertuples() if not claims.verdict_moves(r.paper_reading_status, r.status)
                  and r.status != "not run in this build" and str(r.ours) != str(r.paper_reading_ours))
        if mv:
            rows.append({"alternative": f"{rid} = {choice}", "verdict moves": "; ".join(mv), "value changes only": val})
    return pd.DataFrame(rows, columns=["alternative", "verdict moves", "value changes only"])


def ledger_numbers(df: pd.DataFrame) -> dict:
    """What the ledger chapter's prose glues: the counts per status (``led_<status>``), the
    claims some reading lists, those whose verdict some alternative moves, and the alternatives
    run and not run."""
    from .. import claims

    c = claims.counts(df)
    out = {"led_" + re.sub(r"\W+", "_", k).strip("_"): float(v) for k, v in c.items()}   # a status as a glue name
    sens = df.attrs.get("sensitivity")
    if sens is not None and len(sens):
        moved = {r.id for r in sens.itertuples() if claims.verdict_moves(r.paper_reading_status, r.status)}
        out.update(led_sens_claims=float(sens.id.nunique()), led_sens_moved=float(len(moved)),
                   led_sens_alts=float(len(sens)), led_sens_notrun=float((sens.status == "not run in this build").sum()))
    return out


def compare_ledgers(before, after, sensitivity=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two ledgers (``claims.csv`` files as :func:`tempo.book.claims.build_ledger` writes them, or
    DataFrames): (the counts per status before and after, one row per claim whose status moved
    with both values and the after ledger's note).  ``sensitivity`` (the after build's
    ``claims_sensitivity.csv``; by default the one beside ``after`` when it is a path) names,
    for each moved claim, the alternative readings under which the after build gives the
    before status back: the readings whose paper choice moved it ("-" when none does, i.e. a
    change of code or of verdict logic that is not a reading)."""
    from pathlib import Path

    from .. import claims

    def load(x, what):
        if isinstance(x, pd.DataFrame):
            return x
        p = Path(x)
        if not p.exists():
            raise ValueError(f"{what}: no such file {p}")
        return pd.read_csv(p, dtype={"ours": str, "paper": str}, keep_default_na=False)

    b, a = load(before, "before").set_index("id"), load(after, "after").set_index("id")
    if sensitivity is None and not isinstance(after, pd.DataFrame):
        cand = Path(after).with_name("claims_sensitivity.csv")
        sensitivity = cand if cand.exists() else None
    sens = load(sensitivity, "sensitivity") if sensitivity is not None else None
    statuses = list(dict.fromkeys(list(claims.STATUSES) + list(b.status) + list(a.status)))
    counts = pd.DataFrame({"before": b.status.value_counts(), "after": a.status.value_counts()}).reindex(statuses).fillna(0)
    counts = counts.astype(int)
    counts = counts[(counts.before > 0) | (counts.after > 0)]
    rows = []
    for cid in [i for i in a.index if i in b.index] + [i for i in a.index if i not in b.index]:
        sb = b.status.get(cid, "(absent)")
        if sb == a.loc[cid, "status"]:
            continue
        by = "-"
        if sens is not None:
            g = sens[(sens.id == cid) & (sens.status == sb)]
            by = "; ".join(f"{r.reading}={r.choice}" for r in g.itertuples()) or "-"
        rows.append({"id": cid, "before": sb, "after": a.loc[cid, "status"], "ours before": b.ours.get(cid, ""),
                     "ours after": a.loc[cid, "ours"], "paper": a.loc[cid, "paper"],
                     "before status under (after build)": by, "note (after)": a.loc[cid, "note"]})
    return counts, pd.DataFrame(rows, columns=["id", "before", "after", "ours before", "ours after", "paper",
                                               "before status under (after build)", "note (after)"])


def recordings_view(root=None) -> list:
    """The ingested recordings (:func:`tempo.measured.catalog.recordings` stored by ``python -m
    tempo ingest``: kind, machine, date, folder), or that there is none, and which claims read
    each kind.  A list to display."""
    from IPython.display import Markdown

    from ...measured import catalog
    from ..claims.ledger import claims_reading

    rec = catalog.recordings(root=root)
    rec = rec[rec.ingested != ""]
    if rec.empty:
        out = [Markdown("No recording has been ingested yet (`python -m tempo ingest`).")]
    else:
        out = [rec.assign(folder=rec.path.map(lambda p: p.name))[["kind", "machine", "date", "folder"]]]
    out.append(Markdown("Claims read from ingested recordings: " + "; ".join(
        f"{k}: {', '.join(claims_reading(k))}" for k in ("epbench", "serve-bench"))))
    return out


def readings_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per reading of ``data/paper/readings.yaml``: how settled the text leaves it, the
    paper's choice (the one the verdicts use), the text that supports the alternatives
    (``against``), and what each alternative gives in this build: the verdicts it moves (the
    paper's reading's status first) and how many values it changes only, from
    ``df.attrs["sensitivity"]``."""
    from .. import claims
    from ...paper import readings

    sens = df.attrs.get("sensitivity")
    rows = []
    for sp in readings.specs().values():
        gives = []
        for choice in sp.choices:
            if choice == sp.paper:
                continue
            g = sens[(sens.reading == sp.id) & (sens.choice == choice)] if sens is not None and len(sens) else None
            if g is None or g.empty:
                st = df.set_index("id").status.reindex(list(sp.claims)).dropna() if "status" in df else pd.Series(dtype=str)
                why = (" (its claims wait for evidence this build lacks: " + ", ".join(sorted(set(st))) + ")"
                       if len(st) and st.isin(list(claims.NEED_STATUS.values())).all() else "")
                gives.append(f"{choice}: no claim computed under it{why}")
                continue
            mv = [f"{r.id} ({r.paper_reading_status} -> {r.status}, {r.ours or '-'})" for r in g.itertuples()
                  if claims.verdict_moves(r.paper_reading_status, r.status)]
            val = sum(1 for r in g.itertuples() if not claims.verdict_moves(r.paper_reading_status, r.status)
                      and r.status != "not run in this build" and str(r.ours) != str(r.paper_reading_ours))
            run = int((g.status != "not run in this build").sum())
            gives.append(f"{choice}: " + (f"moves {', '.join(mv)}; " if mv else "moves no verdict; ")
                         + f"changes {val} other value(s) of {run} computed")
        rows.append({"reading": sp.id, "settled": sp.settled, "paper's choice": sp.paper,
                     "what supports the alternatives": sp.against or "(not recorded)",
                     "what each alternative gives": " | ".join(gives) if gives else "(one choice only)"})
    return pd.DataFrame(rows)


def readings_html(df: pd.DataFrame) -> str:
    """:func:`readings_table` as the page's compact HTML table: the text against each choice
    collapsed under its first words."""
    import html

    t = readings_table(df)

    def fold(text):
        text = str(text)
        head = " ".join(text.split()[:8])
        return (f"<details><summary><small>{html.escape(head)} ...</small></summary><small>{html.escape(text)}"
                f"</small></details>") if len(text) > len(head) else f"<small>{html.escape(text)}</small>"

    t = t.assign(**{"what supports the alternatives": t["what supports the alternatives"].map(fold),
                    "what each alternative gives": t["what each alternative gives"].map(
                        lambda s: "<br>".join(f"<small>{html.escape(x)}</small>" for x in str(s).split(" | ")))})
    return (f'<div style="overflow-x: auto; font-size: 0.85em">'
            f'{t.to_html(index=False, escape=False)}</div>')
