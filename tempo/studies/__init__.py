"""Experiments: each is a function ``(config: dict) -> pandas.DataFrame`` (tidy, one row per
cell and policy), registered by name.  :func:`run` caches the result and writes it to
``build/results/<profile>/<experiment>.csv``, the one place chapters and the ledger read."""
from __future__ import annotations

import json
import os
import resource
import time

import pandas as pd
from threadpoolctl import threadpool_limits

from ..core.version import git_commit, machine_name
from ..paper.readings import Reading
from .cache import cached, code_version
from .registry import (EXPERIMENTS, FIRST_REPLICA, READINGS, STATIC, experiment,  # noqa: F401  (tempo.studies.STATIC, ...)
                       result_of, with_reading)
from .results import PROFILES, ResultKey, Results  # noqa: F401  (tempo.studies.PROFILES)
from .sweep import labelled, memo_clear


#: the experiments behind the claims the paper computes on recorded routing: given a trace
#: (:func:`use_trace`, the build's ``TRACE``), they draw their batches from it
#: (:class:`tempo.studies.scenarios.TraceRouting`).  ``trace_replay`` takes its trace in its
#: own config.
TRACE_EXPERIMENTS = frozenset({"mixed_regime", "proxy_mispricing", "thm2_epsilon", "solver_vs_milp",
                               "policy_landscape", "staleness", "drift16_stages", "drift16_terms", "drift16_forced",
                               "faster_eplb", "moonep_replay", "tile_prefill", "ba2a_regimes", "routing_stats"})
#: the experiments of the claims the paper computed on real-model routing (Sections 2.2, 2.4, 3.1,
#: 4.2): without a ``TRACE`` a chapter may run them on a shipped public trace (:func:`use_trace`'s
#: ``public``), beside their synthetic rows; the proxy studies stay synthetic
PUBLIC_TRACE_EXPERIMENTS = frozenset({"mixed_regime", "thm2_epsilon", "solver_vs_milp", "tile_prefill",
                                      "routing_stats"})
_trace: dict = {}
_public: dict = {}


def use_trace(path, public: str | None = None) -> dict:
    """Make every later :func:`run` of a :data:`TRACE_EXPERIMENTS` experiment draw its batches
    from the routing trace at ``path`` (a chapter's ``trace_path`` parameter, the build's
    ``TRACE``): its config gains ``trace``, ``trace_sha256``, ``trace_source`` and
    ``trace_about`` (:func:`tempo.world.traces.trace_config`), so the cache key and the result's
    ``.meta.json`` name the recording.  ``None`` or empty: synthetic routing (configs
    unchanged), except that with ``public`` (a shipped trace's file name under ``data/traces/``,
    e.g. :data:`tempo.studies.scenarios.PUBLIC_TRACE`) the :data:`PUBLIC_TRACE_EXPERIMENTS` run
    on it (their claims are then stand-ins, never verdicts).  Returns the keys added."""
    from ..world.traces import trace_config

    _trace.clear()
    _public.clear()
    if path:
        _trace.update(trace_config(path))
    elif public:
        from ..core import paths

        _public.update(trace_config(paths.TRACES / public))
    return dict(_trace or _public)


def run(name: str, config: dict, profile: str, refresh: bool = False, tag: str | None = None,
        reading: Reading | None = None, alternative: tuple[str, str] | None = None,
        _forget: bool = True) -> pd.DataFrame:
    """Run (or load from cache) experiment ``name`` and write its tidy CSV and provenance under
    the stem of ``ResultKey(name, tag, alternative)`` (:mod:`tempo.studies.results`):
    ``<name>.csv``, ``<name>-<tag>.csv`` when one notebook runs the same experiment twice, and
    ``<name>-[<tag>.]<id>=<choice>.csv`` for a run under one ``alternative`` (reading id,
    choice).  On a trace (:func:`use_trace`) a :data:`TRACE_EXPERIMENTS` experiment's config
    gains the trace's keys, unless it names a trace itself.

    ``reading`` (a :class:`tempo.paper.readings.Reading`; default the paper's): the choices the
    experiment depends on (:data:`READINGS`) go into its config (:func:`with_reading`), so they
    are part of the cache key and of the ``.meta.json`` the ledger reads.  ``refresh`` recomputes
    the result and forgets the grid memo (:func:`tempo.studies.sweep.memo_clear`) first."""
    if _trace and name in TRACE_EXPERIMENTS and not config.get("trace"):
        config = {**config, **_trace}
    elif _public and name in PUBLIC_TRACE_EXPERIMENTS and not config.get("trace"):
        config = {**config, **_public}
    config = with_reading(name, config, reading)
    results = Results(profile)
    key = ResultKey(name, tag, alternative)
    if refresh and _forget:  # recompute everything: also what the grid memo kept from earlier runs here
        memo_clear()
    clock = _clock()
    # one BLAS thread while the study runs here: its calls are tiny and a pool of spinning threads
    # burns the cores (tempo.core.threads; a grid's workers run with one thread each already)
    label = name if alternative is None else f"{name} ({alternative[0]}={alternative[1]})"
    with labelled(label), threadpool_limits(limits=1, user_api="blas"):
        df = cached(name, config, EXPERIMENTS[name], refresh=refresh)
    _log_time(key, profile, clock)
    # provenance for the claims ledger: which experiment, config and code (source hash and git commit) wrote
    # this CSV, and when; fallbacks: dispatches of this result that a solver's fallback produced (a time
    # limit, a declined exact method; tempo.policies.fallback_of): the ledger flags the claims that read them
    meta = {"experiment": name, "tag": key.suffix, "config": config, "profile": profile,
            "code_version": code_version(), "git_commit": git_commit(), "machine": machine_name(),
            "written_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "fallbacks": int(df.attrs.get("fallbacks", 0))}
    results.write(key, df, meta)
    return df


#: environment variable naming a file that :func:`run` appends one JSON line per study run to:
#: the study's stem, wall seconds, CPU seconds of this process and of its reaped workers
#: (``resource.getrusage``), for finding where a build spends its time; unset: nothing written
TIMES_ENV = "TEMPO_STUDY_TIMES"


def _clock() -> tuple:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter(), own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def _log_time(key: ResultKey, profile: str, start: tuple) -> None:
    path = os.environ.get(TIMES_ENV)
    if not path:
        return
    end = _clock()
    row = {"study": key.stem, "profile": profile, "wall_s": round(end[0] - start[0], 3),
           "cpu_s": round(end[1] - start[1], 3), "workers_cpu_s": round(end[2] - start[2], 3)}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")


def run_alternatives(name: str, config: dict, profile: str, reading: Reading | None = None,
                     ids=None, tag: str | None = None, refresh: bool = False) -> dict:
    """Experiment ``name`` under ``reading`` (default the paper's) and under each single
    alternative of each reading it depends on (or of ``ids`` among them): ``{(id, choice):
    DataFrame}``, with ``(None, None)`` for ``reading`` itself.  Each run is cached and writes
    its CSV (``<name>[-<tag>].csv`` for ``reading``, ``<name>-[<tag>.]<id>=<choice>.csv`` for the
    others, :class:`ResultKey`), so the ledger can show a claim under every alternative beside
    its verdict."""
    reading = reading if reading is not None else Reading.paper()
    deps = READINGS.get(name, ())
    wanted = deps if ids is None else [i for i in ids if i in deps]
    out = {(None, None): run(name, config, profile, refresh=refresh, tag=tag, reading=reading)}
    for rid in wanted:
        for alt in reading.alternatives(rid):  # refresh forgot the memo once, before the first run
            out[(rid, alt[rid])] = run(name, config, profile, refresh=refresh, tag=tag, reading=alt,
                                       alternative=(rid, alt[rid]), _forget=False)
    return out


def routing_rows(df: pd.DataFrame, which: str = "synthetic") -> pd.DataFrame:
    """The rows of ``mixed_regime`` or ``solver_vs_milp`` computed on ``which`` routing
    ("synthetic" or "trace").  Run on a trace, these two keep their synthetic grid (claims of
    their own read it) and add the trace's rows, told apart by a ``routing`` column; without
    that column every row is synthetic."""
    if "routing" not in df:
        return df if which == "synthetic" else df.iloc[:0]
    return df[df.routing == which].drop(columns="routing")


def routing_label(config: dict | None = None) -> str:
    """What a run's batches were drawn from (``config``; by default the trace of
    :func:`use_trace`), for a chapter to print beside its table: the recorded trace (file,
    sha256, source; a synthetic trace says so) or synthetic routing."""
    from ..world.traces import is_recorded, provenance

    config = (_trace or _public) if config is None else config
    prov = provenance(config)
    if prov is None:
        return "Routing: synthetic (no `TRACE` given to this build)."
    if config.get("trace_public"):
        return (f"Routing: a public recording of another model, {prov} (a stand-in for the paper's traces, "
                "not a verdict; `TRACE=` gives your own recording).")
    if not is_recorded(config.get("trace_source")):
        return f"Routing: a **synthetic** trace, {prov.split('(', 1)[1].rstrip(')')} (a pipeline demonstration, not evidence)."
    return f"Routing: {prov}."


def load(name: str, profile: str, tag: str | None = None) -> pd.DataFrame:
    """The tidy CSV an earlier :func:`run` wrote (:meth:`Results.load`)."""
    return Results(profile).load(ResultKey(name, tag))


from . import phase_grid, readings, replay, scale_s0, simulator, solver, toy  # noqa: E402,F401
