"""Calibration runs and their recordings (issue: "Recordings").

A run measures a planned grid with one backend and shape, fits the three model forms and
writes ``data/measured/<machine>/<date>-<backend>-<shape>/``:

* ``samples.csv.gz`` -- one row per cell: G, n, N, T, kind, t_us;
* ``fit.json`` -- each form's parameters and fit error;
* ``manifest.json`` -- machine, device, library versions, command, start, duration, grid size.

Cells are appended to ``samples.partial.csv`` as they are measured, so an interrupted run
resumes where it stopped (``resume=True``) and loses nothing.  Each cell is one ``write`` of a
whole line, flushed and fsynced, so a crash can at worst tear the last line.  On resume
:func:`read_partial` keeps every complete, well-formed line (dtypes checked field by field),
drops a torn last line (no newline), malformed lines (NUL bytes, wrong field count, bad
numbers, repeated headers) and duplicate cells (the first is kept), logs what it dropped, and
the partial file is rewritten atomically (temp file + ``os.replace``) before measuring goes on.
``resume=False`` (CLI ``--fresh``) deletes the partial file and starts over.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import math
import os
import platform
import re
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from ..core import paths
from ..core.io import fsync_dir
from .fit import FORMS, fit_cost_model
from .grid import plan_grid, tiles
from .shapes import shape as get_shape

MEASURED = paths.ROOT / "data" / "measured"
PARTIAL_COLUMNS = ["G", "n", "kind", "t_us"]
#: the partial file's header: each line ends with the CRC-32 of the rest of the line (8 hex digits),
#: so a damaged byte that still leaves a well-formed line (1212.01 for 12.02, re-audit D17) is
#: detected and the cell measured again
_HEADER = ",".join(PARTIAL_COLUMNS + ["crc32"])
_LEGACY_HEADER = ",".join(PARTIAL_COLUMNS)  # files written before the checksum
_HEX8 = re.compile(r"[0-9a-f]{8}")
_INT = re.compile(r"[0-9]+")
_KIND = re.compile(r"[A-Za-z0-9_.-]+")
log = logging.getLogger(__name__)


def cell_line(G: int, n: int, kind: str, t_us: float) -> str:
    """One partial-file line (no newline): ``G,n,kind,t_us,crc32`` with the CRC-32 of ``G,n,kind,t_us``."""
    body = f"{int(G)},{int(n)},{kind},{t_us:.4f}"
    return f"{body},{zlib.crc32(body.encode()):08x}"


def _parse_cell(line: str, legacy: bool = False):
    """(G, n, kind, t_us) of one partial-file line, or None if it is not a well-formed cell:
    G and n positive integers, kind a plain word, t_us a finite number >= 0, then the CRC-32
    of those four fields as written (8 hex digits).  ``legacy``: a file written before the
    checksum also admits the four fields alone."""
    fields = line.split(",")
    if len(fields) == 5:
        body, _, crc = line.rpartition(",")
        if not _HEX8.fullmatch(crc) or int(crc, 16) != zlib.crc32(body.encode()):
            return None
        fields = fields[:4]
    elif not legacy or len(fields) != 4:
        return None
    g, n, kind, t = fields
    if not (_INT.fullmatch(g) and _INT.fullmatch(n) and _KIND.fullmatch(kind)):
        return None
    try:
        t_us = float(t)
    except ValueError:
        return None
    if int(g) < 1 or int(n) < 1 or not math.isfinite(t_us) or t_us < 0:
        return None
    return int(g), int(n), kind, t_us


def read_partial(path) -> tuple[pd.DataFrame, list[str], dict]:
    """Read a calibration partial file that may be damaged (interrupted write, crash, disk full).

    Returns ``(cells, lines, dropped)``: ``cells`` has columns G, n (int64), kind (str), t_us
    (float64), one row per (G, n) in file order; ``lines`` are the kept lines verbatim (no
    newline; a line of a file written before the checksum gains its CRC-32); ``dropped``
    counts what was thrown away: ``torn`` (a last line without its newline -- its value may
    be cut short), ``malformed`` (including a line whose CRC-32 does not match: a damaged
    byte, the cell is measured again) and ``duplicate`` (a cell already seen; the first is
    kept).  Repeated header lines are dropped silently.  A missing file reads as empty.
    """
    path = Path(path)
    dropped = {"torn": 0, "malformed": 0, "duplicate": 0}
    from ..core.io import read_regular

    raw = read_regular(path, MAX_RECORDING_BYTES) if path.exists() or path.is_symlink() else b""
    parts = raw.split(b"\n")
    tail = parts.pop()  # after the last newline: empty for an intact file
    if tail:
        dropped["torn"] = 1
    rows, lines, seen = [], [], set()
    first = next((b for b in parts if b.strip()), b"").rstrip(b"\r")
    legacy = first != _HEADER.encode()  # a file that starts with the checksum header holds only checked lines
    for b in parts:
        try:
            line = b.decode("ascii").rstrip("\r")
        except UnicodeDecodeError:
            dropped["malformed"] += 1
            continue
        if line in (_HEADER, _LEGACY_HEADER) or (not line.strip() and "\0" not in line):
            continue
        cell = None if "\0" in line else _parse_cell(line, legacy)
        if cell is None:
            dropped["malformed"] += 1
        elif cell[:2] in seen:
            dropped["duplicate"] += 1
        else:
            seen.add(cell[:2])
            rows.append(cell)
            lines.append(line if line.count(",") == 4 else f"{line},{zlib.crc32(line.encode()):08x}")
    cells = pd.DataFrame({
        "G": pd.Series([r[0] for r in rows], dtype="int64"),
        "n": pd.Series([r[1] for r in rows], dtype="int64"),
        "kind": pd.Series([r[2] for r in rows], dtype="str"),
        "t_us": pd.Series([r[3] for r in rows], dtype="float64"),
    })
    return cells, lines, dropped


def _write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` by ``text`` so that a crash leaves either the old or the new file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", newline="") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def _append_line(fd: int, line: str) -> None:
    """One cell = one ``write`` of the whole line, then fsync (a crash tears at most this line)."""
    data = line.encode("ascii")
    while data:
        data = data[os.write(fd, data):]
    os.fsync(fd)


def resume_partial(path, resume: bool = True) -> pd.DataFrame:
    """Prepare ``path`` for appending and return the cells it already holds.

    ``resume=False`` deletes it (a fresh start).  Otherwise the damaged parts are dropped (see
    :func:`read_partial`, logged with counts) and the file is rewritten atomically as a header
    plus the kept lines, so that appending continues on a clean line boundary."""
    path = Path(path)
    if not resume:
        path.unlink(missing_ok=True)
    cells, lines, dropped = read_partial(path)
    if any(dropped.values()):
        log.warning("%s: kept %d cells; dropped %s", path,
                    len(cells), ", ".join(f"{v} {k}" for k, v in dropped.items() if v))
    _write_atomic(path, "".join(f"{x}\n" for x in [_HEADER, *lines]))
    return cells


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "unknown"


def machine_name(info: dict) -> str:
    """Folder name for a machine: the device model as a slug (e.g. ``nvidia-h200``)."""
    return slug(info.get("device", platform.node()))


def fit_all(samples: pd.DataFrame, name: str = "") -> dict:
    """Fit every form (and the Table 6 zero-intercept form) to a recording's samples."""
    out = {}
    for form in FORMS:
        f = fit_cost_model(samples, form, name=name)
        out[form] = {"params": _params(f.model), "error": f.error}
    f = fit_cost_model(samples, "max_affine", intercept=False, name=name)
    out["max_affine_no_intercept"] = {"params": _params(f.model), "error": f.error}
    return out


def fit_model(fits: dict, form: str = "max_affine"):
    """The :class:`~tempo.core.cost.CostModel` of one fitted ``form`` of a ``fit.json``-style dict
    (:func:`fit_all`): ``max_affine`` (Eq. 1), ``max_affine_no_intercept`` (Table 6's form),
    ``tile`` (Eq. 2) or ``three_term`` (Eq. 4)."""
    from ..core.cost import CostModel

    if not isinstance(fits, dict) or not isinstance(fits.get(form), dict) or "params" not in fits[form]:
        have = [k for k, v in (fits or {}).items() if isinstance(v, dict) and "params" in v]
        raise ValueError(f"fits has no fitted form {form!r}; it has {', '.join(have) or 'none'}")
    p = fits[form]["params"]
    return CostModel(a=p.get("a", 0.0), b=p["b"], c=p.get("c", 0.0), beta=p["beta"], b2=p.get("b2", 0.0),
                     c2=p.get("c2"), gamma=p.get("gamma"), name=form)


def _params(m) -> dict:
    d = {"a": m.a, "b": m.b, "c": m.c, "beta": m.beta, "n_star": m.n_star}
    if m.b2:
        d["b2"] = m.b2
    if m.c2 is not None:
        d.update(c2=m.c2, gamma=m.gamma)
    return {k: float(v) for k, v in d.items()}


def calibrate_shapes(backend: str, shapes, command: str = "") -> list[Path]:
    """:func:`calibrate` each of ``shapes`` in turn (the GPU build of chapter 05 measures DSv3
    and Qwen3-30B, Table 6); each recording's command is ``command`` with the shape appended."""
    if isinstance(shapes, str) or not shapes or not all(isinstance(s, str) for s in shapes):
        raise ValueError(f"shapes must be a non-empty list of shape names, got {shapes!r}")
    return [calibrate(backend, s, command=f"{command} ({s})".strip()) for s in shapes]


def calibrate(backend: str = "auto", shape: str = "qwen3-30b", grid: pd.DataFrame | None = None,
              out_root: Path | None = None, progress: bool = True, resume: bool = True, command: str = "",
              date: str | None = None, max_seconds: float | None = None, cells: pd.DataFrame | None = None,
              manifest_extra: dict | None = None, **backend_kw) -> Path:
    """Measure ``grid`` (default: :func:`plan_grid`) and write a recording; returns its folder.

    ``max_seconds``: stop starting new cells once this much time has passed (a lease that
    ends, a budget).  The recording is then written from the cells measured so far, its
    manifest says ``complete: false`` with the planned cell count, and the partial file is
    kept, so the same command later resumes and completes it.  Too few measured cells are
    not fitted (fewer than 6): the partial is kept and ``RuntimeError`` says so.

    ``cells``: measure only these cells of ``grid`` now (columns G, n; a part of a preset,
    :mod:`tempo.calib.preset`); the recording is ``complete`` -- and the partial file removed --
    only once it holds every cell of ``grid``.  ``manifest_extra``: more manifest fields (the
    preset and part)."""
    if max_seconds is not None and not (max_seconds >= 0):
        raise ValueError(f"max_seconds must be >= 0, got {max_seconds}")
    if manifest_extra is not None and not isinstance(manifest_extra, dict):
        raise TypeError(f"manifest_extra must be a dict, got {type(manifest_extra).__name__}")
    from .backends import detect_backend, make_backend

    sh = get_shape(shape)
    backend = detect_backend() if backend == "auto" else backend
    grid = plan_grid() if grid is None else grid
    if not {"G", "n"} <= set(grid.columns):
        raise ValueError("grid needs columns G and n")
    grid = grid.copy()
    if "kind" not in grid:
        grid["kind"] = "grid"
    bad = [k for k in grid["kind"].astype(str).unique() if not _KIND.fullmatch(k)]
    if bad:
        raise ValueError(f"grid column 'kind' must be plain words (letters, digits, _ . -), got {bad[:3]}")
    if cells is not None:
        if not {"G", "n"} <= set(cells.columns):
            raise ValueError("cells needs columns G and n")
        planned = set(zip(grid.G.astype(int), grid.n.astype(int)))
        extra = [c for c in zip(cells.G.astype(int), cells.n.astype(int)) if c not in planned]
        if extra:
            raise ValueError(f"cells holds {len(extra)} cell(s) not in grid, e.g. (G, n) = {extra[0]}")
    be = make_backend(backend, sh, int(grid.G.max()), int(grid.n.max()), **backend_kw)
    info = be.info()
    date = date or dt.date.today().isoformat()
    folder = Path(out_root or MEASURED) / machine_name(info) / f"{date}-{backend}-{shape}"
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / "samples.partial.csv"
    prior_s = 0.0  # a resumed incomplete recording: the seconds its earlier runs spent (manifest)
    if resume and partial.exists() and (folder / "manifest.json").exists():
        try:
            prior = json.loads((folder / "manifest.json").read_text())
            prior_s = float(prior.get("duration_s", 0.0)) if prior.get("complete") is False else 0.0
        except (OSError, ValueError, TypeError):
            prior_s = 0.0
    done = resume_partial(partial, resume)
    have = set(zip(done.G.tolist(), done.n.tolist()))
    todo = [r for r in grid.itertuples() if (int(r.G), int(r.n)) not in have]
    if cells is not None:
        now = set(zip(cells.G.astype(int), cells.n.astype(int)))
        todo = [r for r in todo if (int(r.G), int(r.n)) in now]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        held = sum((int(g), int(n)) in have for g, n in zip(grid.G, grid.n))
        bar = tqdm(total=held + len(todo), initial=held, desc=f"calibrate {backend}/{shape}", unit="cell")
    t0 = time.time()
    # cheapest first, so the time-left estimate grows honest early
    todo.sort(key=lambda r: r.G * r.n)
    fd = os.open(partial, os.O_WRONLY | os.O_APPEND)
    stopped = 0
    try:
        for i, r in enumerate(todo):
            if max_seconds is not None and i > 0 and time.time() - t0 > max_seconds:
                stopped = len(todo) - i
                log.warning("calibrate: --max-seconds %s reached; %d of %d cells left for a later resume",
                            max_seconds, stopped, len(grid))
                break
            t = float(be.measure(int(r.G), int(r.n)))
            if not (math.isfinite(t) and t >= 0):
                raise RuntimeError(f"backend {backend!r} measured t_us={t} for cell (G={int(r.G)}, n={int(r.n)})")
            _append_line(fd, cell_line(int(r.G), int(r.n), r.kind, t) + "\n")
            if bar:
                bar.update(1)
    finally:
        os.close(fd)
        if bar:
            bar.close()
    samples, _, dropped = read_partial(partial)
    if any(dropped.values()):
        raise RuntimeError(f"{partial} was damaged while this run appended to it ({dropped}); rerun to resume")
    complete = set(zip(grid.G.astype(int), grid.n.astype(int))) <= set(zip(samples.G, samples.n))
    if not complete and len(samples) < 6:  # fit_cost_model needs 6 samples
        raise RuntimeError(f"{'stopped by max_seconds' if stopped else 'this part measured'} {len(samples)} cells, "
                           f"too few to fit; rerun the same command to resume ({partial})")
    samples["N"] = samples.G * samples.n
    samples["T"] = samples.G * tiles(samples.n)
    samples = samples[["G", "n", "N", "T", "kind", "t_us"]].sort_values(["G", "n"]).reset_index(drop=True)
    samples.to_csv(folder / "samples.csv.gz", index=False, compression="gzip")
    fits = fit_all(samples, name=f"{backend}-{shape}")
    (folder / "fit.json").write_text(json.dumps(fits, indent=1))
    manifest = {"machine": machine_name(info), **info, "backend": backend, "shape": shape,
                "d_model": sh.d_model, "d_ff": sh.d_ff, "date": date, "cells": int(len(samples)),
                "duration_s": round(prior_s + time.time() - t0, 1), "run_s": round(time.time() - t0, 1),
                "run_cells": int(len(samples) - len(done)), "command": command or " ".join(sys.argv),
                "python": platform.python_version(), "numpy": np.__version__, "platform": platform.platform(),
                "complete": bool(complete), "cells_planned": int(len(grid)), **(manifest_extra or {})}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    if complete:
        partial.unlink()
    return folder


#: the most bytes a recording's file may hold on disk, and its samples once inflated
MAX_RECORDING_BYTES = 64 * 2**20
SAMPLE_COLUMNS = ("G", "n", "N", "T", "kind", "t_us")


def _number(v) -> bool:
    """A JSON number (not a bool, not NaN; ``n_star`` may be Infinity)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v)


def check_samples(s: pd.DataFrame, what: str = "samples.csv.gz") -> pd.DataFrame:
    """``s`` with its columns typed (G, n, N, T int64; kind str; t_us float64) when every cell is
    well formed: G, n integers >= 1, N, T integers >= 0, kind a plain word, t_us finite >= 0.
    Raises ``ValueError`` naming the column otherwise (a recording is whole and valid or refused)."""
    missing = [c for c in SAMPLE_COLUMNS if c not in s.columns]
    if missing:
        raise ValueError(f"{what} lacks the columns {missing}")
    if s.empty:
        raise ValueError(f"{what} has no rows")
    out = s.copy()
    for c, lo in (("G", 1), ("n", 1), ("N", 0), ("T", 0)):
        v = pd.to_numeric(s[c], errors="coerce").to_numpy(dtype=float)
        if not (np.isfinite(v).all() and (v == np.round(v)).all() and (v >= lo).all() and (v < 2**53).all()):
            raise ValueError(f"{what}: column {c} must hold integers >= {lo}")
        out[c] = v.astype(np.int64)
    t = pd.to_numeric(s["t_us"], errors="coerce").to_numpy(dtype=float)
    if not (np.isfinite(t).all() and (t >= 0).all()):
        raise ValueError(f"{what}: column t_us must hold finite numbers >= 0")
    out["t_us"] = t
    kinds = s["kind"].astype(str)
    if not kinds.map(lambda k: bool(_KIND.fullmatch(k))).all():
        raise ValueError(f"{what}: column kind must hold plain words (letters, digits, _ . -)")
    out["kind"] = kinds
    return out


def check_fits(fits, what: str = "fit.json") -> dict:
    """``fits`` when it is a ``fit.json`` as :func:`fit_all` writes it: an object of forms, each
    ``{"params": {name: number}, "error": number or null}`` (no NaN; ``n_star`` may be Infinity); ``ValueError`` naming the
    field otherwise."""
    if not isinstance(fits, dict):
        raise ValueError(f"{what} must be a JSON object of fitted forms, got {type(fits).__name__}")
    for form, f in fits.items():
        if not isinstance(f, dict) or not isinstance(f.get("params"), dict):
            raise ValueError(f"{what}: form {form!r} must be an object with 'params'")
        bad = [k for k, v in f["params"].items() if not _number(v)]
        if bad:
            raise ValueError(f"{what}: form {form!r} params {bad[:3]} must be numbers")
        if f.get("error") is not None and not isinstance(f.get("error"), (int, float)):
            raise ValueError(f"{what}: form {form!r} error must be a number")
    return fits


def check_manifest(man, what: str = "manifest.json") -> dict:
    """``man`` when its fields a reader uses have their types: backend and shape strings;
    machine, device, date strings when present (date YYYY-MM-DD); cells an integer."""
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


def _read_json(path: Path):
    from ..core.io import read_regular

    try:
        return json.loads(read_regular(path, MAX_RECORDING_BYTES))
    except RecursionError:
        raise ValueError(f"{path.name} nests too deep") from None


def recordings(backend: str | None = None, shape: str | None = None, root: Path | None = None) -> pd.DataFrame:
    """Every recording under ``data/measured`` (newest first): machine, date, backend, shape,
    device, path.

    Only recordings that load and pass their checks (:func:`load_recording`) are listed: one
    that does not is skipped with a warning naming its folder and why, never an error (it
    came from another machine; the ledger goes on without it).  The skipped folders are in
    ``df.attrs["skipped"]`` as ``(folder, why)``."""
    import warnings

    root = Path(root or MEASURED)
    rows, skipped = [], []
    for m in sorted(root.glob("*/*/manifest.json")):
        try:
            man = _read_json(m)
        except (OSError, ValueError) as exc:
            skipped.append((m.parent, f"manifest.json: {exc}"))
            continue
        if not isinstance(man, dict) or "backend" not in man or "shape" not in man:
            continue  # not a calibration recording (e.g. a gpu-check folder, an ingested epbench run)
        if (backend and man.get("backend") != backend) or (shape and man.get("shape") != shape):
            continue
        try:
            load_recording(m.parent)
        except (OSError, ValueError) as exc:
            skipped.append((m.parent, str(exc)))
            continue
        rows.append({"machine": man.get("machine"), "date": man.get("date"), "backend": man.get("backend"),
                     "shape": man.get("shape"), "device": man.get("device"), "cells": man.get("cells"),
                     "path": m.parent})
    for folder, why in skipped:
        warnings.warn(f"skipping the recording {folder.parent.name}/{folder.name}: {why}", RuntimeWarning, stacklevel=2)
    df = pd.DataFrame(rows, columns=["machine", "date", "backend", "shape", "device", "cells", "path"])
    # newest first; on one date the recording with more cells (a calibration before a short check)
    df = df.sort_values(["date", "cells"], ascending=False, kind="stable").reset_index(drop=True)
    df.attrs["skipped"] = skipped
    return df


def load_recording(path) -> tuple[pd.DataFrame, dict, dict]:
    """(samples, fits, manifest) of one recording folder, read as untrusted input: regular files
    only (no link followed, no FIFO or device read), sizes capped, every field type-checked
    (:func:`check_samples`, :func:`check_fits`, :func:`check_manifest`).  Raises ``ValueError``
    naming the file and field (``FileNotFoundError`` for a missing file)."""
    import io

    from ..core.io import gunzip_limited, read_regular

    path = Path(path)
    raw = read_regular(path / "samples.csv.gz", MAX_RECORDING_BYTES)
    data = gunzip_limited(raw, MAX_RECORDING_BYTES, "samples.csv.gz")
    try:
        samples = pd.read_csv(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 -- any parse failure is a bad recording
        raise ValueError(f"samples.csv.gz is not a readable CSV ({type(exc).__name__})") from None
    samples = check_samples(samples)
    fits = check_fits(_read_json(path / "fit.json"))
    manifest = check_manifest(_read_json(path / "manifest.json"))
    return samples, fits, manifest


def pick_recording(recs: pd.DataFrame, shape_name: str | None = None):
    """The recording a chapter draws from: the first (newest) GPU recording of ``shape_name``
    in ``recs`` (:func:`recordings`), else of that shape on any backend; ``shape_name=None``
    ignores the shape.  None when nothing matches."""
    r = recs if shape_name is None else recs[recs["shape"] == shape_name]
    gpu = r[r.backend != "cpu"]
    r = gpu if len(gpu) else r
    return None if r.empty else r.iloc[0]


def recording_fits(recs: pd.DataFrame) -> pd.DataFrame:
    """Table 6's columns for every recording of ``recs`` (:func:`recordings`): the zero-intercept
    max-affine fit (``a = c = 0``, the paper's Table 6 form) -- floor b, slope beta, n* = b / beta
    and the fit's mean relative error in % -- one row per recording."""
    from .fit import fit_error

    rows = []
    for _, r in recs.iterrows():
        samples, _, _ = load_recording(r.path)
        m = fit_cost_model(samples, "max_affine", intercept=False).model
        rows.append({"shape": r["shape"], "backend": r.backend, "device": r.device, "date": r.date, "b_us": m.b,
                     "beta_us_per_tok": m.beta, "n_star": m.n_star, "fit_err_pct": 100 * fit_error(m, samples)})
    return pd.DataFrame(rows, columns=["shape", "backend", "device", "date", "b_us", "beta_us_per_tok", "n_star",
                                       "fit_err_pct"])
