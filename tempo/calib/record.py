"""Calibration runs and their recordings (issue: "Recordings").

A run measures a planned grid with one backend and shape, fits the three model forms and
writes ``data/measured/<machine>/<date>-<backend>-<shape>/``:

* ``samples.csv.gz`` -- one row per cell: G, n, N, T, kind, t_us;
* ``fit.json`` -- each form's parameters and fit error;
* ``manifest.json`` -- machine, device, library versions, command, start, duration, grid size.

Cells are appended to ``samples.partial.csv`` as they are measured, so an interrupted run
resumes where it stopped (``resume=True``) and loses nothing.
"""
from __future__ import annotations

import datetime as dt
import json
import platform
import re
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from .. import paths
from .fit import FORMS, fit_cost_model
from .grid import plan_grid, tiles
from .shapes import shape as get_shape

MEASURED = paths.ROOT / "data" / "measured"


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


def _params(m) -> dict:
    d = {"a": m.a, "b": m.b, "c": m.c, "beta": m.beta, "n_star": m.n_star}
    if m.b2:
        d["b2"] = m.b2
    if m.c2 is not None:
        d.update(c2=m.c2, gamma=m.gamma)
    return {k: float(v) for k, v in d.items()}


def calibrate(backend: str = "auto", shape: str = "qwen3-30b", grid: pd.DataFrame | None = None,
              out_root: Path | None = None, progress: bool = True, resume: bool = True, command: str = "",
              date: str | None = None, **backend_kw) -> Path:
    """Measure ``grid`` (default: :func:`plan_grid`) and write a recording; returns its folder."""
    from .backends import detect_backend, make_backend

    sh = get_shape(shape)
    backend = detect_backend() if backend == "auto" else backend
    grid = plan_grid() if grid is None else grid
    if not {"G", "n"} <= set(grid.columns):
        raise ValueError("grid needs columns G and n")
    grid = grid.copy()
    if "kind" not in grid:
        grid["kind"] = "grid"
    be = make_backend(backend, sh, int(grid.G.max()), int(grid.n.max()), **backend_kw)
    info = be.info()
    date = date or dt.date.today().isoformat()
    folder = Path(out_root or MEASURED) / machine_name(info) / f"{date}-{backend}-{shape}"
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / "samples.partial.csv"
    done = pd.read_csv(partial) if (resume and partial.exists()) else pd.DataFrame(columns=["G", "n", "kind", "t_us"])
    have = set(zip(done.G.astype(int), done.n.astype(int)))
    todo = [r for r in grid.itertuples() if (int(r.G), int(r.n)) not in have]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(grid), initial=len(grid) - len(todo), desc=f"calibrate {backend}/{shape}", unit="cell")
    t0 = time.time()
    # cheapest first, so the time-left estimate grows honest early
    todo.sort(key=lambda r: r.G * r.n)
    with open(partial, "a") as fh:
        if not have:
            fh.write("G,n,kind,t_us\n")
        for r in todo:
            t = be.measure(int(r.G), int(r.n))
            fh.write(f"{int(r.G)},{int(r.n)},{r.kind},{t:.4f}\n")
            fh.flush()
            if bar:
                bar.update(1)
    if bar:
        bar.close()
    samples = pd.read_csv(partial)
    samples["N"] = samples.G * samples.n
    samples["T"] = samples.G * tiles(samples.n)
    samples = samples[["G", "n", "N", "T", "kind", "t_us"]].sort_values(["G", "n"]).reset_index(drop=True)
    samples.to_csv(folder / "samples.csv.gz", index=False, compression="gzip")
    fits = fit_all(samples, name=f"{backend}-{shape}")
    (folder / "fit.json").write_text(json.dumps(fits, indent=1))
    manifest = {"machine": machine_name(info), **info, "backend": backend, "shape": shape,
                "d_model": sh.d_model, "d_ff": sh.d_ff, "date": date, "cells": int(len(samples)),
                "duration_s": round(time.time() - t0, 1), "command": command or " ".join(sys.argv),
                "python": platform.python_version(), "numpy": np.__version__, "platform": platform.platform()}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    partial.unlink()
    return folder


def recordings(backend: str | None = None, shape: str | None = None, root: Path | None = None) -> pd.DataFrame:
    """Every recording under ``data/measured`` (newest first): machine, date, backend, shape,
    device, path."""
    root = Path(root or MEASURED)
    rows = []
    for m in sorted(root.glob("*/*/manifest.json")):
        man = json.loads(m.read_text())
        if (backend and man.get("backend") != backend) or (shape and man.get("shape") != shape):
            continue
        rows.append({"machine": man.get("machine"), "date": man.get("date"), "backend": man.get("backend"),
                     "shape": man.get("shape"), "device": man.get("device"), "cells": man.get("cells"),
                     "path": m.parent})
    df = pd.DataFrame(rows, columns=["machine", "date", "backend", "shape", "device", "cells", "path"])
    return df.sort_values("date", ascending=False).reset_index(drop=True)


def load_recording(path) -> tuple[pd.DataFrame, dict, dict]:
    """(samples, fits, manifest) of one recording folder."""
    path = Path(path)
    samples = pd.read_csv(path / "samples.csv.gz")
    fits = json.loads((path / "fit.json").read_text())
    manifest = json.loads((path / "manifest.json").read_text())
    return samples, fits, manifest


def main(argv=None) -> int:

    from ..cli import ArgumentParser, output_dir, positive_int
    from .backends import available_backends
    from .shapes import SHAPES

    ap = ArgumentParser(prog="python -m tempo calibrate",
                        description="measure expert time on this machine and fit the cost models")
    ap.add_argument("--backend", default="auto", choices=["auto", "deep_gemm", "torch_bf16", "cpu"],
                    help="deep_gemm | torch_bf16 | cpu | auto (default)")
    ap.add_argument("--shape", default="qwen3-30b", choices=sorted(SHAPES))
    ap.add_argument("--G", type=positive_int, nargs="+", help="activated-expert ladder (default 1..40 ladder)")
    ap.add_argument("--n-max", type=positive_int, default=4096, help="largest tokens per expert")
    ap.add_argument("--per-octave", type=positive_int, default=1)
    ap.add_argument("--max-tokens", type=positive_int, help="skip cells with more tokens in total (CPU)")
    ap.add_argument("--no-tile-sweep", action="store_true")
    ap.add_argument("--out", type=output_dir, help="recordings root (default data/measured)")
    ap.add_argument("--fresh", action="store_true", help="ignore a partial run of the same recording")
    a = ap.parse_args(argv)
    here = available_backends()
    if a.backend == "auto" and not here:
        ap.fail("--backend", "no calibration backend can run here: install torch (pip install torch==2.13.0 for CPU)")
    if a.backend != "auto" and a.backend not in here:
        ap.fail("--backend", f"{a.backend!r} cannot run on this machine; available: {', '.join(here) or 'none'}")
    kw = {} if a.G is None else {"G": sorted(set(a.G))}
    grid = plan_grid(n_max=a.n_max, per_octave=a.per_octave, fine=not a.no_tile_sweep, max_tokens=a.max_tokens, **kw)
    if grid.empty:
        ap.fail("--max-tokens", f"{a.max_tokens} leaves no cell to measure")
    a.out = None if a.out is None else str(a.out)
    folder = calibrate(a.backend, a.shape, grid, out_root=a.out, resume=not a.fresh,
                       command="python -m tempo calibrate " + " ".join(argv if argv is not None else sys.argv[2:]))
    _, fits, man = load_recording(folder)
    print(f"wrote {folder} ({man['cells']} cells, {man['duration_s']} s on {man['device']})")
    for form, f in fits.items():
        print(f"  {form:24s} error {100 * f['error']:.1f}%  " + ", ".join(f"{k}={v:.4g}" for k, v in f["params"].items()))
    return 0
