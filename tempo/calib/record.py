"""Calibration runs and their recordings.

A run measures a planned grid with one backend and shape, fits the three model forms and
writes ``data/measured/<machine>/<date>-<backend>-<shape>/`` through :mod:`tempo.measured.store`
(one rename: a killed run leaves the recording before it or the one after it):

* ``samples.csv.gz`` -- one row per cell: G, n, N, T, kind, t_us;
* ``fit.json`` -- each form's parameters and fit error;
* ``manifest.json`` -- machine, device, library versions, command, start, duration, grid size
  and the sha256 of each file.

Cells are appended to ``samples.partial.csv`` as they are measured (one fsynced ``write`` per
line) and an interrupted run resumes from it (``resume=True``, :func:`read_partial`); a
recording that already holds every cell is left as it is; ``resume=False`` (CLI ``--fresh``)
measures every cell again.
"""
from __future__ import annotations

import datetime as dt
import gzip
import json
import logging
import platform
import re
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from ..measured import catalog, store
from .fit import FORMS, fit_cost_model
from .grid import plan_grid, tiles
from .shapes import shape as get_shape

PARTIAL = "samples.partial.csv"
PARTIAL_COLUMNS = ["G", "n", "kind", "t_us"]
#: the partial file's header: each line ends with the CRC-32 of the rest of the line (8 hex digits),
#: so a damaged byte that still leaves a well-formed line (1212.01 for 12.02) is
#: detected and the cell measured again
_HEADER = ",".join(PARTIAL_COLUMNS + ["crc32"])
_LEGACY_HEADER = ",".join(PARTIAL_COLUMNS)  # files written before the checksum
_HEX8 = re.compile(r"[0-9a-f]{8}")
_INT = re.compile(r"[0-9]{1,18}")  # inside int64; a range check follows
_KIND = re.compile(r"[A-Za-z0-9_.-]+")
log = logging.getLogger(__name__)


def cell_line(G: int, n: int, kind: str, t_us: float) -> str:
    """One partial-file line (no newline): ``G,n,kind,t_us,crc32`` with the CRC-32 of ``G,n,kind,t_us``."""
    body = f"{int(G)},{int(n)},{kind},{t_us:.4f}"
    return f"{body},{zlib.crc32(body.encode()):08x}"


def _parse_cell(line: str, legacy: bool = False):
    """(G, n, kind, t_us) of one partial-file line, or why it is not a well-formed cell (a
    string): G and n integers and t_us a number inside the physical ranges of a cell
    (:data:`tempo.measured.catalog.CELL_RANGES`), kind a plain word, then the CRC-32 of those
    four fields as written (8 hex digits).  ``legacy``: a file written before the checksum
    also admits the four fields alone."""
    fields = line.split(",")
    if len(fields) == 5:
        body, _, crc = line.rpartition(",")
        if not _HEX8.fullmatch(crc) or int(crc, 16) != zlib.crc32(body.encode()):
            return "its CRC-32 does not match"
        fields = fields[:4]
    elif not legacy or len(fields) != 4:
        return f"{len(fields)} fields"
    g, n, kind, t = fields
    if not (_INT.fullmatch(g) and _INT.fullmatch(n) and _KIND.fullmatch(kind)):
        return "G and n must be integers, kind a plain word"
    try:
        t_us = float(t)
    except ValueError:
        return f"t_us {t[:20]!r} is not a number"
    why = catalog.cell_problem(int(g), int(n), t_us)
    return why or (int(g), int(n), kind, t_us)


def read_partial(path) -> tuple[pd.DataFrame, list[str], dict]:
    """Read a calibration partial file that may be damaged (interrupted write, crash, disk full).

    Returns ``(cells, lines, dropped)``: ``cells`` has columns G, n (int64), kind (str), t_us
    (float64), one row per (G, n) in file order; ``lines`` are the kept lines verbatim (no
    newline; a line of a file written before the checksum gains its CRC-32); ``dropped``
    counts what was thrown away: ``torn`` (a last line without its newline -- its value may
    be cut short), ``malformed`` (including a line whose CRC-32 does not match: a damaged
    byte, and a value outside a cell's physical range: G = 10^30, t_us = 1e308; each logged
    with its line number; the cell is measured again) and ``duplicate`` (a cell already seen;
    the first is kept).  Repeated header lines are dropped silently.  A missing file reads as
    empty.
    """
    dropped = {"torn": 0, "malformed": 0, "duplicate": 0}
    raw = catalog.read_progress(path)
    parts = raw.split(b"\n")
    tail = parts.pop()  # after the last newline: empty for an intact file
    if tail:
        dropped["torn"] = 1
    rows, lines, seen = [], [], set()
    first = next((b for b in parts if b.strip()), b"").rstrip(b"\r")
    legacy = first != _HEADER.encode()  # a file that starts with the checksum header holds only checked lines
    for no, b in enumerate(parts, 1):
        try:
            line = b.decode("ascii").rstrip("\r")
        except UnicodeDecodeError:
            cell = "it is not ASCII text"
        else:
            if line in (_HEADER, _LEGACY_HEADER) or (not line.strip() and "\0" not in line):
                continue
            cell = "it holds a NUL byte" if "\0" in line else _parse_cell(line, legacy)
        if isinstance(cell, str):
            dropped["malformed"] += 1
            if dropped["malformed"] <= 10:
                log.warning("%s line %d dropped: %s; the cell is measured again", path, no, cell)
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


def resume_partial(journal: store.Journal, resume: bool = True) -> pd.DataFrame:
    """Prepare a run's partial file (``journal``, :class:`tempo.measured.store.Journal`) for
    appending and return the cells it already holds.

    ``resume=False`` deletes it (a fresh start).  Otherwise the damaged parts are dropped (see
    :func:`read_partial`, logged with counts) and the file is rewritten atomically as a header
    plus the kept lines, so that appending continues on a clean line boundary."""
    if not resume:
        journal.remove()
    cells, lines, dropped = read_partial(journal.path)
    if any(dropped.values()):
        log.warning("%s: kept %d cells; dropped %s", journal.path,
                    len(cells), ", ".join(f"{v} {k}" for k, v in dropped.items() if v))
    journal.reset("".join(f"{x}\n" for x in [_HEADER, *lines]))
    return cells


def machine_name(info: dict) -> str:
    """Folder name for a machine: the device model as a slug (e.g. ``nvidia-h200``)."""
    return store.slug(info.get("device", platform.node())) or "unknown"


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
    machine, name = machine_name(info), f"{date}-{backend}-{shape}"
    store.recover(machine, name, out_root)  # what a killed run of this recording left beside it
    journal = store.Journal(machine, name, PARTIAL, out_root)
    folder = journal.folder
    planned = set(zip(grid.G.astype(int), grid.n.astype(int)))
    if resume and completed(folder, grid):
        log.warning("calibrate: %s already holds every cell of this grid; nothing measured "
                    "(--fresh, resume=False, measures them again)", folder)
        return folder
    stored = _stored(folder)  # (cells, manifest) of the recording there, or None
    in_progress = resume and len(read_partial(journal.path)[0]) > 0  # a run to resume (a --fresh one, say)
    prior_s = 0.0  # a resumed incomplete recording: the seconds its earlier runs spent (manifest)
    if resume and stored is not None and stored[1].get("complete") is False:
        prior_s = float(stored[1].get("duration_s", 0.0) or 0.0)
    if resume and stored is not None and not in_progress:
        # the recording's cells seed the partial file: a larger grid measures only what is new
        journal.reset("".join(f"{x}\n" for x in [_HEADER, *stored[0].values()]))
    done = resume_partial(journal, resume)
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
    stopped = 0
    try:
        with journal:
            for i, r in enumerate(todo):
                if max_seconds is not None and i > 0 and time.time() - t0 > max_seconds:
                    stopped = len(todo) - i
                    log.warning("calibrate: --max-seconds %s reached; %d of %d cells left for a later resume",
                                max_seconds, stopped, len(grid))
                    break
                t = float(be.measure(int(r.G), int(r.n)))
                why = catalog.cell_problem(int(r.G), int(r.n), t)
                if why:
                    raise RuntimeError(f"backend {backend!r} measured t_us={t} for cell (G={int(r.G)}, n={int(r.n)}): "
                                       f"{why}")
                journal.append(cell_line(int(r.G), int(r.n), r.kind, t) + "\n")
                if bar:
                    bar.update(1)
    finally:
        if bar:
            bar.close()
    samples, _, dropped = read_partial(journal.path)
    if any(dropped.values()):
        raise RuntimeError(f"{journal.path} was damaged while this run appended to it ({dropped}); rerun to resume")
    complete = planned <= set(zip(samples.G, samples.n))
    if not complete and len(samples) < 6:  # fit_cost_model needs 6 samples
        raise RuntimeError(f"{'stopped by max_seconds' if stopped else 'this part measured'} {len(samples)} cells, "
                           f"too few to fit; rerun the same command to resume ({journal.path})")
    samples["N"] = samples.G * samples.n
    samples["T"] = samples.G * tiles(samples.n)
    samples = samples[["G", "n", "N", "T", "kind", "t_us"]].sort_values(["G", "n"]).reset_index(drop=True)
    fits = fit_all(samples, name=f"{backend}-{shape}")
    manifest = {"kind": "calibration", "machine": machine, **info, "backend": backend, "shape": shape,
                "d_model": sh.d_model, "d_ff": sh.d_ff, "date": date, "cells": int(len(samples)),
                "duration_s": round(prior_s + time.time() - t0, 1), "run_s": round(time.time() - t0, 1),
                "run_cells": int(len(samples) - len(done)), "command": command or " ".join(sys.argv),
                "python": platform.python_version(), "numpy": np.__version__, "platform": platform.platform(),
                "complete": bool(complete), "cells_planned": int(len(grid)), **(manifest_extra or {})}
    # samples, fit and manifest appear together; the partial file stays only while incomplete
    files = {"samples.csv.gz": gzip.compress(samples.to_csv(index=False).encode(), mtime=0),
             "fit.json": json.dumps(fits, indent=1).encode()}
    return store.write(machine, name, files, manifest, out_root, exists="replace",
                       same=("files", "complete", "cells_planned"), keep=() if complete else (PARTIAL,)).path


def completed(folder, grid: pd.DataFrame) -> bool:
    """Whether the calibration in ``folder`` is complete for ``grid`` (columns G, n): it loads,
    its manifest does not say ``complete: false``, it holds every cell of the grid, and no run
    is in progress there (its partial file holds no cell)."""
    stored = _stored(Path(folder))
    if stored is None or stored[1].get("complete") is False or len(read_partial(Path(folder) / PARTIAL)[0]):
        return False
    return set(zip(grid.G.astype(int), grid.n.astype(int))) <= set(stored[0])


def _stored(folder: Path):
    """``({(G, n): partial-file line}, manifest)`` of the calibration in ``folder``, or None when
    there is none that loads."""
    if not catalog.stored(folder):
        return None
    try:
        s, _, man = catalog.load_recording(folder)
    except (OSError, ValueError) as exc:
        log.warning("calibrate: the recording in %s does not load (%s); it is measured again", folder, exc)
        return None
    lines = {(int(g), int(n)): cell_line(g, n, k, t) for g, n, k, t in zip(s.G, s.n, s.kind, s.t_us)}
    return lines, man


def recording_fits(recs: pd.DataFrame) -> pd.DataFrame:
    """Table 6's columns for every recording of ``recs`` (:func:`tempo.measured.catalog.recordings`): the zero-intercept
    max-affine fit (``a = c = 0``, the paper's Table 6 form) -- floor b, slope beta, n* = b / beta
    and the fit's mean relative error in % -- one row per recording."""
    from .fit import fit_error

    rows = []
    for _, r in recs.iterrows():
        samples, _, _ = catalog.load_recording(r.path)
        m = fit_cost_model(samples, "max_affine", intercept=False).model
        rows.append({"shape": r["shape"], "backend": r.backend, "device": r.device, "date": r.date, "b_us": m.b,
                     "beta_us_per_tok": m.beta, "n_star": m.n_star, "fit_err_pct": 100 * fit_error(m, samples)})
    return pd.DataFrame(rows, columns=["shape", "backend", "device", "date", "b_us", "beta_us_per_tok", "n_star",
                                       "fit_err_pct"])
