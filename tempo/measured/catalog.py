"""The one reader of ``data/measured/``: listing, loading and checking the recordings.

Every recording is a folder ``<root>/<machine>/<name>/`` with a ``manifest.json``
(:mod:`tempo.measured.store` writes them).  Its kind:

* ``calibration``  ``samples.csv.gz`` (G, n, N, T, kind, t_us), ``fit.json`` (each form's
  parameters and error): ``python -m tempo calibrate``, gpu-check's grids, or ingested;
* ``gpu-check``    ``results.json``, ``summary.md`` and per-section ``*.csv.gz``;
* ``epbench``      ``epbench.csv.gz``, ingested;
* ``serve-bench``  ``pairs.csv.gz`` (and ``runs.csv.gz``, ``records.jsonl.gz``), ingested;
* ``trace``        ``trace.npz``, ingested.

Files are read as untrusted input: regular files only (no link followed, no FIFO read), sizes
capped, every field a reader uses type-checked; a file whose sha256 differs from the one its
manifest gives is refused.  A listing never raises on a bad recording: it skips it with a
warning and names it in ``attrs["skipped"]``.
"""
from __future__ import annotations

import datetime as dt
import io
import math
import os
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.io import gunzip_limited, loads_json, read_regular
from . import store

#: the most bytes a recording's file may hold on disk, and a table once inflated
MAX_BYTES = 64 * 2**20
KINDS = ("calibration", "gpu-check", "epbench", "serve-bench", "trace")
SAMPLE_COLUMNS = ("G", "n", "N", "T", "kind", "t_us")
#: the tables an ingested kind must hold and the columns the claims read
TABLES = {"epbench": {"epbench.csv.gz": ("step", "policy", "layer_us", "expert_us", "model_us")},
          "serve-bench": {"pairs.csv.gz": ("window", "workload", "policy", "kept")}}
#: a listing's columns per kind (``kind=None``: all of them)
COLUMNS = {"calibration": ["machine", "date", "backend", "shape", "device", "cells", "path"],
           "gpu-check": ["machine", "date", "device", "sections", "path"],
           "epbench": ["kind", "machine", "date", "ingested", "name", "path", "manifest"]}
COLUMNS["serve-bench"] = COLUMNS["trace"] = COLUMNS["epbench"]
ALL_COLUMNS = ["kind", "machine", "date", "name", "backend", "shape", "device", "cells", "sections", "ingested",
               "path", "manifest"]
_KIND = re.compile(r"[A-Za-z0-9_.-]+")


# ------------------------------------------------------------------------------ field checks
def _number(v) -> bool:
    """A JSON number (not a bool, not NaN; ``n_star`` may be Infinity)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v)


#: the physical range of a calibration cell: activated experts G and tokens per expert n as
#: ``python -m tempo calibrate`` accepts them (``--G`` up to 4,096, ``--n-max`` up to 2^20), and
#: a measured time t_us > 0 and at most 10^9 us (1,000 s for one cell; the slowest recorded
#: cell here is 0.5 s)
CELL_RANGES = {"G": (1, 4096), "n": (1, 2**20), "t_us": (0.0, 1e9)}


def cell_problem(G, n, t_us) -> str | None:
    """Why one calibration cell lies outside :data:`CELL_RANGES` (None when it does not)."""
    (g_lo, g_hi), (n_lo, n_hi), (_, t_hi) = CELL_RANGES["G"], CELL_RANGES["n"], CELL_RANGES["t_us"]
    if not g_lo <= G <= g_hi:
        return f"G = {G} outside [{g_lo}, {g_hi}]"
    if not n_lo <= n <= n_hi:
        return f"n = {n} outside [{n_lo}, {n_hi}]"
    if not (math.isfinite(t_us) and 0 < t_us <= t_hi):
        return f"t_us = {t_us!r} outside (0, {t_hi:g}]"
    return None


def check_samples(s: pd.DataFrame, what: str = "samples.csv.gz") -> pd.DataFrame:
    """``s`` with its columns typed (G, n, N, T int64; kind str; t_us float64) when every cell is
    well formed: G, n integers in :data:`CELL_RANGES`, N, T integers >= 0, kind a plain word,
    t_us finite in (0, 10^9].  Raises ``ValueError`` naming the column otherwise."""
    missing = [c for c in SAMPLE_COLUMNS if c not in s.columns]
    if missing:
        raise ValueError(f"{what} lacks the columns {missing}")
    if s.empty:
        raise ValueError(f"{what} has no rows")
    out = s.copy()
    for c, lo in (("G", 1), ("n", 1), ("N", 0), ("T", 0)):
        v = pd.to_numeric(s[c], errors="coerce").to_numpy(dtype=float)
        hi = CELL_RANGES[c][1] if c in CELL_RANGES else 2**53 - 1
        if not (np.isfinite(v).all() and (v == np.round(v)).all() and (v >= lo).all() and (v <= hi).all()):
            raise ValueError(f"{what}: column {c} must hold integers in [{lo}, {hi}]")
        out[c] = v.astype(np.int64)
    t = pd.to_numeric(s["t_us"], errors="coerce").to_numpy(dtype=float)
    t_hi = CELL_RANGES["t_us"][1]
    if not (np.isfinite(t).all() and (t > 0).all() and (t <= t_hi).all()):
        raise ValueError(f"{what}: column t_us must hold measured times in (0, {t_hi:g}] us")
    out["t_us"] = t
    kinds = s["kind"].astype(str)
    if not kinds.map(lambda k: bool(_KIND.fullmatch(k))).all():
        raise ValueError(f"{what}: column kind must hold plain words (letters, digits, _ . -)")
    out["kind"] = kinds
    return out


def check_fits(fits, what: str = "fit.json") -> dict:
    """``fits`` when it is a ``fit.json``: an object of forms, each ``{"params": {name: number},
    "error": number >= 0 or null}`` whose parameters make a cost model
    (:class:`tempo.core.cost.CostModel`: ``b`` and ``beta`` given, every time parameter finite
    and >= 0; ``n_star`` >= 0, may be Infinity); ``ValueError`` naming the field otherwise."""
    from ..core.cost import CostModel

    if not isinstance(fits, dict):
        raise ValueError(f"{what} must be a JSON object of fitted forms, got {type(fits).__name__} {fits!r:.60}")
    for form, f in fits.items():
        if not isinstance(f, dict) or not isinstance(f.get("params"), dict):
            raise ValueError(f"{what}: form {form!r} must be an object with 'params'")
        p = f["params"]
        bad = [k for k, v in p.items() if not _number(v)]
        if bad:
            raise ValueError(f"{what}: form {form!r} params {bad[:3]} must be numbers")
        neg = [k for k, v in p.items() if v < 0]
        if neg:
            raise ValueError(f"{what}: form {form!r} params {neg[:3]} must be >= 0, got "
                             + ", ".join(f"{k} = {p[k]!r}" for k in neg[:3]))
        missing = [k for k in ("b", "beta") if k not in p]
        if missing:
            raise ValueError(f"{what}: form {form!r} lacks the params {missing}")
        try:
            CostModel(a=p.get("a", 0.0), b=p["b"], c=p.get("c", 0.0), beta=p["beta"], b2=p.get("b2", 0.0),
                      c2=p.get("c2"), gamma=p.get("gamma"))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{what}: form {form!r} params are no cost model ({exc})") from None
        err = f.get("error")
        if err is not None and not (_number(err) and 0 <= err < math.inf):
            raise ValueError(f"{what}: form {form!r} error must be a finite number >= 0, got {err!r:.60}")
    return fits


def check_manifest(man, what: str = "manifest.json") -> dict:
    """``man`` when a calibration's fields a reader uses have their types: backend and shape
    strings; machine, device, date strings when present (date YYYY-MM-DD); cells an integer."""
    if not isinstance(man, dict):
        raise ValueError(f"{what} must be a JSON object, got {type(man).__name__}")
    for k in ("backend", "shape"):
        if not isinstance(man.get(k), str) or not man[k]:
            raise ValueError(f"{what}: field {k!r} must be a non-empty string, got {man.get(k)!r:.60}")
    for k in ("machine", "device", "date", "command"):
        if man.get(k) is not None and not isinstance(man[k], str):
            raise ValueError(f"{what}: field {k!r} must be a string, got {type(man[k]).__name__} {man[k]!r:.60}")
    if man.get("date") is not None:
        try:
            dt.date.fromisoformat(man["date"])
        except ValueError:
            raise ValueError(f"{what}: field 'date' must be YYYY-MM-DD, got {man['date']!r:.60}") from None
    if man.get("cells") is not None and (isinstance(man["cells"], bool) or not isinstance(man["cells"], int)):
        raise ValueError(f"{what}: field 'cells' must be an integer, got {man['cells']!r:.60}")
    return man


def _check_common(man: dict) -> None:
    """The fields every kind's listing shows: strings and integers where present."""
    for k in ("machine", "date", "ingested_utc"):
        if man.get(k) is not None and not isinstance(man[k], str):
            raise ValueError(f"manifest.json field {k!r} must be a string")
    for k in ("world_size", "tokens", "gpus", "ep", "tp", "steps"):
        v = man.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise ValueError(f"manifest.json field {k!r} must be an integer")
    for k in ("policies", "workloads", "sections"):
        if man.get(k) is not None and not isinstance(man[k], list):
            raise ValueError(f"manifest.json field {k!r} must be a list")


# ------------------------------------------------------------------------------ reading files
def _read(folder: Path, name: str, man: dict | None = None) -> bytes:
    """A recording's file, checked against the sha256 its manifest gives (when it gives one)."""
    data = read_regular(Path(folder) / name, MAX_BYTES)
    want = (man or {}).get("files")
    if isinstance(want, dict) and isinstance(want.get(name), dict) and "sha256" in want[name]:
        if store.sha256(data) != want[name]["sha256"]:
            raise ValueError(f"{name} does not match the sha256 in manifest.json")
    return data


def read_progress(path) -> bytes:
    """The bytes of a run's progress file (``samples.partial.csv``), b"" when there is none."""
    path = Path(path)
    return read_regular(path, MAX_BYTES) if path.exists() or path.is_symlink() else b""


def in_progress(root=None, file: str = "samples.partial.csv") -> list[Path]:
    """The folders under ``root`` holding a run's progress file ``file`` (a calibration that
    has not completed; its recording may not exist yet), in folder order."""
    return [p.parent for p in sorted(store.root(root).glob(f"*/*/{file}"))
            if not p.parent.name.startswith(".") and not p.parent.parent.name.startswith(".")]


def _json(data: bytes, what: str):
    return loads_json(data, what)  # depth bounded before parsing


def read_manifest(folder) -> dict:
    """The ``manifest.json`` of ``folder`` as a dict; ``ValueError`` when it is not one."""
    man = _json(read_regular(Path(folder) / store.MANIFEST, MAX_BYTES), "manifest.json")
    if not isinstance(man, dict):
        raise ValueError(f"manifest.json is a {type(man).__name__}, not an object")
    return man


def _table(folder: Path, name: str, columns=(), man: dict | None = None) -> pd.DataFrame:
    """A stored ``.csv.gz`` with ``columns`` required; ``ValueError`` naming the file otherwise."""
    data = gunzip_limited(_read(folder, name, man), MAX_BYTES, name)
    try:
        df = pd.read_csv(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 -- any parse failure is a bad recording
        raise ValueError(f"{name} is not a readable CSV ({type(exc).__name__})") from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{name} lacks the columns {missing}")
    return df


def kind_of(man: dict) -> str | None:
    """A manifest's kind: its ``kind`` field, else ``gpu-check`` (it lists ``sections``), else
    ``calibration`` (it names a backend and a shape); None for anything else."""
    if man.get("kind") in KINDS:
        return man["kind"]
    if "sections" in man:
        return "gpu-check"
    if "backend" in man and "shape" in man:
        return "calibration"
    return None


def manifests(root=None, skipped: list | None = None):
    """``(folder, manifest)`` of every recording under ``root`` (default ``data/measured``), each
    manifest read once; hidden folders (a write in progress) are not recordings.  A manifest
    that cannot be read is left out and, when ``skipped`` is a list, appended to it as
    ``(folder, why)``."""
    for m in sorted(store.root(root).glob(f"*/*/{store.MANIFEST}")):
        if m.parent.name.startswith(".") or m.parent.parent.name.startswith("."):
            continue
        try:
            man = read_manifest(m.parent)
        except (OSError, ValueError) as exc:
            if skipped is not None:
                skipped.append((m.parent, f"manifest.json: {exc}"))
            continue
        yield m.parent, man


# ------------------------------------------------------------------------------ loading
def load_recording(path) -> tuple[pd.DataFrame, dict, dict]:
    """(samples, fits, manifest) of one calibration folder, every field checked
    (:func:`check_samples`, :func:`check_fits`, :func:`check_manifest`), each file against its
    manifest's sha256, and the manifest's cell count against the samples.  Raises
    ``ValueError`` naming the file and field (``FileNotFoundError`` for a missing file)."""
    path = Path(path)
    manifest = check_manifest(read_manifest(path))
    data = gunzip_limited(_read(path, "samples.csv.gz", manifest), MAX_BYTES, "samples.csv.gz")
    try:
        samples = pd.read_csv(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 -- any parse failure is a bad recording
        raise ValueError(f"samples.csv.gz is not a readable CSV ({type(exc).__name__})") from None
    samples = check_samples(samples)
    fits = check_fits(_json(_read(path, "fit.json", manifest), "fit.json"))
    if manifest.get("cells") is not None and manifest["cells"] != len(samples):
        raise ValueError(f"manifest.json says {manifest['cells']} cells, samples.csv.gz holds {len(samples)}")
    return samples, fits, manifest


def check_tables(folder, man: dict) -> None:
    """Raise ``ValueError`` naming what is wrong unless the tables of an ingested recording hold
    their columns, with finite numbers where the claims compute (measured times ``*_us`` > 0),
    and the policies its manifest lists (but a serve-bench run's baseline) appear in them."""
    ran: set = set()
    for name, cols in TABLES.get(man.get("kind"), {}).items():
        df = _table(Path(folder), name, cols, man)
        for c in [c for c in cols if c.endswith("_us") or c in ("step", "window")]:
            v = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=float)
            if not np.isfinite(v).all():
                raise ValueError(f"{name}: column {c} must hold finite numbers")
            if c.endswith("_us") and not (v > 0).all():
                raise ValueError(f"{name}: column {c} must hold measured times > 0")
        ran |= set(df["policy"].astype(str)) if "policy" in df else set()
    listed = man.get("policies")
    if man.get("kind") in TABLES and isinstance(listed, list):
        if man.get("kind") == "serve-bench" and (Path(folder) / "runs.csv.gz").exists():
            ran |= set(_table(Path(folder), "runs.csv.gz", ("policy",), man)["policy"].astype(str))
        missing = sorted(set(map(str, listed)) - ran - ({str(man.get("baseline") or "static")}
                                                       if man.get("kind") == "serve-bench" else set()))
        if missing:
            raise ValueError(f"manifest.json lists policies {missing} that its tables do not hold")


def load_epbench(path) -> pd.DataFrame:
    """The per-step table of an epbench recording (``epbench.csv.gz``)."""
    path = Path(path)
    return _table(path, "epbench.csv.gz", TABLES["epbench"]["epbench.csv.gz"], read_manifest(path))


def load_serve(path) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """(pairs, runs or None) of a serve-bench recording."""
    path = Path(path)
    man = read_manifest(path)
    runs = _table(path, "runs.csv.gz", (), man) if (path / "runs.csv.gz").exists() else None
    return _table(path, "pairs.csv.gz", TABLES["serve-bench"]["pairs.csv.gz"], man), runs


def load_serve_manifest(path) -> dict:
    """The serve-bench run's own manifest stored with a serve-bench recording
    (``serve-bench.json.gz``), or {} when there is none."""
    path = Path(path)
    if not (path / "serve-bench.json.gz").exists():
        return {}
    man = read_manifest(path)
    out = _json(gunzip_limited(_read(path, "serve-bench.json.gz", man), MAX_BYTES, "serve-bench.json.gz"),
                "serve-bench.json.gz")
    return out if isinstance(out, dict) else {}


def load_check(path) -> tuple[dict, str | None, dict]:
    """``(results, summary markdown or None, {section table name: DataFrame})`` of a gpu-check
    folder."""
    path = Path(path)
    man = read_manifest(path)
    res = _json(_read(path, "results.json", man), "results.json")
    md = _read(path, "summary.md", man).decode() if (path / "summary.md").exists() else None
    files = {p.name.split(".")[0]: _table(path, p.name, (), man) for p in sorted(path.glob("*.csv.gz"))}
    return res, md, files


def epbench_runs(root=None) -> list:
    """``(folder, table, results)`` of every recording holding an ``epbench.csv.gz`` (gpu-check
    runs and ingested epbench runs), in folder order; ``results`` is the folder's
    ``results.json`` (a gpu-check's, with the run's arguments) or {}."""
    out = []
    for folder, man in manifests(root):
        if not (folder / "epbench.csv.gz").is_file():
            continue
        res = _json(_read(folder, "results.json", man), "results.json") if (folder / "results.json").is_file() else {}
        out.append((folder, _table(folder, "epbench.csv.gz", (), man), res))
    return out


def where(row) -> str:
    """A recording's folder as the ledger names it: ``data/measured/<machine>/<folder>``."""
    return f"data/measured/{Path(row['path']).parent.name}/{Path(row['path']).name}"


# ------------------------------------------------------------------------------ listing
#: a recording's verdict while its files are unchanged: {folder: (file stats, why or None)}
_VERDICTS: dict = {}


def _stats(folder: Path) -> tuple:
    out = []
    for p in sorted(folder.iterdir()):
        try:
            st = p.lstat()
        except OSError:
            continue
        out.append((p.name, st.st_size, st.st_mtime_ns, st.st_ino))
    return tuple(out)


def _verdict(folder: Path, man: dict, kind: str) -> str | None:
    """Why the recording in ``folder`` does not load, or None.  A calibration's and an ingested
    table's files are read and checked once, then again only when a file changes."""
    try:
        _check_common(man)
    except ValueError as exc:
        return str(exc)
    if kind not in ("calibration", "epbench", "serve-bench"):
        return None
    stats = _stats(folder)
    hit = _VERDICTS.get(folder)
    if hit is not None and hit[0] == stats:
        return hit[1]
    try:
        load_recording(folder) if kind == "calibration" else check_tables(folder, man)
        why = None
    except (OSError, ValueError) as exc:
        why = str(exc)
    _VERDICTS[folder] = (stats, why)
    return why


def _seq(folder: Path) -> int:
    """The store's ``-2``, ``-3`` ... on a second write of one name (1 otherwise)."""
    m = re.fullmatch(r"(.+)-(\d+)", folder.name)
    return int(m.group(2)) if m and (folder.parent / m.group(1)).is_dir() else 1


def recordings(kind: str | None = None, root=None, backend: str | None = None,
               shape: str | None = None) -> pd.DataFrame:
    """Every recording under ``root`` (default ``data/measured``) that loads, of ``kind`` (one of
    :data:`KINDS`; None: all), newest first (date; on one date the longer grid, the later
    ingest, the later write of one name).  Columns: :data:`COLUMNS` of the kind
    (:data:`ALL_COLUMNS` for None).  ``backend``, ``shape``: keep calibrations of those.

    A recording that does not load is skipped with a warning naming its folder and why, never
    an error (it came from another machine; the ledger goes on without it); the skipped ones
    are in ``df.attrs["skipped"]`` as ``(folder, why)``."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS} or None, got {kind!r}")
    rows, skipped = [], []
    for folder, man in manifests(root, skipped):
        k = kind_of(man)
        if k is None or (kind and k != kind):
            continue
        if (backend and man.get("backend") != backend) or (shape and man.get("shape") != shape):
            continue
        why = _verdict(folder, man, k)
        if why is not None:
            skipped.append((folder, why))
            continue
        rows.append({"kind": k, "machine": man.get("machine"), "date": man.get("date"), "name": folder.name,
                     "backend": man.get("backend"), "shape": man.get("shape"), "device": man.get("device"),
                     "cells": man.get("cells"), "sections": ", ".join(man.get("sections") or []) or None,
                     "ingested": man.get("ingested_utc", ""), "path": folder, "manifest": man,
                     "_seq": _seq(folder)})
    for folder, why in skipped:
        warnings.warn(f"skipping the recording {folder.parent.name}/{folder.name}: {why}", RuntimeWarning,
                      stacklevel=2)
    df = pd.DataFrame(rows, columns=ALL_COLUMNS + ["_seq"])
    df = df.sort_values(["date", "cells", "ingested", "_seq"], ascending=False, kind="stable")
    df = df[COLUMNS[kind] if kind else ALL_COLUMNS].reset_index(drop=True)
    df.attrs["skipped"] = skipped
    return df


# ------------------------------------------------------------------------------ the recording a page reads
def rank(recs: pd.DataFrame, shape: str | None = None, backend: str | None = None) -> pd.DataFrame:
    """The calibrations of ``recs`` (:func:`recordings`), of ``shape`` and ``backend`` when given,
    best first: a GPU recording before a CPU one, then the one with more cells, then the newest."""
    # Chapter 05 draws the regimes and Table 6's fit from the recording, chapter 08 fits a user's
    # cost model to it and the claims take their fit errors from it: each needs the measurement
    # that best pins down the kernel's curve.  A CPU has no weight-streaming floor (chapter 05),
    # so any GPU recording comes first; among those the longest grid (a gpu-check's short grid is
    # a smoke test), and of equal grids the newest.
    r = recs if shape is None else recs[recs["shape"] == shape]
    r = r if backend is None else r[r["backend"] == backend]
    cells = pd.to_numeric(r["cells"], errors="coerce").fillna(-1) if "cells" in r else -1
    order = r.assign(_gpu=r["backend"] != "cpu", _cells=cells)
    order = order.sort_values(["_gpu", "_cells"] + (["date"] if "date" in r else []), ascending=False, kind="stable")
    return order.drop(columns=["_gpu", "_cells"]).reset_index(drop=True)


def pick(recs: pd.DataFrame, shape: str | None = None, backend: str | None = None):
    """The first row of :func:`rank` (a pandas Series), or None when nothing matches."""
    r = rank(recs, shape, backend)
    return None if r.empty else r.iloc[0]


def stored(folder) -> bool:
    """Whether ``folder`` is a recording (a folder with a manifest, not a write in progress)."""
    folder = Path(folder)
    return (folder / store.MANIFEST).is_file() and not folder.name.startswith(".") and os.path.isdir(folder)
