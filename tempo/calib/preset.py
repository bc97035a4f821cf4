"""Appendix B's calibration grid as a preset measured in parts, and what grid a recording covers.

The preset (``python -m tempo calibrate --preset appendix-b --part K``): ``G`` on
:data:`tempo.calib.grid.G_LADDER` x ``n`` on the doubling ladder 1..4096 (117 cells) plus Fig. 4's
tile sweep at ``G`` in {1, 8} (32 cells), per Table 6 shape (DSv3, DSv2-Lite, Qwen3-30B) and per
kernel (``deep_gemm``, ``torch_bf16``): six recordings of 149 cells.  :func:`plan_parts` splits
the cells into parts of at most :data:`PART_S` seconds on one H200, estimated from the H200
recordings' timings (:func:`cell_costs`).  Part ``K`` measures the cells of parts 1..K its
recordings lack, in plan order, until its time is up, into the same six folders
(``<date>-<backend>-<shape>``, :func:`segment_date`), resuming ``samples.partial.csv``; a
recording's manifest says ``complete: true`` once every planned cell is in it.

Coverage (:func:`coverage`, :func:`recording_coverage`): the Appendix B cells a recording holds,
its ``G`` values, token range and GPU generation beside the paper's testbeds (:data:`TESTBEDS`),
for the ``hardware_grid`` reading's stand-in rule.
"""
from __future__ import annotations

import datetime as dt
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..measured import catalog
from ..measured.catalog import load_recording, recordings
from .backends import backend_status
from .grid import G_LADDER, log_ladder, plan_grid, tiles
from .record import PARTIAL, calibrate, fit_model, read_partial
from .shapes import shape as get_shape

log = logging.getLogger(__name__)

#: the longest a part may take on one H200 (Appendix B's grid in pieces a short lease can hold)
PART_S = 360.0
#: per part, before the first cell: python, torch and CUDA start-up (a margin we set, not measured)
STARTUP_S = 30.0
#: per recording a part touches: allocating the weight copies, the first cell's compilation
#: beyond the recordings' mean (a margin we set, not measured)
SEGMENT_S = 15.0
#: timed launches of a cell's region per measurement: the 30 graph replays of Appendix B's
#: timing plus warm-up, capture and upload per weight copy (an upper count, used to subtract the
#: recordings' device time from their wall time and to add it back for the new cells)
LAUNCHES_PER_CELL = 50
#: the fewest cells a recording is fitted on (``tempo.calib.fit.fit_cost_model`` needs 6)
MIN_FIT_CELLS = 6


@dataclass(frozen=True)
class Preset:
    """A named calibration campaign: ``backends`` x ``shapes``, each on one grid."""

    name: str
    backends: tuple
    shapes: tuple
    G: tuple
    n_max: int
    per_octave: int
    tile_sweep: bool
    why: str

    def grid(self, tile_sweep: bool | None = None) -> pd.DataFrame:
        """The cells of one recording (:func:`tempo.calib.grid.plan_grid`)."""
        return plan_grid(G=self.G, n_max=self.n_max, per_octave=self.per_octave,
                         fine=self.tile_sweep if tile_sweep is None else tile_sweep)

    def segments(self) -> list[tuple[str, str]]:
        """(backend, shape) of each recording, in the order the parts measure them."""
        return [(b, s) for b in self.backends for s in self.shapes]


PRESETS = {
    "appendix-b": Preset(
        name="appendix-b", backends=("deep_gemm", "torch_bf16"), shapes=("dsv3", "dsv2-lite", "qwen3-30b"),
        G=G_LADDER, n_max=4096, per_octave=1, tile_sweep=True,
        why="Appendix B: G 1..40 x tokens per expert 1..4096 (log ladder), the three shapes of Table 6, fp8 masked "
            "grouped GEMM (deep_gemm) and the bf16 loop (torch_bf16); plus Fig. 4's tile sweep at G in {1, 8}"),
}


def preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
    return PRESETS[name]


# ------------------------------------------------------------------------------- the time a cell takes
def cell_costs(root: Path | None = None, machine: str = "nvidia-h200", backends=None) -> pd.DataFrame:
    """Per calibration recording of ``machine`` under ``root`` (default ``data/measured``): its
    cells, wall seconds (``duration_s`` of its manifest), the device seconds its timed launches
    spent (:data:`LAUNCHES_PER_CELL` x the sum of its measured times) and the wall seconds per
    cell beyond them (``overhead_s``: graph capture, DeepGEMM's compilation, host work).  One row
    per recording; ``backends`` keeps only those."""

    recs = recordings("calibration", root=root)
    recs = recs[recs.machine == machine]
    if backends is not None:
        recs = recs[recs.backend.isin(list(backends))]
    rows = []
    for r in recs.itertuples():
        samples, _, man = load_recording(r.path)
        if "duration_s" not in man or len(samples) == 0:
            continue
        device_s = LAUNCHES_PER_CELL * float(samples.t_us.sum()) * 1e-6
        rows.append({"recording": Path(r.path).name, "backend": r.backend, "shape": r.shape, "cells": len(samples),
                     "duration_s": float(man["duration_s"]), "device_s": device_s,
                     "overhead_s": max(0.0, float(man["duration_s"]) - device_s) / len(samples),
                     "path": r.path})
    return pd.DataFrame(rows, columns=["recording", "backend", "shape", "cells", "duration_s", "device_s",
                                       "overhead_s", "path"])


@dataclass(frozen=True)
class CellCost:
    """The estimate of one backend's cells: ``overhead_s`` per cell (the largest of its
    recordings: a cold DeepGEMM compiles for new cells), and the device time from the fitted
    tile-aware model of ``ref_shape``'s recording scaled to another shape by the ratio of
    expert weights (floor and slope both scale with ``3 d_model d_ff``)."""

    backend: str
    overhead_s: float
    ref_shape: str
    ref_model: object
    source: str

    def seconds(self, shape: str, G, n) -> np.ndarray:
        G = np.asarray(G, dtype=float)
        n = np.asarray(n, dtype=float)
        scale = get_shape(shape).weights() / get_shape(self.ref_shape).weights()
        t_us = self.ref_model.time(G, G * n, G * tiles(n)) * scale
        return self.overhead_s + LAUNCHES_PER_CELL * t_us * 1e-6


def cost_models(costs: pd.DataFrame, backends) -> dict:
    """:class:`CellCost` per backend from :func:`cell_costs`' rows; a backend without a
    recording raises ValueError (nothing to estimate from)."""

    out = {}
    for b in backends:
        rows = costs[costs.backend == b]
        if rows.empty:
            raise ValueError(f"no recording of backend {b!r} to estimate its cell time from; "
                             f"have {sorted(set(costs.backend)) or 'none'}")
        worst = rows.loc[rows.overhead_s.idxmax()]
        ref = rows.loc[rows.cells.idxmax()]
        _, fits, _ = load_recording(ref.path)
        out[b] = CellCost(b, float(worst.overhead_s), str(ref["shape"]), fit_model(fits, "tile"),
                          f"overhead {worst.overhead_s:.3f} s/cell from {worst.recording} "
                          f"({int(worst.cells)} cells in {worst.duration_s:g} s); device time from the tile fit of "
                          f"{ref.recording}")
    return out


# ------------------------------------------------------------------------------- the part plan
def plan_parts(name: str = "appendix-b", costs: dict | None = None, part_s: float = PART_S,
               root: Path | None = None) -> pd.DataFrame:
    """Every cell of preset ``name`` with its part: columns part, backend, shape, G, n, kind,
    est_s (the cell's estimated wall seconds, :class:`CellCost`).  Recordings are filled in
    :meth:`Preset.segments` order, cells of one recording cheapest first (as
    :func:`tempo.calib.record.calibrate` measures them); a part takes cells while its estimate
    -- :data:`STARTUP_S` + :data:`SEGMENT_S` per recording it touches + its cells -- stays
    within ``part_s``, and a recording is never begun with fewer than :data:`MIN_FIT_CELLS`
    cells in a part (its first part fits it).  ``costs``: backend -> :class:`CellCost` (default:
    from the H200 recordings under ``root``, :func:`cell_costs`)."""
    p = preset(name)
    if not (isinstance(part_s, (int, float)) and not isinstance(part_s, bool) and part_s > STARTUP_S + SEGMENT_S):
        raise ValueError(f"part_s must be a number above {STARTUP_S + SEGMENT_S:g} s, got {part_s!r}")
    costs = cost_models(cell_costs(root, backends=p.backends), p.backends) if costs is None else costs
    grid = p.grid()
    rows = []
    for b, s in p.segments():
        g = grid.assign(backend=b, shape=s)
        g["est_s"] = costs[b].seconds(s, g.G, g.n)
        g["_order"] = g.G * g.n
        rows.append(g.sort_values(["_order", "G"], kind="stable"))
    cells = pd.concat(rows, ignore_index=True)
    part, used, seg, seg_cells = 1, STARTUP_S, None, 0
    parts = []
    for i, r in enumerate(cells.itertuples()):
        key = (r.backend, r.shape)
        if key != seg:  # a new recording: its set-up, and enough cells to fit it in this part
            first = cells.iloc[i:i + MIN_FIT_CELLS]
            need = SEGMENT_S + float(first[(first.backend == r.backend) & (first["shape"] == r.shape)].est_s.sum())
            if used + need > part_s and used > STARTUP_S:
                part, used = part + 1, STARTUP_S
            used += SEGMENT_S
            seg, seg_cells = key, 0
        elif used + r.est_s > part_s and seg_cells >= MIN_FIT_CELLS:
            part, used = part + 1, STARTUP_S + SEGMENT_S
        if STARTUP_S + SEGMENT_S + r.est_s > part_s:
            raise ValueError(f"cell {key} G={r.G} n={r.n} alone takes an estimated {r.est_s:.0f} s, "
                             f"more than a part of {part_s:g} s")
        used += r.est_s
        seg_cells += 1
        parts.append(part)
    cells["part"] = parts
    return cells[["part", "backend", "shape", "G", "n", "kind", "est_s"]]


def plan_summary(plan: pd.DataFrame) -> pd.DataFrame:
    """Per part of :func:`plan_parts`: the recordings it touches (backend/shape: cells), its
    cells and its estimated seconds (start-up and per-recording margins included)."""
    rows = []
    for k, c in plan.groupby("part"):
        segs = c.groupby(["backend", "shape"], sort=False).size()
        rows.append({"part": int(k), "recordings": ", ".join(f"{b}/{s}: {v}" for (b, s), v in segs.items()),
                     "cells": len(c), "est_s": STARTUP_S + SEGMENT_S * len(segs) + float(c.est_s.sum())})
    return pd.DataFrame(rows, columns=["part", "recordings", "cells", "est_s"])


def parse_part(text: str, n_parts: int) -> int:
    """``K`` or ``K/N`` -> K, checked against the plan's ``n_parts`` (a ``K/N`` written for
    another plan is refused: the plan changed)."""
    m = re.fullmatch(r"\s*([0-9]+)\s*(?:/\s*([0-9]+)\s*)?", str(text))
    if not m:
        raise ValueError(f"part must be K or K/N with whole numbers, got {text!r}")
    k = int(m.group(1))
    if m.group(2) is not None and int(m.group(2)) != n_parts:
        raise ValueError(f"part {text!r} names {m.group(2)} parts, but this plan has {n_parts}; "
                         f"run --dry-run to see it")
    if not 1 <= k <= n_parts:
        raise ValueError(f"part must be between 1 and {n_parts}, got {k}")
    return k


def describe_plan(plan: pd.DataFrame, costs: dict, part_s: float = PART_S, name: str = "appendix-b") -> str:
    """The dry run's text: the grid, the per-cell estimates and their sources, each part with its
    recordings, cells and expected time, and the commands."""
    p = preset(name)
    summ = plan_summary(plan)
    n = len(summ)
    g = p.grid()
    L = [f"preset {name}: {p.why}",
         f"  per recording: {len(g)} cells ({int((g.kind == 'grid').sum())} grid: G {list(p.G)} x n "
         f"{log_ladder(1, p.n_max, p.per_octave)}; {int((g.kind == 'tile').sum())} tile sweep); "
         f"{len(p.segments())} recordings, {len(plan)} cells",
         "  cell time estimated from the H200 recordings (not measured for this plan):"]
    L += [f"    {b}: {c.source}" for b, c in costs.items()]
    L.append(f"  margins: {STARTUP_S:g} s start-up per part, {SEGMENT_S:g} s per recording a part touches")
    L.append(f"{n} parts of at most {part_s:g} s; expected {summ.est_s.sum():.0f} s in all:")
    L += [f"  part {r.part}/{n}: {r.cells} cells, expected {r.est_s:.0f} s -- {r.recordings}" for r in summ.itertuples()]
    L.append(f"run: python -m tempo calibrate --preset {name} --part K/{n}   (K = 1..{n}, in order; each resumes the "
             "last; rerunning a part finishes what an interrupted one left)")
    return "\n".join(L)


# ------------------------------------------------------------------------------- running a part
def runnable(backend: str) -> tuple[bool, str]:
    """Whether ``backend`` can run here, and why not: the one place the preset asks the
    backend layer (:func:`tempo.calib.backends.backend_status`)."""

    ok, why = backend_status().get(backend, (False, f"no backend named {backend!r} is registered"))
    return bool(ok), str(why)


def _preset_folders(out_root: Path, backend: str, shape: str, name: str):
    """(date, folder) of this preset's recordings of (backend, shape) under ``out_root``: a
    folder ``<date>-<backend>-<shape>`` holding a partial file or a manifest of the preset."""

    pat = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})-" + re.escape(f"{backend}-{shape}") + r"$")
    ours = {folder for folder, man in catalog.manifests(out_root) if man.get("preset") == name}
    for folder in sorted(ours | set(catalog.in_progress(out_root))):
        m = pat.fullmatch(folder.name)
        if m:
            yield m.group(1), folder


def segment_date(out_root: Path, backend: str, shape: str, name: str = "appendix-b", today: str | None = None) -> str:
    """The date of the recording a part writes for (backend, shape): the newest one this preset
    began under ``out_root`` (so parts on later days resume it), else ``today``."""
    dates = [d for d, _ in _preset_folders(out_root, backend, shape, name)]
    return max(dates) if dates else (today or dt.date.today().isoformat())


def _held(out_root: Path, backend: str, shape: str, date: str, name: str) -> set:
    """The (G, n) cells the preset's recording of (backend, shape) at ``date`` holds already."""

    held = set()
    for d, folder in _preset_folders(out_root, backend, shape, name):
        if d != date:
            continue
        cells, _, _ = read_partial(folder / PARTIAL)
        held |= set(zip(cells.G.tolist(), cells.n.tolist()))
        if catalog.stored(folder):
            s, _, _ = catalog.load_recording(folder)
            held |= set(zip(s.G.tolist(), s.n.tolist()))
    return held


def run_part(k: int, plan: pd.DataFrame, out_root: Path, name: str = "appendix-b", part_s: float = PART_S,
             date: str | None = None, progress: bool = True, command: str = "", clock=time.monotonic) -> dict:
    """Measure part ``k`` of ``plan`` (:func:`plan_parts`): every cell of parts 1..k its
    recordings under ``out_root`` do not hold yet, recording by recording in plan order, each
    through :func:`tempo.calib.record.calibrate` on the recording's whole grid (so it resumes
    the partial file and says ``complete`` only when every planned cell is in).  New cells are
    started while less than ``part_s`` seconds have passed since the call.  Returns
    ``{"part", "of", "measured", "left", "recordings": [folder, ...], "stopped": bool}``;
    ``left`` counts the cells of parts 1..k still missing (a rerun of part k measures them).
    A backend that cannot run here raises RuntimeError naming why, before anything is measured."""

    n_parts = int(plan.part.max())
    if not (isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= n_parts):
        raise ValueError(f"k must be a part number between 1 and {n_parts}, got {k!r}")
    p = preset(name)
    t0 = clock()
    upto = plan[plan.part <= k]
    todo = []
    for (b, s), cells in upto.groupby(["backend", "shape"], sort=False):
        d = date or segment_date(out_root, b, s, name)
        held = _held(out_root, b, s, d, name)
        missing = cells[[(int(g), int(n)) not in held for g, n in zip(cells.G, cells.n)]]
        if len(missing):
            todo.append((b, s, d, missing))
    bad = {b: why for b in dict.fromkeys(b for b, _, _, _ in todo) for ok, why in [runnable(b)] if not ok}
    if bad:
        raise RuntimeError("part %d needs backends that cannot run here: %s" % (
            k, "; ".join(f"{b}: {why}" for b, why in bad.items())))
    grid = p.grid()
    out = {"part": k, "of": n_parts, "measured": 0, "left": 0, "recordings": [], "stopped": False}
    for b, s, d, missing in todo:
        left_s = part_s - (clock() - t0)
        if out["stopped"] or left_s < SEGMENT_S + float(missing.est_s.iloc[:MIN_FIT_CELLS].sum()):
            out["stopped"] = True
            out["left"] += len(missing)
            continue
        before = len(_held(out_root, b, s, d, name))
        folder = calibrate(b, s, grid, out_root=out_root, progress=progress, resume=True, date=d,
                           max_seconds=max(0.0, left_s - SEGMENT_S), cells=missing[["G", "n", "kind"]],
                           command=command or f"python -m tempo calibrate --preset {name} --part {k}/{n_parts}",
                           manifest_extra={"preset": name, "part": f"{k}/{n_parts}"})
        after = _held(out_root, b, s, d, name)
        out["measured"] += len(after) - before
        still = sum((int(g), int(n)) not in after for g, n in zip(missing.G, missing.n))
        out["left"] += still
        out["stopped"] = out["stopped"] or still > 0
        out["recordings"].append(folder)
    return out


# ------------------------------------------------------------------------------- coverage
#: The paper's testbeds as its text lets us read them (the paper anonymises the GPUs).
TESTBEDS = {
    "A": {"generation": "Hopper", "hbm_tb_s": 3.35,
          "why": "Section 1: 'the older 8-GPU node'; Section 2.2: its peak HBM bandwidth turns 44.0/8.7/4.7 MB into "
                 "13.1/2.6/1.4 us, i.e. about 3.35 TB/s, an H100-SXM-class part (tempo.theory.bounds.TESTBED_A_HBM)"},
    "B": {"generation": "Blackwell", "hbm_tb_s": None,
          "why": "Section 1: 'the newer-generation nodes'; Appendix F (3): DeepGEMM's masked kernels there need "
                 "UE8M0-packed scales, which only the SM100 (Blackwell) kernels do"},
}

_GENERATIONS = [  # (pattern on the device name, generation), first match wins
    (r"\bG?B[0-9]{3}\b|\bGB[0-9]{3}\b|blackwell|\bRTX PRO 6000\b|\bRTX 50[0-9]{2}\b", "Blackwell"),
    (r"\bH[0-9]{2,3}\b|\bGH200\b|hopper", "Hopper"),
    (r"\bL[0-9]{1,2}S?\b|\bRTX 40[0-9]{2}\b|\bRTX [0-9]+ Ada\b|\bAda\b", "Ada"),
    (r"\bA[0-9]{2,3}\b|\bRTX 30[0-9]{2}\b|ampere", "Ampere"),
    (r"\bV100\b|volta", "Volta"),
]


def gpu_generation(device: str | None) -> str:
    """The GPU generation of a device name as torch or nvidia-smi print it ("NVIDIA H200" ->
    "Hopper", "NVIDIA B200" -> "Blackwell"); "cpu" for a name that is no NVIDIA GPU we know
    (a CPU recording names its processor), "unknown" for none."""
    if not device:
        return "unknown"
    for pat, gen in _GENERATIONS:
        if re.search(pat, str(device), flags=re.IGNORECASE):
            return gen
    return "cpu" if "nvidia" not in str(device).lower() else "unknown"


def coverage(samples: pd.DataFrame, manifest: dict | None = None, name: str = "appendix-b") -> dict:
    """Which of preset ``name``'s grid cells (Appendix B's grid, tile sweep aside) ``samples``
    holds, and where it ran.  Keys: ``grid_cells`` (held) of ``grid_planned``, ``covers_grid``
    (every grid cell held), ``G`` (the G values measured), ``n_min``/``n_max`` (tokens per
    expert), ``missing_G`` (ladder values with no cell), ``tile_cells``, ``device``,
    ``generation`` (:func:`gpu_generation`), ``testbed_generation`` (testbed -> whether the
    generation is that of the paper's testbed, :data:`TESTBEDS`), ``testbed`` (the manifest's
    ``testbed`` marker, "A" or "B" upper-cased, "" when absent: a recording made on the paper's
    own node says so)."""
    if not {"G", "n"} <= set(samples.columns):
        raise ValueError("samples need columns G and n")
    manifest = manifest or {}
    g = preset(name).grid(tile_sweep=False)
    want = set(zip(g.G.tolist(), g.n.tolist()))
    have = set(zip(samples.G.astype(int).tolist(), samples.n.astype(int).tolist()))
    held = want & have
    device = manifest.get("device")
    gen = gpu_generation(device)
    kinds = samples["kind"] if "kind" in samples else pd.Series("grid", index=samples.index)
    return {"grid_cells": len(held), "grid_planned": len(want), "covers_grid": held == want,
            "G": sorted(int(x) for x in samples.G.unique()), "n_min": int(samples.n.min()) if len(samples) else 0,
            "n_max": int(samples.n.max()) if len(samples) else 0,
            "missing_G": sorted(set(g.G.tolist()) - {G for G, _ in held}), "tile_cells": int((kinds == "tile").sum()),
            "device": device, "backend": manifest.get("backend"), "shape": manifest.get("shape"),
            "generation": gen, "testbed_generation": {t: gen == v["generation"] for t, v in TESTBEDS.items()},
            "testbed": str(manifest.get("testbed") or "").strip().upper()}


def recording_coverage(path) -> dict:
    """:func:`coverage` of one recording folder (``samples.csv.gz`` and ``manifest.json``), with
    its ``path``."""

    samples, _, manifest = load_recording(path)
    return {**coverage(samples, manifest), "path": Path(path)}


def stand_in_reasons(cov: dict, testbed: str) -> list[str]:
    """Why a recording (``cov``: :func:`coverage`) cannot give a verdict on a hardware claim the
    paper measured on ``testbed`` ("A" or "B"): a partial grid (not every cell of Appendix B's
    grid), another GPU generation.  A manifest's ``testbed`` marker decides the second: a
    recording marked with the testbed is it, one marked with the other testbed is not, whatever
    the device name says.  An empty list: Appendix B's grid on the testbed's generation (the GPU
    part may still differ; the paper names none).  The ledger's stand-in rule
    (:func:`tempo.book.claims.functions.ch05.stand_in_reason`, the ``hardware_grid`` reading)."""
    if testbed not in TESTBEDS:
        raise ValueError(f"testbed must be one of {', '.join(TESTBEDS)}, got {testbed!r}")
    out = []
    if not cov["covers_grid"]:
        out.append(f"partial grid: {cov['grid_cells']} of Appendix B's {cov['grid_planned']} cells "
                   f"(G {cov['G']}, n {cov['n_min']}-{cov['n_max']})")
    marked = cov.get("testbed", "")
    if marked:
        if marked != testbed:
            out.append(f"its manifest marks it as Testbed {marked}'s, not Testbed {testbed}'s")
    elif not cov["testbed_generation"][testbed]:
        out.append(f"{cov['device'] or 'an unknown device'} ({cov['generation']}) is not Testbed {testbed}'s "
                   f"generation ({TESTBEDS[testbed]['generation']})")
    return out
