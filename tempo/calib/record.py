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
_HEADER = ",".join(PARTIAL_COLUMNS)
_INT = re.compile(r"[0-9]+")
_KIND = re.compile(r"[A-Za-z0-9_.-]+")
log = logging.getLogger(__name__)


def _parse_cell(line: str):
    """(G, n, kind, t_us) of one partial-file line, or None if it is not a well-formed cell:
    four fields, G and n positive integers, kind a plain word, t_us a finite number >= 0."""
    fields = line.split(",")
    if len(fields) != 4:
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
    newline); ``dropped`` counts what was thrown away: ``torn`` (a last line without its
    newline -- its value may be cut short), ``malformed`` and ``duplicate`` (a cell already
    seen; the first is kept).  Repeated header lines are dropped silently.  A missing file
    reads as empty.
    """
    path = Path(path)
    dropped = {"torn": 0, "malformed": 0, "duplicate": 0}
    raw = path.read_bytes() if path.exists() else b""
    parts = raw.split(b"\n")
    tail = parts.pop()  # after the last newline: empty for an intact file
    if tail:
        dropped["torn"] = 1
    rows, lines, seen = [], [], set()
    for b in parts:
        try:
            line = b.decode("ascii").rstrip("\r")
        except UnicodeDecodeError:
            dropped["malformed"] += 1
            continue
        if line == _HEADER or (not line.strip() and "\0" not in line):
            continue
        cell = None if "\0" in line else _parse_cell(line)
        if cell is None:
            dropped["malformed"] += 1
        elif cell[:2] in seen:
            dropped["duplicate"] += 1
        else:
            seen.add(cell[:2])
            rows.append(cell)
            lines.append(line)
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
              date: str | None = None, max_seconds: float | None = None, **backend_kw) -> Path:
    """Measure ``grid`` (default: :func:`plan_grid`) and write a recording; returns its folder.

    ``max_seconds``: stop starting new cells once this much time has passed (a lease that
    ends, a budget).  The recording is then written from the cells measured so far, its
    manifest says ``complete: false`` with the planned cell count, and the partial file is
    kept, so the same command later resumes and completes it.  Too few measured cells are
    not fitted (fewer than 6): the partial is kept and ``RuntimeError`` says so."""
    if max_seconds is not None and not (max_seconds >= 0):
        raise ValueError(f"max_seconds must be >= 0, got {max_seconds}")
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
    be = make_backend(backend, sh, int(grid.G.max()), int(grid.n.max()), **backend_kw)
    info = be.info()
    date = date or dt.date.today().isoformat()
    folder = Path(out_root or MEASURED) / machine_name(info) / f"{date}-{backend}-{shape}"
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / "samples.partial.csv"
    done = resume_partial(partial, resume)
    have = set(zip(done.G.tolist(), done.n.tolist()))
    todo = [r for r in grid.itertuples() if (int(r.G), int(r.n)) not in have]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(grid), initial=len(grid) - len(todo), desc=f"calibrate {backend}/{shape}", unit="cell")
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
            _append_line(fd, f"{int(r.G)},{int(r.n)},{r.kind},{t:.4f}\n")
            if bar:
                bar.update(1)
    finally:
        os.close(fd)
        if bar:
            bar.close()
    samples, _, dropped = read_partial(partial)
    if any(dropped.values()):
        raise RuntimeError(f"{partial} was damaged while this run appended to it ({dropped}); rerun to resume")
    if stopped and len(samples) < 6:  # fit_cost_model needs 6 samples
        raise RuntimeError(f"stopped by max_seconds after {len(samples)} cells, too few to fit; "
                           f"rerun the same command to resume ({partial})")
    samples["N"] = samples.G * samples.n
    samples["T"] = samples.G * tiles(samples.n)
    samples = samples[["G", "n", "N", "T", "kind", "t_us"]].sort_values(["G", "n"]).reset_index(drop=True)
    samples.to_csv(folder / "samples.csv.gz", index=False, compression="gzip")
    fits = fit_all(samples, name=f"{backend}-{shape}")
    (folder / "fit.json").write_text(json.dumps(fits, indent=1))
    manifest = {"machine": machine_name(info), **info, "backend": backend, "shape": shape,
                "d_model": sh.d_model, "d_ff": sh.d_ff, "date": date, "cells": int(len(samples)),
                "duration_s": round(time.time() - t0, 1), "command": command or " ".join(sys.argv),
                "python": platform.python_version(), "numpy": np.__version__, "platform": platform.platform(),
                "complete": not stopped, "cells_planned": int(len(grid))}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    if not stopped:
        partial.unlink()
    return folder


def recordings(backend: str | None = None, shape: str | None = None, root: Path | None = None) -> pd.DataFrame:
    """Every recording under ``data/measured`` (newest first): machine, date, backend, shape,
    device, path."""
    root = Path(root or MEASURED)
    rows = []
    for m in sorted(root.glob("*/*/manifest.json")):
        man = json.loads(m.read_text())
        if "backend" not in man or "shape" not in man:
            continue  # not a calibration recording (e.g. a gpu-check folder)
        if (backend and man.get("backend") != backend) or (shape and man.get("shape") != shape):
            continue
        rows.append({"machine": man.get("machine"), "date": man.get("date"), "backend": man.get("backend"),
                     "shape": man.get("shape"), "device": man.get("device"), "cells": man.get("cells"),
                     "path": m.parent})
    df = pd.DataFrame(rows, columns=["machine", "date", "backend", "shape", "device", "cells", "path"])
    # newest first; on one date the recording with more cells (a calibration before a short check)
    return df.sort_values(["date", "cells"], ascending=False, kind="stable").reset_index(drop=True)


def load_recording(path) -> tuple[pd.DataFrame, dict, dict]:
    """(samples, fits, manifest) of one recording folder."""
    path = Path(path)
    samples = pd.read_csv(path / "samples.csv.gz")
    fits = json.loads((path / "fit.json").read_text())
    manifest = json.loads((path / "manifest.json").read_text())
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


def main(argv=None) -> int:

    from ..core.argtypes import ArgumentParser, nonneg_float, output_dir, positive_int
    from .backends import available_backends, backend_names
    from .shapes import SHAPES

    ap = ArgumentParser(prog="python -m tempo calibrate",
                        description="measure expert time on this machine and fit the cost models")
    ap.add_argument("--backend", default="auto", help=" | ".join(backend_names()) + " | auto (default)")
    ap.add_argument("--shape", default="qwen3-30b", choices=sorted(SHAPES))
    ap.add_argument("--G", type=positive_int, nargs="+", help="activated-expert ladder (default 1..40 ladder)")
    ap.add_argument("--n-max", type=positive_int, default=4096, help="largest tokens per expert")
    ap.add_argument("--per-octave", type=positive_int, default=1)
    ap.add_argument("--max-tokens", type=positive_int, help="skip cells with more tokens in total (CPU)")
    ap.add_argument("--no-tile-sweep", action="store_true")
    ap.add_argument("--out", type=output_dir, help="recordings root (default data/measured)")
    ap.add_argument("--fresh", action="store_true", help="delete a partial run of the same recording and start over")
    ap.add_argument("--max-seconds", type=nonneg_float, help="stop starting new cells after this long; fit what was "
                                                             "measured, keep the partial so a rerun completes it")
    ap.add_argument("--date", help="the recording's date, YYYY-MM-DD (default today): resume a partial recording "
                                   "started on another day")
    a = ap.parse_args(argv)
    here = available_backends()
    if a.backend == "auto" and not here:
        ap.fail("--backend", "no calibration backend can run here: install torch (pip install torch==2.13.0 for CPU)")
    if a.backend != "auto" and a.backend not in here:
        if a.backend not in backend_names():
            ap.fail("--backend", f"unknown backend {a.backend!r}; choose from auto, {', '.join(backend_names())}")
        ap.fail("--backend", f"{a.backend!r} cannot run on this machine; available: {', '.join(here) or 'none'}")
    kw = {} if a.G is None else {"G": sorted(set(a.G))}
    grid = plan_grid(n_max=a.n_max, per_octave=a.per_octave, fine=not a.no_tile_sweep, max_tokens=a.max_tokens, **kw)
    if grid.empty:
        ap.fail("--max-tokens", f"{a.max_tokens} leaves no cell to measure")
    a.out = None if a.out is None else str(a.out)
    if a.date is not None:
        try:
            a.date = dt.date.fromisoformat(a.date).isoformat()
        except ValueError:
            ap.fail("--date", f"must be a date YYYY-MM-DD, got {a.date!r}")
    folder = calibrate(a.backend, a.shape, grid, out_root=a.out, resume=not a.fresh, max_seconds=a.max_seconds,
                       date=a.date,
                       command="python -m tempo calibrate " + " ".join(argv if argv is not None else sys.argv[2:]))
    _, fits, man = load_recording(folder)
    print(f"wrote {folder} ({man['cells']} cells, {man['duration_s']} s on {man['device']})")
    for form, f in fits.items():
        print(f"  {form:24s} error {100 * f['error']:.1f}%  " + ", ".join(f"{k}={v:.4g}" for k, v in f["params"].items()))
    return 0
