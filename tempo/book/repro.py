"""The reproduction map: every paper table (1-11), figure (1-13), theorem and abstract number
-> the chapter and section that treats it -> the command that regenerates it -> its output file
-> what it needs (a CPU, one GPU, a GPU cluster, or a recorded routing trace) -> the paper's
value -> the ledger ids (``data/paper/claims.yaml``) that track it.

The map itself is data, ``data/paper/repro_map.csv`` (one row per paper item); this module
loads and checks it, counts it, renders it as the book's "Reproduction map" page, and states
what one H200 should measure before anyone measures (:func:`expected_floor`).
"""
from __future__ import annotations

import html
import re

import pandas as pd

from ..core import paths
from ..core.io import read_csv, read_regular

MAP_FILE = paths.PAPER / "repro_map.csv"
#: the most bytes the repro map or a chapter's source may hold (each is under 100 KB)
MAX_BYTES = 16 * 2**20
COLUMNS = ["item", "title", "chapter", "section", "regenerated", "needs", "command", "output", "hardware",
           "expected", "claims", "note"]
#: what regenerating the item exactly as the paper has it requires
NEEDS = {"cpu": "regenerated on CPU", "gpu": "needs one GPU", "cluster": "needs a GPU cluster",
         "trace": "needs a recorded routing trace"}
#: how much of the item the CPU book build computes
REGENERATED = ("yes", "partly", "no")
#: the paper's numbered items (arXiv 2608.13057v2): Tables 1-11, Figures 1-13
PAPER_TABLES = 11
PAPER_FIGURES = 13
#: seconds per chapter, PROFILE=full, on the 2-core VM, idle: the notebooks' execution times of
#: ``make build/executed/full/99_claims_ledger.ipynb`` from an empty ``build/`` on 2026-12-01
#: (commit aead779, 600 s in all; every seed and alternative reading of the ledger included).
#: Chapter 04 was one notebook then: its three lectures share one entry, "04"
CHAPTER_CPU_S = {"01_balance_time": 7, "02_theory": 59, "03_solver": 202, "04": 256,
                 "05_calibration": 9, "06_runtime": 18, "07_serving": 20, "99_claims_ledger": 19}
#: Section 2.2: the fitted floors sit at 1.13-1.24x the weight-streaming (roofline) bound
ROOFLINE_RATIO = (1.13, 1.24)


def load_map(path=None) -> pd.DataFrame:
    """The reproduction map, validated: every column present, ``needs`` and ``regenerated`` from
    their vocabularies, no duplicate item."""
    df = read_csv(path or MAP_FILE, MAX_BYTES, dtype=str, keep_default_na=False)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"repro map {path or MAP_FILE} lacks columns {missing}")
    bad = set(df.needs) - set(NEEDS)
    if bad:
        raise ValueError(f"repro map: unknown needs {sorted(bad)}; expected {list(NEEDS)}")
    bad = set(df.regenerated) - set(REGENERATED)
    if bad:
        raise ValueError(f"repro map: unknown regenerated {sorted(bad)}; expected {list(REGENERATED)}")
    dup = df.item[df.item.duplicated()].tolist()
    if dup:
        raise ValueError(f"repro map: duplicate items {dup}")
    return df[COLUMNS]


def paper_items() -> list[str]:
    """The numbered tables and figures the map must cover."""
    return [f"Table {i}" for i in range(1, PAPER_TABLES + 1)] + [f"Figure {i}" for i in range(1, PAPER_FIGURES + 1)]


def slug(heading: str) -> str:
    """The HTML anchor Sphinx gives a section heading (docutils ``make_id``, ASCII case)."""
    s = re.sub(r"[^a-z0-9]+", "-", heading.lower())
    return re.sub(r"-+", "-", s).strip("-")


def headings(chapter: str) -> list[str]:
    """Section headings (``#`` .. ``####``) of a notebook's MyST source."""
    text = read_regular(paths.NOTEBOOKS / f"{chapter}.md", MAX_BYTES, f"{chapter}.md", follow=True).decode()
    return [m.group(1).strip() for m in re.finditer(r"^#{1,4} (.+)$", text, flags=re.M)]


def check_map(df: pd.DataFrame, claim_ids) -> list[str]:
    """Problems with the map, empty when it is complete: a paper table or figure without a
    row, a ledger id that is unknown or that no row names, a chapter without a notebook, a
    section that is not a heading of its chapter, a non-CPU row without its hardware."""
    problems = []
    for it in paper_items():
        if it not in set(df.item):
            problems.append(f"no row for {it}")
    claim_ids = set(claim_ids)
    named = set()
    for r in df.itertuples():
        ids = set(r.claims.split())
        named |= ids
        for cid in sorted(ids - claim_ids):
            problems.append(f"{r.item}: unknown ledger id {cid!r}")
        if not (paths.NOTEBOOKS / f"{r.chapter}.md").exists():
            problems.append(f"{r.item}: no notebook {r.chapter}")
        elif r.section not in headings(r.chapter):
            problems.append(f"{r.item}: {r.section!r} is not a heading of {r.chapter}")
        if r.needs != "cpu" and not r.hardware:
            problems.append(f"{r.item}: needs {r.needs} but names no hardware")
        if not r.command:
            problems.append(f"{r.item}: no command")
    for cid in sorted(claim_ids - named):
        problems.append(f"ledger id {cid!r} is on no row of the map")
    return problems


def counts(df: pd.DataFrame) -> pd.DataFrame:
    """Rows per ``needs`` category (and how many of them the CPU build computes fully or in part)."""
    out = []
    for key, label in NEEDS.items():
        sub = df[df.needs == key]
        out.append({"category": label, "items": len(sub),
                    "computed on CPU (fully)": int((sub.regenerated == "yes").sum()),
                    "computed on CPU (in part)": int((sub.regenerated == "partly").sum()),
                    "quoted only": int((sub.regenerated == "no").sum())})
    return pd.DataFrame(out)


def runtime(r) -> str:
    """What one row costs: the chapter's CPU time, and the hardware when it needs more."""
    s = CHAPTER_CPU_S.get(r.chapter)
    what = "chapter"
    if s is None and r.chapter[:2] in CHAPTER_CPU_S:   # a chapter of several lectures, timed as one
        s, what = CHAPTER_CPU_S[r.chapter[:2]], f"chapter {r.chapter[:2]}, all its lectures"
    cpu = "" if s is None else (f"{what}: {s} s on CPU" if s < 60 else f"{what}: {s // 60} min {s % 60:02d} s on CPU")
    return cpu if r.needs == "cpu" else f"{r.hardware}" + (f" ({cpu})" if cpu and r.regenerated != "no" else "")


def to_html(df: pd.DataFrame) -> str:
    """The map as one three-column HTML table that fits a 1280 px book page: the paper item with
    its chapter section (a link; pages sit side by side under ``book/generated/``) and whether
    this build computes it; the command, its output and its CPU time or hardware; the paper's
    value and the ledger ids."""
    head = ["paper item, where, computed here", "command, output, CPU time or hardware", "paper value and ledger ids"]
    e = html.escape
    rows = []
    for r in df.itertuples():
        where = f'<a href="{r.chapter}.html#{slug(r.section)}">{e(r.chapter)}</a>: {e(r.section)}'
        note = f" <i>{e(r.note)}</i>" if r.note else ""
        out = f"<br>&rarr; <code>{e(r.output)}</code>" if r.output else ""
        ids = " ".join(f"<code>{e(c)}</code>" for c in r.claims.split())
        cells = [f"<b>{e(r.item)}</b>: {e(r.title)}<br>{where}<br><small>computed here: {e(r.regenerated)}{note}</small>",
                 f"<code>{e(r.command)}</code>{out}<br><small>{e(runtime(r))}</small>",
                 e(r.expected) + (f"<br>{ids}" if ids else "")]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    cols = '<col style="width: 36%"><col style="width: 36%"><col style="width: 28%">'
    return ('<div class="repro-map"><table class="table repro-map" style="table-layout: fixed; width: 100%">' + cols
            + "<thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table></div>")


#: (calibration shape, named parameter set) pairs whose floor a GPU's bandwidth predicts
FLOOR_SHAPES = [("dsv3", "dsv3-offline"), ("qwen3-30b", "qwen3-30b-offline"), ("dsv2-lite", "dsv2lite-offline")]


def expected_floor(shape_name: str, param_set: str, hbm_tb_s: float) -> dict:
    """What a calibration on a GPU with ``hbm_tb_s`` of HBM bandwidth should find, before it runs.

    The floor: the weight-streaming bound (Section 2.2, :func:`tempo.calib.shapes.roofline_us`)
    times the 1.13-1.24 the paper's fitted floors sit above it.  The inflection: that floor over
    the per-token slope ``beta`` of ``param_set``, assuming the GPU has the same tensor throughput
    as the one the paper fitted on (true of an H200 against an H100-SXM-class part: same die and
    clocks, more and faster memory)."""
    from ..calib.shapes import roofline_us
    from ..core.cost import CostModel

    roof = roofline_us(shape_name, hbm_tb_s)
    beta = CostModel.named(param_set).beta
    lo, hi = ROOFLINE_RATIO
    return {"shape": shape_name, "roofline_us": roof, "b_lo_us": lo * roof, "b_hi_us": hi * roof,
            "beta_us": beta, "nstar_lo": lo * roof / beta, "nstar_hi": hi * roof / beta}
