"""``python -m tempo calibrate``: measure expert time on this machine and fit the cost models
(:func:`tempo.calib.record.calibrate`), or run a preset campaign in parts
(``--preset appendix-b --part K`` / ``--dry-run``: :mod:`tempo.calib.preset`)."""
from __future__ import annotations

import datetime as dt
import sys

from ..measured import catalog, store
from .record import calibrate, completed
from .grid import plan_grid


def main(argv=None) -> int:

    from ..core.argtypes import ArgumentParser, int_range, nonneg_float, output_dir
    from .backends import available_backends, backend_names
    from .preset import PART_S, PRESETS
    from .shapes import DTYPES, shape_arg

    ap = ArgumentParser(prog="python -m tempo calibrate",
                        description="measure expert time on this machine and fit the cost models")
    ap.add_argument("--backend", default="auto", help=" | ".join(backend_names()) + " | auto (default)")
    ap.add_argument("--shape", default=("qwen3-30b", None), type=shape_arg, metavar="NAME|FILE|JSON",
                    help="the expert to measure: a registered name (qwen3-30b, dsv2-lite, dsv3, qwen3-235b, tiny), or a "
                         ".json / .yaml file or inline JSON object with name, hidden_size, moe_intermediate_size and "
                         "optionally dtype (fp8, bf16, fp32), n_experts, top_k")
    ap.add_argument("--G", type=int_range(1, 4096), nargs="+", help="activated-expert ladder (default 1..40 ladder)")
    ap.add_argument("--n-max", type=int_range(1, 2**20), default=4096, help="largest tokens per expert")
    ap.add_argument("--per-octave", type=int_range(1, 64), default=1)
    ap.add_argument("--max-tokens", type=int_range(1, 2**40), help="skip cells with more tokens in total (CPU)")
    ap.add_argument("--no-tile-sweep", action="store_true")
    ap.add_argument("--out", type=output_dir, help="recordings root (default data/measured)")
    ap.add_argument("--fresh", action="store_true", help="measure every cell again: a partial run of the same recording "
                                                         "is deleted, a complete one replaced (without it a complete "
                                                         "recording is left as it is)")
    ap.add_argument("--max-seconds", type=nonneg_float, help="stop starting new cells after this long; fit what was "
                                                             "measured, keep the partial so a rerun completes it")
    ap.add_argument("--date", help="the recording's date, YYYY-MM-DD (default today): resume a partial recording "
                                   "started on another day")
    ap.add_argument("--preset", choices=sorted(PRESETS), help="a whole campaign in parts: appendix-b = Appendix B's "
                                                              "grid, three shapes, fp8 DeepGEMM and the bf16 loop")
    ap.add_argument("--part", help="with --preset: the part to run, K or K/N (see --dry-run); part K measures what "
                                   "parts 1..K left unmeasured, within --part-seconds")
    ap.add_argument("--part-seconds", type=nonneg_float, default=PART_S,
                    help=f"with --preset: the longest a part may take (default {PART_S:g})")
    ap.add_argument("--dry-run", action="store_true", help="with --preset: print the part plan and expected times")
    a = ap.parse_args(argv)
    a.shape, dtype = a.shape
    if a.preset or a.part is not None or a.dry_run:
        return _main_preset(ap, a, argv)
    here = available_backends()
    if a.backend == "auto" and not here:
        ap.fail("--backend", "no calibration backend can run here: install torch (pip install torch==2.13.0 for CPU)")
    if a.backend != "auto" and a.backend not in here:
        if a.backend not in backend_names():
            ap.fail("--backend", f"unknown backend {a.backend!r}; choose from auto, {', '.join(backend_names())}")
        ap.fail("--backend", f"{a.backend!r} cannot run on this machine; available: {', '.join(here) or 'none'}")
    if dtype is not None:
        from .backends import backend_class

        chosen = here[0] if a.backend == "auto" else a.backend
        theirs = str(getattr(backend_class(chosen), "dtype", ""))
        if not theirs.startswith(DTYPES[dtype]):
            fits = [b for b in here if str(getattr(backend_class(b), "dtype", "")).startswith(DTYPES[dtype])]
            ap.fail("--shape", f"the shape's dtype is {dtype}, but backend {chosen!r} measures {theirs or 'its own'}; "
                               + (f"use --backend {fits[0]}" if fits else f"no backend here measures {dtype}"))
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
    done = None if a.fresh else _completed(a.backend, a.shape, grid, a.date, a.out)
    if done is not None:
        print(f"{done} already holds every cell of this grid: nothing measured (--fresh measures them again)")
        return 0
    folder = calibrate(a.backend, a.shape, grid, out_root=a.out, resume=not a.fresh, max_seconds=a.max_seconds,
                       date=a.date,
                       command="python -m tempo calibrate " + " ".join(argv if argv is not None else sys.argv[2:]))
    _, fits, man = catalog.load_recording(folder)
    print(f"wrote {folder} ({man['cells']} cells, {man['duration_s']} s on {man['device']})")
    for form, f in fits.items():
        print(f"  {form:24s} error {100 * f['error']:.1f}%  " + ", ".join(f"{k}={v:.4g}" for k, v in f["params"].items()))
    return 0


def _completed(backend: str, shape: str, grid, date: str | None, out):
    """The folder of the complete recording this command would write (:func:`record.completed`),
    found by its name on any machine under ``out``; None when there is none (or two)."""
    from .backends import detect_backend

    backend = detect_backend() if backend == "auto" else backend
    name = f"{date or dt.date.today().isoformat()}-{backend}-{shape}"
    found = [f for f, _ in catalog.manifests(out) if f.name == name]
    return found[0] if len(found) == 1 and completed(found[0], grid) else None


def _main_preset(ap, a, argv) -> int:
    """``calibrate --preset NAME (--part K[/N] | --dry-run)``: :mod:`tempo.calib.preset`."""
    from . import preset as P

    if a.preset is None:
        ap.fail("--part" if a.part is not None else "--dry-run", "needs --preset (e.g. --preset appendix-b)")
    defaults = {"backend": "auto", "shape": "qwen3-30b", "G": None, "n_max": 4096, "per_octave": 1,
                "max_tokens": None, "no_tile_sweep": False, "fresh": False, "max_seconds": None}
    clash = [k for k, v in defaults.items() if getattr(a, k) != v]
    if clash:
        opt = "--" + clash[0].replace("_", "-")
        ap.fail(opt, f"cannot be combined with --preset {a.preset} (the preset fixes the backends, shapes and grid; "
                     "to start a preset's recording over, delete its folder)")
    if a.part is None and not a.dry_run:
        ap.fail("--preset", "needs --part K (or K/N) to measure, or --dry-run to print the plan")
    if not a.part_seconds > P.STARTUP_S + P.SEGMENT_S:
        ap.fail("--part-seconds", f"must be above {P.STARTUP_S + P.SEGMENT_S:g} s, got {a.part_seconds:g}")
    try:
        costs = P.cost_models(P.cell_costs(backends=P.preset(a.preset).backends), P.preset(a.preset).backends)
    except ValueError as err:
        ap.fail("--preset", f"cannot estimate the part plan: {err}")
    plan = P.plan_parts(a.preset, costs, part_s=a.part_seconds)
    n_parts = int(plan.part.max())
    k = None
    if a.part is not None:
        try:
            k = P.parse_part(a.part, n_parts)
        except ValueError as err:
            ap.fail("--part", str(err))
    if a.date is not None:
        try:
            a.date = dt.date.fromisoformat(a.date).isoformat()
        except ValueError:
            ap.fail("--date", f"must be a date YYYY-MM-DD, got {a.date!r}")
    if a.dry_run:
        print(P.describe_plan(plan, costs, a.part_seconds, a.preset))
        if k is not None:
            c = plan[plan.part <= k]
            print(f"part {k}/{n_parts} measures what parts 1..{k} left: up to {len(c)} cells "
                  f"({int((plan.part == k).sum())} of its own)")
        return 0
    out_root = store.root(a.out)
    cmd = "python -m tempo calibrate " + " ".join(argv if argv is not None else sys.argv[2:])
    try:
        res = P.run_part(k, plan, out_root, a.preset, part_s=a.part_seconds, date=a.date, command=cmd)
    except RuntimeError as err:
        print(f"calibrate --preset {a.preset} --part {k}/{n_parts}: {err}", file=sys.stderr)
        return 1
    for folder in res["recordings"]:
        _, _, man = catalog.load_recording(folder)
        print(f"wrote {folder} ({man['cells']} of {man['cells_planned']} cells, "
              f"{'complete' if man['complete'] else 'incomplete'}, {man['run_s']} s this run)")
    tail = (f"{res['left']} cells of parts 1..{k} left: rerun --part {k}/{n_parts}" if res["left"] else
            (f"next: --part {k + 1}/{n_parts}" if k < n_parts else "the preset is complete"))
    print(f"part {k}/{n_parts}: measured {res['measured']} cells; {tail}")
    return 0
