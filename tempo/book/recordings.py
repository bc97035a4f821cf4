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


#: the most bytes a stored file is read or inflated to (ingest stores at most 5 MiB per file)
MAX_BYTES = 64 * 2**20
#: the tables each kind must hold and the columns the claims read
TABLES = {"epbench": {"epbench.csv.gz": ("step", "policy", "layer_us", "expert_us", "model_us")},
          "serve-bench": {"pairs.csv.gz": ("window", "workload", "policy", "kept")}}


def _read_json(path: Path):
    from ..core.io import read_regular

    try:
        return json.loads(read_regular(path, MAX_BYTES))
    except RecursionError:
        raise ValueError(f"{path.name} nests too deep") from None


def manifests(root: Path, skipped: list | None = None):
    """(folder, manifest) of every recording stored under ``root`` (``<machine>/<folder>/manifest.json``).
    A manifest that cannot be read (a link, a FIFO, not JSON, not an object) is left out and,
    when ``skipped`` is a list, appended to it as ``(folder, why)``."""
    for m in sorted(root.glob("*/*/manifest.json")):
        try:
            man = _read_json(m)
            if not isinstance(man, dict):
                raise ValueError(f"manifest.json is a {type(man).__name__}, not an object")
        except (OSError, ValueError) as exc:
            if skipped is not None:
                skipped.append((m.parent, f"manifest.json: {exc}"))
            continue
        yield m.parent, man


def _table(path: Path, columns=()) -> pd.DataFrame:
    """A stored ``.csv.gz`` read as untrusted input (regular file, capped read and inflate),
    with ``columns`` required; ``ValueError`` naming the file otherwise."""
    import io

    from ..core.io import gunzip_limited, read_regular

    data = gunzip_limited(read_regular(path, MAX_BYTES), MAX_BYTES, path.name)
    try:
        df = pd.read_csv(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 -- any parse failure is a bad recording
        raise ValueError(f"{path.name} is not a readable CSV ({type(exc).__name__})") from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{path.name} lacks the columns {missing}")
    return df


def check(folder: Path, man: dict) -> None:
    """Raise ``ValueError`` naming what is wrong unless the recording in ``folder`` loads: its
    manifest's fields have their types and its tables their columns with numbers where the
    claims compute."""
    import math

    for k in ("machine", "date", "ingested_utc"):
        if man.get(k) is not None and not isinstance(man[k], str):
            raise ValueError(f"manifest.json field {k!r} must be a string")
    for k in ("world_size", "tokens", "gpus", "ep", "tp", "steps"):
        v = man.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise ValueError(f"manifest.json field {k!r} must be an integer")
    for k in ("policies", "workloads"):
        if man.get(k) is not None and not isinstance(man[k], list):
            raise ValueError(f"manifest.json field {k!r} must be a list")
    for name, cols in TABLES.get(man.get("kind"), {}).items():
        df = _table(folder / name, cols)
        num = [c for c in cols if c.endswith("_us") or c in ("step", "window")]
        for c in num:
            v = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=float)
            if not all(math.isfinite(x) for x in v):
                raise ValueError(f"{name}: column {c} must hold finite numbers")


def recordings(kind: str | None = None, root: Path | None = None) -> pd.DataFrame:
    """Every ingested recording under ``data/measured`` (newest first): kind, machine, date,
    name (the folder), path and its manifest.  Calibrations written by ``calibrate`` directly
    (no ``kind``) are listed by :func:`tempo.calib.record.recordings`."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    import warnings

    rows, skipped = [], []
    for folder, man in manifests(Path(root or measured_root()), skipped):
        if man.get("kind") not in KINDS or (kind and man["kind"] != kind):
            continue
        try:
            check(folder, man)
        except (OSError, ValueError) as exc:
            skipped.append((folder, str(exc)))
            continue
        rows.append({"kind": man["kind"], "machine": man.get("machine"), "date": man.get("date"),
                     "ingested": man.get("ingested_utc", ""), "name": folder.name, "path": folder, "manifest": man})
    for folder, why in skipped:
        warnings.warn(f"skipping the recording {folder.parent.name}/{folder.name}: {why}", RuntimeWarning, stacklevel=2)
    df = pd.DataFrame(rows, columns=["kind", "machine", "date", "ingested", "name", "path", "manifest"])
    df = df.sort_values(["date", "ingested"], ascending=False, kind="stable").reset_index(drop=True)
    df.attrs["skipped"] = skipped
    return df


def where(row) -> str:
    """A recording's folder as the ledger names it: ``data/measured/<machine>/<folder>``."""
    return f"data/measured/{Path(row['path']).parent.name}/{row['name']}"


def load_epbench(path) -> pd.DataFrame:
    """The per-step epbench CSV of a stored epbench recording."""
    return _table(Path(path) / "epbench.csv.gz", TABLES["epbench"]["epbench.csv.gz"])


def load_serve(path) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """(pairs, runs or None) of a serve-bench recording."""
    path = Path(path)
    runs = _table(path / "runs.csv.gz") if (path / "runs.csv.gz").exists() else None
    return _table(path / "pairs.csv.gz", TABLES["serve-bench"]["pairs.csv.gz"]), runs
