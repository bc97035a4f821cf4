"""The recordings stored under ``data/measured/`` by ``python -m tempo ingest``, read back.

:func:`recordings` lists them (kind, machine, date, folder, manifest), newest first;
:func:`load_epbench` and :func:`load_serve` read one; :func:`where` names its folder as the
ledger does.  The writer is :mod:`tempo.book.ingest`; the claim functions that turn a recording
into a ledger value (:mod:`tempo.book.claims.functions`) read it through this module.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

#: the kinds of recording ingest stores (the folder's ``manifest.json`` ``kind``)
KINDS = ("epbench", "serve-bench", "calibration", "trace")


def measured_root() -> Path:
    """``data/measured`` (``tempo.calib.record.MEASURED``, read at call time so tests can move it)."""
    from ..calib import record

    return Path(record.MEASURED)


def manifests(root: Path):
    """(folder, manifest) of every recording stored under ``root`` (``<machine>/<folder>/manifest.json``)."""
    for m in sorted(root.glob("*/*/manifest.json")):
        try:
            yield m.parent, json.loads(m.read_text())
        except (OSError, ValueError):
            continue


def recordings(kind: str | None = None, root: Path | None = None) -> pd.DataFrame:
    """Every ingested recording under ``data/measured`` (newest first): kind, machine, date,
    name (the folder), path and its manifest.  Calibrations written by ``calibrate`` directly
    (no ``kind``) are listed by :func:`tempo.calib.record.recordings`."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    rows = []
    for folder, man in manifests(Path(root or measured_root())):
        if man.get("kind") not in KINDS or (kind and man["kind"] != kind):
            continue
        rows.append({"kind": man["kind"], "machine": man.get("machine"), "date": man.get("date"),
                     "ingested": man.get("ingested_utc", ""), "name": folder.name, "path": folder, "manifest": man})
    df = pd.DataFrame(rows, columns=["kind", "machine", "date", "ingested", "name", "path", "manifest"])
    return df.sort_values(["date", "ingested"], ascending=False, kind="stable").reset_index(drop=True)


def where(row) -> str:
    """A recording's folder as the ledger names it: ``data/measured/<machine>/<folder>``."""
    return f"data/measured/{Path(row['path']).parent.name}/{row['name']}"


def load_epbench(path) -> pd.DataFrame:
    """The per-step epbench CSV of a stored epbench recording."""
    return pd.read_csv(Path(path) / "epbench.csv.gz")


def load_serve(path) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """(pairs, runs or None) of a serve-bench recording."""
    path = Path(path)
    runs = pd.read_csv(path / "runs.csv.gz") if (path / "runs.csv.gz").exists() else None
    return pd.read_csv(path / "pairs.csv.gz"), runs
