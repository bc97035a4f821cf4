"""Theory and solver-quality studies (paper Sections 3.1, 4.2; Appendix A; Tables 2, 8, 9)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pandas as pd

from ..core.cost import CostModel
from ..policies import solve
from ..theory import bounds as theory
from ..core.instance import Instance
from ..core.models import model_shape
from ..paper.readings import Reading
from . import milp_references, readings
from .registry import STATIC, experiment
from .scenarios import TraceRouting, drift_batches, proxy_skew_of, zipf_batches
from ..policies._fallback import add_count, fallback_count
from .sweep import memo_get, memo_put, run_grid


# ---------------------------------------------------------------------------- Theorem 1
@experiment("thm1_partition")
def thm1_partition(config: dict) -> pd.DataFrame:
    """PARTITION reduction: MILP makespan vs T on solvable and unsolvable instances."""
    rows = []
    for m in config["sizes"]:
        for solvable in (True, False):
            for rep in range(config["reps"]):
                seed = 1000 * m + 10 * rep + int(solvable)
                w = theory.random_partition_instance(m, solvable, seed=seed)
                inst, model, T = theory.partition_reduction(w)
                d = milp_references.solve_fixed(inst, model)   # a node limit, not seconds: the same on any machine
                splits = int(((d.shares > 1e-9).sum(axis=1) > 1).sum())
                rows.append({"m": m, "solvable": solvable, "seed": seed, "T": T,
                             "milp_makespan": d.meta["objective"], "proven_optimal": d.meta["optimal"],
                             "reaches_T": bool(d.meta["objective"] <= T * (1 + 1e-9)), "split_experts": splits})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------- Lemmas 1 and 2
def _random_restricted(rng, g, E):
    counts = rng.integers(0, 300, size=E)
    R = min(3, g)
    rep = np.full((E, R), -1)
    for e in range(E):
        k = int(rng.integers(1, R + 1))
        rep[e, :k] = rng.choice(g, size=k, replace=False)
    return Instance(counts, rep, g)


def _lemma_cell(cell: dict) -> list[dict]:
    """One instance of :func:`lemmas`: the MILP, the lemma's polynomial policy and tempo under
    each of its two cost models."""
    i, inst, cases, time_limit = cell["case"]
    rows = []
    for lemma, model, poly in cases:
        opt = milp_references.solve_fixed(inst, model)   # a node limit, not seconds: the same on any machine
        p = model.makespan(inst, solve(inst, model, poly))
        t = model.makespan(inst, solve(inst, model, "tempo"))
        rows.append({"instance": i, "lemma": lemma, "n_gpus": inst.n_gpus, "experts": inst.n_experts,
                     "full": inst.is_full_replication(), "milp": opt.meta["objective"], "optimal": opt.meta["optimal"],
                     "polynomial": p, "tempo": t, "poly_over_milp": p / opt.meta["objective"],
                     "tempo_over_milp": t / opt.meta["objective"]})
    return rows


@experiment("lemmas")
def lemmas(config: dict) -> pd.DataFrame:
    """Lemma 1 (a = b = 0: token LP = MILP) and Lemma 2 (c = beta = 0: semi-matching = MILP).
    The instances and cost models are drawn here, in order from one seeded generator; their
    solves run as a grid (:func:`tempo.studies.sweep.run_grid`, ``config["workers"]``)."""
    rng = np.random.default_rng(config.get("seed", 0))
    cells = []
    for i in range(config["n"]):
        g = int(rng.integers(2, 7))
        E = int(rng.integers(4, 16))
        inst = _random_restricted(rng, g, E) if i % 2 else Instance.full_replication(rng.integers(0, 300, size=E), g)
        cases = [(1, CostModel(0, 0, float(rng.uniform(0, 5)), float(rng.uniform(0.05, 1))), "token_lp")]
        cases.append((2, CostModel(float(rng.uniform(0, 5)), float(rng.uniform(1, 20)), 0, 0), "semi_matching"))
        cells.append({"case": (i, inst, tuple(cases), config.get("time_limit", 10.0))})
    return run_grid(_lemma_cell, cells, workers=config.get("workers"), progress=config.get("progress", True),
                    desc="lemmas")


# ---------------------------------------------------------------------------- Theorem 2
def _probe_cell(cell: dict) -> list[dict]:
    """A chunk of :func:`thm2_probe`'s suite: ``cell["items"]`` (index, kind, cost-model name,
    instance, model)."""
    config, tempo_kw = cell["config"], cell["tempo_kw"]
    rows = []
    for i, kind, pname, inst, model in cell["items"]:
        rr = model.makespan(inst, solve(inst, model, "round_robin"))
        tp = model.makespan(inst, solve(inst, model, "tempo", **tempo_kw))
        lb = model.lower_bound(inst)
        opt_lo, opt_hi, how = lb, min(tp, rr), "bounds"
        if inst.n_experts * inst.n_gpus <= config.get("milp_max_vars", 256):
            d = _milp(inst, model, config.get("time_limit", 5.0))  # the alternatives reuse it
            opt_lo, opt_hi, how = max(lb, d.meta["lower_bound"]), min(opt_hi, d.meta["objective"]), "milp"
        term = theory.additive_term(model, float(inst.counts.max()))
        rows.append({"i": i, "kind": kind, "params": pname, "experts": inst.n_experts, "n_gpus": inst.n_gpus,
                     "tokens": inst.total_tokens, "n_max": float(inst.counts.max()), "rr": rr, "tempo": tp, "lb": lb, "opt_lo": opt_lo, "opt_hi": opt_hi,
                     "opt_from": how, "term": term,
                     # ratio to the bound: exact when opt is pinned; an upper estimate using the lower bound
                     "rr_over_bound_hi": rr / (opt_lo + term), "rr_over_bound_lo": rr / (opt_hi + term),
                     "rr_over_opt_max": rr / opt_lo, "rr_over_opt_min": rr / opt_hi,
                     "tempo_over_opt_max": tp / opt_lo, "eps": term / lb if lb > 0 else np.nan})
    return rows


#: instances of :func:`thm2_probe`'s suite per grid cell
PROBE_CHUNK = 16


@experiment("thm2_probe", readings=("tempo_preset", "chain_depth", "ensemble_lp", "thm2_suite"))
def thm2_probe(config: dict) -> pd.DataFrame:
    """Round-robin A3 against OPT on the probe suite.  OPT is bracketed: the MILP when the
    instance is small enough (its proven bound and incumbent), else [lower bound, tempo].
    ``tempo`` is the reading's (``tempo_preset``, ``ensemble_lp``; Section 4.2's algorithm
    under the paper's reading) and so are the suite's GPU counts (``thm2_suite``); the MILP does not depend on the reading, so a run under another
    reading in the same process compares against the same MILP answer (:func:`_milp`).  The
    suite is drawn here; chunks of :data:`PROBE_CHUNK` instances run as a grid
    (:func:`tempo.studies.sweep.run_grid`, ``config["workers"]``)."""
    reading = readings.of(config)
    tempo_kw = readings.tempo_options(reading)
    suite = [(i, *item) for i, item in enumerate(theory.probe_suite(
        config["n"], seed=config.get("seed", 0), max_experts=config.get("max_experts", 512),
        max_gpus=config.get("max_gpus", 16), min_gpus=readings.PROBE_MIN_GPUS[reading["thm2_suite"]]))]
    cells = [{"items": tuple(suite[k:k + PROBE_CHUNK]), "config": config, "tempo_kw": tempo_kw}
             for k in range(0, len(suite), PROBE_CHUNK)]
    return run_grid(_probe_cell, cells, workers=config.get("workers"), progress=config.get("progress", True),
                    desc="probe suite")


@experiment("thm2_epsilon")
def thm2_epsilon(config: dict) -> pd.DataFrame:
    """The certificate eps = max(b, beta n_max)/LB on Zipf decode batches (DSv3 shape, its
    Table 6 model), at 1x and 4x scale.  With a trace (``config["trace"]``) the synthetic rows
    are followed by batches of the same sizes drawn from it (:class:`TraceRouting`, layers
    cycled; the paper: "at recorded decode batches"), priced with the Table 6 model of the
    trace's shape (:meth:`TraceRouting.shape`), and a ``routing`` column says which is which."""
    from ..core.models import model_shape

    rows = []
    tr = TraceRouting.of(config)
    for routing in ("synthetic", "trace") if tr else ("synthetic",):
        params = config.get("params") or model_shape(tr.shape() if routing == "trace" else "DSv3").params
        model = CostModel.named(params)
        for scale in config["scales"]:
            for B in config["tokens"]:
                for inst in zipf_batches(256, 8, B * scale, config.get("skew", 1.2), 1.25, config["batches"], seed=B,
                                         trace=tr if routing == "trace" else None):
                    full = Instance.full_replication(inst.counts, inst.n_gpus)
                    rows.append({"scale": scale, "tokens_per_gpu": B * scale, "eps": theory.round_robin_epsilon(full, model),
                                 **({"routing": routing} if tr else {})})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------- tempo vs MILP, solve time
def _phase_cells(config):
    for g in config["eps"]:
        for E in config.get("experts", [256]):
            for s in config["skews"]:
                for rep in config["replications"]:
                    for B in config["tokens"]:
                        yield g, E, s, rep, B


#: The readings :func:`solver_vs_milp` depends on.
SOLVER_READINGS = ("synthetic_router", "placement_loads", "eplb_ties", "tempo_preset", "chain_depth", "ensemble_lp", "token_lp_face")


def milp_ratio(df: pd.DataFrame, reading=None) -> pd.Series:
    """tempo over the MILP's reference, per row of :func:`solver_vs_milp`, as the
    ``milp_reference`` reading has it (default the paper's): ``"incumbent"``, the MILP's
    dispatch at its time limit (``ratio``; Section 4.2 "against a 10 s HiGHS MILP"), or
    ``"lower_bound"``, its proven bound (``ratio_to_lb``)."""
    r = Reading.of(reading) if reading is not None else Reading.paper()
    return df["ratio"] if r["milp_reference"] == "incumbent" else df["ratio_to_lb"]


def _milp_key(inst: Instance, model: CostModel, time_limit, warm_start) -> bytes:
    return b"milp:" + readings.batch_hash(inst, model, float(time_limit), bool(warm_start))


def _milp(inst: Instance, model: CostModel, time_limit, warm_start=False):
    """The MILP's dispatch (cold, or warm-started from tempo).  A cold one is the batch's
    reference (:func:`tempo.studies.milp_references.exact`: the answer proven once and stored in
    data/milp/, re-verified by re-pricing, else HiGHS single-threaded under a node limit), the
    same on every machine; ``time_limit`` (the paper's 10 s) only names the grid's setting.  It
    is kept in the grid memo (:func:`tempo.studies.sweep.memo_get`, by instance, model and limit): the alternative
    readings of :func:`solver_vs_milp` and :func:`thm2_probe` that keep the batches (another
    TEMPO preset, ensemble or token-LP face) compare against the same MILP answer instead of
    re-solving it (a time-limited MILP's incumbent depends on the machine's load; reusing it
    keeps the comparison like with like and saves the time); the fallbacks it came from are
    counted again on reuse."""
    if warm_start:
        return solve(inst, model, "milp", time_limit=time_limit, warm_start=warm_start)
    key = _milp_key(inst, model, time_limit, warm_start)
    hit = memo_get(key)
    if hit is None:
        before = fallback_count()
        d = milp_references.exact(inst, model)
        memo_put(key, (d, fallback_count() - before))
        return d
    add_count(hit[1])  # a reused answer that came from a fallback is counted again
    return hit[0]


@experiment("solver_vs_milp", readings=SOLVER_READINGS)
def solver_vs_milp(config: dict) -> pd.DataFrame:
    """tempo_fast against the time-limited MILP on the synthetic phase grid.

    Under the config's reading: the batches' router and placement, which TEMPO
    (``tempo_preset``, ``ensemble_lp``) and which token-LP face ``vs_token_lp_face_pct``
    compares with (``token_lp_face``); every face's makespan is a column
    (``token_lp_even``, ``token_lp_vertex``, ``token_lp_highs``).  Both MILP references are
    columns: ``ratio`` (tempo / the MILP's dispatch at its limit) and ``ratio_to_lb`` (tempo /
    its proven bound); :func:`milp_ratio` picks the reading's.

    With a trace (``config["trace"]``) the grid's cells are followed by the same comparison on
    trace batches (the paper's "real-trace grids", Section 4.2): per EP size, replication and
    batch size of the grid, ``batches`` batches drawn from the trace (:class:`TraceRouting`,
    layers cycled, fresh placement from its history); ``skew`` is NaN there and a ``routing``
    column says which rows are which."""
    cells = list(_phase_cells(config))
    tr = _trace_of(config)
    if tr:  # one trace cell per (EP, replication, B) of the grid: the trace replaces the skew axis
        trace_cells = dict.fromkeys((g, rep, B) for g, _, _, rep, B in cells)
        cells = [(*c, "synthetic") for c in cells] + [(g, tr.n_experts, float("nan"), rep, B, "trace")
                                                      for g, rep, B in trace_cells]
    return run_grid(_milp_cell, [{"cell": c, "config": config} for c in cells], workers=config.get("workers"),
                    progress=config.get("progress", True), desc="tempo vs MILP")


_TRACES: dict = {}


def _trace_of(config: dict):
    """``TraceRouting.of(config)``, read once per process (the cells of a grid share it)."""
    key = (config.get("trace"), config.get("trace_sha256"), config.get("trace_history", 0.5))
    if key[0] is None:
        return None
    tr = _TRACES.get(key)
    if tr is None:
        tr = TraceRouting.of(config)
        if len(_TRACES) >= 2:
            _TRACES.clear()
        _TRACES[key] = tr
    return tr


def _milp_cell(cell: dict) -> list[dict]:
    """One cell of :func:`solver_vs_milp`: its batches, tempo timed, the MILP, the three
    token-LP faces."""
    config = cell["config"]
    g, E, s, rep, B, *routing = cell["cell"]
    src = _trace_of(config) if routing == ["trace"] else None
    # trace batches are priced with the Table 6 model of the trace's shape (its experts and top-k)
    model = CostModel.named(config.get("params") or model_shape(src.shape() if src else "DSv3").params)
    reading = readings.of(config)
    tempo_kw = readings.tempo_options(reading)
    rows = []
    for b, inst in enumerate(readings.batches(reading, E, g, B, s, rep, config["batches"], seed=config.get("seed", 0) + B,
                                        trace=src)):
        t0 = time.perf_counter()
        d = solve(inst, model, "tempo", **tempo_kw)
        t_ms = 1e3 * (time.perf_counter() - t0)
        ms = model.makespan(inst, d)
        m = _milp(inst, model, config["time_limit"], config.get("warm_start", False))
        lp = {face: model.makespan(inst, solve(inst, model, "token_lp", face=face))
              for face in ("even_spread", "maxflow_vertex", "highs_vertex")}
        lp_even, lp_vertex = lp["even_spread"], lp["maxflow_vertex"]
        rows.append({"ep": g, "experts": E, "skew": s, "replication": rep, "tokens_per_gpu": B, "batch": b,
                     "tempo": ms, "milp": m.meta["objective"], "milp_lb": m.meta["lower_bound"],
                     "milp_optimal": m.meta["optimal"], "ratio": ms / m.meta["objective"],
                     # no proven bound (a cold MILP stopped before its root bound): NaN, never a ratio
                     "ratio_to_lb": ms / m.meta["lower_bound"] if m.meta["lower_bound"] > 0 else float("nan"),
                     "tempo_ms": t_ms, "milp_s": m.meta["solve_s"],
                     # where the reference comes from: "stored" (data/milp/) or "computed" here, and its limit
                     "milp_source": m.meta.get("source", "computed"), "milp_limit": m.meta.get("limit", ""),
                     "chosen": d.meta["chosen"], "token_lp_even": lp_even, "token_lp_vertex": lp_vertex,
                     "token_lp_highs": lp["highs_vertex"],
                     "vs_token_lp_pct": 100 * (ms / min(lp_even, lp_vertex) - 1),
                     "vs_token_lp_face_pct": 100 * (ms / lp[reading["token_lp_face"]] - 1),
                     **({"routing": routing[0]} if routing else {})})
    return rows


def _time_solves(config: dict) -> list[dict]:
    """tempo under ``config``'s reading on the batches of :func:`solver_vs_milp`'s grid (the same
    cells, seeds and batches): per batch the median over ``repeats`` solves of the wall time
    (``perf_counter``) and of this process's CPU time (``process_time``, which a loaded machine
    does not inflate), in ms.  One untimed solve first (imports, machine code loaded)."""
    model = CostModel.named(config.get("params", "dsv3-offline"))
    reading = readings.of(config)
    kw = readings.tempo_options(reading)
    repeats = int(config.get("repeats", 3))
    import numba

    jit_off = bool(numba.config.DISABLE_JIT)  # how this process runs the compiled functions
    rows, warm = [], False
    for g, E, s, rep, B in _phase_cells(config):
        for b, inst in enumerate(readings.batches(reading, E, g, B, s, rep, config["batches"], seed=config.get("seed", 0) + B)):
            if not warm:
                solve(inst, model, "tempo", **kw)
                warm = True
            wall, cpu = [], []
            for _ in range(repeats):
                t0, c0 = time.perf_counter(), time.process_time()
                solve(inst, model, "tempo", **kw)
                wall.append(1e3 * (time.perf_counter() - t0))
                cpu.append(1e3 * (time.process_time() - c0))
            rows.append({"ep": g, "experts": E, "skew": s, "replication": rep, "tokens_per_gpu": B, "batch": b,
                         "wall_ms": float(np.median(wall)), "cpu_ms": float(np.median(cpu)), "jit_disabled": jit_off})
    return rows


def _time_main() -> None:
    """Entry point of :func:`solver_runtime`'s subprocess: a config (JSON) on stdin, the rows of
    :func:`_time_solves` (JSON) on stdout."""
    json.dump(_time_solves(json.loads(sys.stdin.read())), sys.stdout)


#: How :func:`solver_runtime` runs tempo_fast: its compiled machine code (numba), and the same
#: code as Python, with numba's JIT disabled (``NUMBA_DISABLE_JIT=1`` in a subprocess: every
#: compiled function runs as the Python it is written in), the ``solver_runtime`` reading's
#: ``pure_python`` (Section 4.2: "1.9 ms ... pure Python").
RUNTIMES = ("compiled", "python")


@experiment("solver_runtime", readings=("synthetic_router", "placement_loads", "eplb_ties", "tempo_preset", "chain_depth", "ensemble_lp"))
def solver_runtime(config: dict) -> pd.DataFrame:
    """tempo_fast's solve time on :func:`solver_vs_milp`'s batches, compiled and as pure Python
    (:data:`RUNTIMES`): one row per (batch, runtime) with ``wall_ms`` and ``cpu_ms``
    (:func:`_time_solves`).  The Python run is a subprocess with ``NUMBA_DISABLE_JIT=1``
    (``config["python_timeout"]`` seconds at most, default 1800); ``config["repeats"]`` solves
    per batch (default 3).  The times are this machine's: compare them with the paper's as
    times on another machine."""
    rows = [{**r, "runtime": "compiled"} for r in _time_solves(config)]
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    proc = subprocess.run([sys.executable, "-c", "from tempo.studies.solver import _time_main; _time_main()"],
                          input=json.dumps(config, default=str), capture_output=True, text=True, env=env,
                          timeout=float(config.get("python_timeout", 1800)))
    if proc.returncode != 0:
        raise RuntimeError(f"solver_runtime: the pure-Python run failed (rc {proc.returncode}): {proc.stderr[-2000:]}")
    rows += [{**r, "runtime": "python"} for r in json.loads(proc.stdout)]
    return pd.DataFrame(rows)


VARIANTS = {"full": {}, "no partial moves": {"partial": False}, "no aug. chains": {"chains": False},
            "no ensemble": {"ensemble": False}}


@experiment("ablation", readings=("synthetic_router", "placement_loads", "eplb_ties", "ablation_reference", "chain_depth", "ensemble_lp"))
def ablation(config: dict) -> pd.DataFrame:
    """Table 2: each stage switched off in turn, makespan degradation against full tempo.

    Under the config's reading: the batches' router and placement, the reference
    (``ablation_reference``: the paper preset, Section 4.2's "full tempo_fast", or the library's
    default) and its ensemble's LP candidates (``ensemble_lp``); every variant is the reference
    with one stage off.  ``config["seed"]`` ("whole", "greedy"), when given, overrides the
    reference's stage-1 seed ("whole" by default: the paper preset's, and the
    ``default_whole_seed`` reference's; the chapter's second table runs the library default with
    its own "greedy" seed); ``config["batch_seeds"]`` (a list of offsets, default ``[0]``) repeats the grid with
    other random batches (``batch_seed`` column)."""
    cells = [{"cell": (bseed, grid, *c), "config": config} for bseed in config.get("batch_seeds", [0])
             for grid in ("phase", "scale") for c in _phase_cells(config[grid])]
    return run_grid(_ablation_cell, cells, workers=config.get("workers"), progress=config.get("progress", True),
                    desc="ablation")


def _ablation_cell(cell: dict) -> list[dict]:
    """One cell of :func:`ablation`: its batches under the reference and each variant (each
    solve kept in the grid memo, :func:`tempo.studies.readings.makespan`: a reading whose
    batches come out the same reuses it)."""
    config = cell["config"]
    bseed, grid, g, E, s, rep, B = cell["cell"]
    model = CostModel.named(config.get("params", "dsv3-offline"))
    reading = readings.of(config)
    kw = readings.tempo_options(reading, "ablation_reference")
    seed = config.get("seed", "whole")  # both references of the reading seed with whole experts
    kw["seed"] = seed
    rows = []
    for b, inst in enumerate(readings.batches(reading, E, g, B, s, rep, config["batches"], seed=B + 17 + 1000 * bseed)):
        full = readings.makespan(inst, model, "tempo", **kw)
        for name, opts in VARIANTS.items():
            if name == "full":
                continue
            v = readings.makespan(inst, model, "tempo", **kw, **opts)
            rows.append({"seed": seed, "preset": kw["options"], "batch_seed": bseed, "grid": grid, "ep": g,
                         "experts": E, "skew": s, "replication": rep, "tokens_per_gpu": B, "batch": b,
                         "variant": name, "makespan": v, "full": full,
                         "degradation_pct": 100 * (v / full - 1)})
    return rows


# ---------------------------------------------------------------------------- drift-16 (Tables 8, 9)
STAGES = {"seed only (whole experts, as the paper)": dict(seed="whole", chains=False, local_search=False, ensemble=False),
          "seed only": dict(chains=False, local_search=False, ensemble=False),
          "+aug. chains": dict(local_search=False, ensemble=False),
          "+local search": dict(ensemble=False),
          "+LP ensemble": dict(),
          "seed+local, no chains": dict(chains=False, ensemble=False)}


def _drift_batches(config: dict):
    """(B, batch index, instance) over the drift-16 batches of ``config`` at the ``proxy_skew``
    reading's skew (:func:`proxy_skew_of`; drawn from a trace when ``config["trace"]`` names
    one, :func:`drift_batches`)."""
    tr = TraceRouting.of(config)
    skew = 1.0 if tr else proxy_skew_of(config)
    for B in config["tokens"]:
        for b, inst in enumerate(drift_batches(B, config["batches"], seed=config.get("seed", 0), trace=tr, skew=skew)):
            yield B, b, inst


def _with_skew(df: pd.DataFrame, config: dict) -> pd.DataFrame:
    """``df`` with a ``skew`` column: the proxy's Zipf skew its batches ran at (NaN on a trace)."""
    df["skew"] = float("nan") if config.get("trace") else proxy_skew_of(config)
    return df


def _drift_cells(config: dict, model: CostModel):
    """(B, batch index, instance, static makespan) over :func:`_drift_batches`."""
    for B, b, inst in _drift_batches(config):
        yield B, b, inst, model.makespan(inst, solve(inst, model, STATIC))


@experiment("drift16_stages", readings=("proxy_skew",))
def drift16_stages(config: dict) -> pd.DataFrame:
    """Table 8: cumulative stages on the drift-16 scenario, makespan / static under the
    three-term serving model; solve time per batch."""
    model = CostModel.named(config.get("params", "proxy-serving"))
    rows = []
    for B, b, inst, static in _drift_cells(config, model):
        for name, opts in STAGES.items():
            t0 = time.perf_counter()
            d = solve(inst, model, "tempo", **opts)
            rows.append({"B": B, "batch": b, "stages": name,
                         "ratio_to_static": model.makespan(inst, d) / static,
                         "solve_ms": 1e3 * (time.perf_counter() - t0)})
    return _with_skew(pd.DataFrame(rows), config)


def forced_time(inst: Instance, model: CostModel) -> float:
    """The makespan no dispatch can avoid on ``inst``: on each GPU, the experts whose only replica
    it holds must run there with all their tokens; the slowest GPU under that forced load (Eq. 1/4
    pricing).  A lower bound on every dispatch's makespan."""
    single = (inst.n_replicas == 1) & (inst.counts > 0)
    gpu = inst.replica_gpu[np.arange(inst.n_experts), np.argmax(inst.valid, axis=1)]
    G = np.bincount(gpu[single], minlength=inst.n_gpus).astype(np.float64)
    N = np.bincount(gpu[single], weights=inst.counts[single].astype(np.float64), minlength=inst.n_gpus)
    return float(model.time(G, N).max())


@experiment("drift16_forced", readings=("proxy_skew",))
def drift16_forced(config: dict) -> pd.DataFrame:
    """Why Table 8's rows agree: on the batches of ``drift16_stages`` (the same config, the trace's
    when it names one), per (B, batch) whether every stage set of :data:`STAGES` ends at the same
    makespan (``same_makespan``) and whether each ends at :func:`forced_time`, the time of the
    single-replica experts' GPU that no stage can lower (``at_forced_time``); relative 1e-9."""
    model = CostModel.named(config.get("params", "proxy-serving"))
    rows = []
    for B, b, inst in _drift_batches(config):
        ms = [model.makespan(inst, solve(inst, model, "tempo", **o)) for o in STAGES.values()]
        f = forced_time(inst, model)
        rows.append({"B": B, "batch": b, "same_makespan": bool(max(ms) - min(ms) <= 1e-9 * max(ms)),
                     "at_forced_time": bool(all(abs(v - f) <= 1e-9 * f for v in ms))})
    return pd.DataFrame(rows)


TERMS = {"full 3-term (4)": (), "drop traffic (c2 gamma)": ("traffic",), "drop floor (a b) = tokens only": ("floor",)}


@experiment("drift16_terms", readings=("proxy_skew",))
def drift16_terms(config: dict) -> pd.DataFrame:
    """Table 9: solve with terms deleted from the objective, score under the full model."""
    full = CostModel.named(config.get("params", "proxy-serving"))
    rows = []
    for B, b, inst, static in _drift_cells(config, full):
        for name, drop in TERMS.items():
            obj = full.without(*drop) if drop else full
            d = solve(inst, obj, "tempo")
            rows.append({"B": B, "batch": b, "objective": name,
                         "ratio_to_static": full.makespan(inst, d) / static})
    return _with_skew(pd.DataFrame(rows), config)
