"""The claims ledger: every claim of ``claims.yaml`` evaluated on this build's results, now.

:func:`evaluate` gives one claim's row (status, ours, tolerance, evidence, provenance, note) from
the result CSVs under ``build/results/<profile>/``; :func:`build_ledger` gives all of them (and writes
``claims.csv`` and ``ledger_summary.md``); :func:`view` the rows a chapter shows beside its
results; :mod:`.terminal` is ``python -m tempo ledger``.  Importing this module registers every
claim function (:mod:`tempo.book.claims.functions`).
"""
from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pandas as pd

from ...core.io import atomic_write_csv, atomic_write_text
from ...paper import readings
from ...paper.claims_file import claim_rows
from ...paper.readings import Reading
from ...studies.results import ResultKey, Results
from . import functions  # noqa: F401  (registers every claim's function)
from .functions.measured import MEASURED_CLAIMS
from .functions.trace import RECIPES
from .registry import (CATEGORIES, CATEGORY, CONSISTENCY, EVIDENCE, EVIDENCE_CATEGORY, EVIDENCE_STATUS, NEED_STATUS,
                       REGISTRY, SATISFIES, STATUSES, VERDICTS, Spec, Value, check, format_value, one_build, printed,
                       tolerance)



def _results(profile) -> Results:
    """``profile``'s results: a :class:`~tempo.studies.results.Results` as given, or a new one
    for a profile name (each file read once through it)."""
    return profile if isinstance(profile, Results) else Results(profile)


def load_inputs(profile, stems) -> tuple[dict, list]:
    """The frames of ``stems`` this build wrote (``attrs["meta"]``: the run's ``.meta.json``; a
    claim on a recorded trace names it), and the stems that are missing.  A CSV without its
    ``.meta.json`` (written by an older tempo, or by hand) counts as missing.  ``profile``: a
    profile name or a :class:`~tempo.studies.results.Results`."""
    results = _results(profile)
    frames, missing = {}, []
    for s in stems:
        if results.exists(s):
            frames[s] = results.load(s)
        else:
            missing.append(s)
    return frames, missing


def _config_text(config: dict, limit: int = 160) -> str:
    """A compact ``key=value`` rendering of an experiment's configuration (the generator's parameters)."""
    parts = []
    for k, v in sorted(config.items()):
        if isinstance(v, (list, tuple)) and len(v) > 4:
            v = f"[{v[0]}..{v[-1]}] ({len(v)})"
        parts.append(f"{k}={v}")
    text = ", ".join(parts)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _provenance(spec: Spec, value: Value, results: Results) -> str:
    text = value.provenance or spec.provenance or EVIDENCE[value.evidence or spec.evidence]
    metas = [(s, results.meta(s)) for s in spec.inputs]
    built = "; ".join(f"{s}.csv ({_config_text(m.get('config') or {})}; {m['written_utc'][:10]}, tempo {m['code_version']}"
                      + (f", commit {m['git_commit']}" if m.get("git_commit") else "") + ")"
                      for s, m in metas if m)
    return f"{text}" + (f" [{built}]" if built else "")


def _reading_ids(meta: dict | None) -> dict:
    """The readings an input ran under (its config's ``reading``: id -> choice)."""
    return dict(((meta or {}).get("config") or {}).get("reading") or {})


def _inputs_under(spec: Spec, results: Results, alternative) -> tuple[dict, str]:
    """{input stem: the stem to read} for ``spec`` under ``alternative`` ((id, choice), or None
    for the paper's reading), and "" or why the alternative cannot be computed in this build.
    An input whose run under the alternative exists (:meth:`ResultKey.under`; a chapter that
    applies a reading to an experiment's config, the ``skew_grid``, writes the same stem) is
    replaced by it; an input whose experiment depends on the reading but has no such run makes
    the alternative "not run"; a reading no input ran under must be one the function reads
    itself (``uses``)."""
    stems = {s: s for s in spec.inputs}
    if alternative is None:
        return stems, ""
    rid, choice = alternative
    for s in spec.inputs:
        alt = ResultKey.parse(s).under(rid, choice).stem
        if results.has_csv(alt):
            stems[s] = alt
        elif rid in _reading_ids(results.meta(s)):
            return stems, f"{alt}.csv is not in build/results/{results.profile}/ (this build did not run {s} under it)"
    if stems == {s: s for s in spec.inputs} and rid not in spec.uses:
        return stems, (f"no input of this claim ran under {rid}={choice} in this build"
                       if spec.inputs else f"its function does not read {rid}")
    return stems, ""


def _reading_label(frames: dict, expected) -> str:
    """The reading the inputs ran under, as a short label ("paper", "paper+id=choice"); names
    any input whose run differs from ``expected`` (a :class:`Reading`)."""
    seen = {}
    for f in frames.values():
        seen.update(_reading_ids(f.attrs.get("meta")))
    if not seen:
        return ""
    off = {k: v for k, v in seen.items() if expected[k] != v}
    label = expected.label(seen)
    return label + (" (inputs differ: " + ", ".join(f"{k}={v}" for k, v in off.items()) + ")" if off else "")


def _call(spec: Spec, frames: dict, reading):
    return spec.fn(frames, reading=reading) if spec.uses else spec.fn(frames)


def _seeds_text(v: Value, bound=None) -> str:
    if v.seeds is None or v.n_seeds < 2:
        return ""
    rng = v.seeds if isinstance(v.seeds[0], tuple) else (v.seeds,)
    span = " and ".join(f"{format_value(lo)} to {format_value(hi)}" for lo, hi in rng)
    if bound in ("upper", "lower"):  # check(): a bound must hold on every seed
        return f"; a bound: it must hold on each of {v.n_seeds} seeds (range {span})"
    return f"; the paper's value within the range of {v.n_seeds} seeds {span}"


def evaluate(row: dict, profile, alternative=None) -> dict:
    """One ledger row for one claim, computed from this build's results (``profile``: a
    profile name or a :class:`~tempo.studies.results.Results`, which reads each file once):
    under the paper's reading (``data/paper/readings.yaml``), or under ``alternative`` =
    (reading id, choice), every other reading the paper's (the ledger's sensitivity columns)."""
    results = _results(profile)
    spec = REGISTRY.get(row["id"])
    need = row["needs"]
    out = {"ours": None, "tolerance": "", "evidence": "", "provenance": "", "note": "", "reading": "", "n_seeds": 0}
    if spec is None:
        if need is None:
            raise ValueError(f"claim {row['id']!r} has neither a function in tempo.book.claims.functions nor a declared need")
        out.update(status=NEED_STATUS[need], note=need_note(row))
        return out
    reading = Reading.paper() if alternative is None else Reading.paper(**{alternative[0]: alternative[1]})
    stems, why_not = _inputs_under(spec, results, alternative)
    if why_not:
        out.update(status=NEED_STATUS[need] if need is not None else "not run in this build", note=why_not)
        return out
    frames, missing = load_inputs(results, list(stems.values()))
    frames = {k: frames[v] for k, v in stems.items() if v in frames}
    missing = [k for k, v in stems.items() if v in missing]
    if missing:
        if need is not None:
            out.update(status=NEED_STATUS[need], note=need_note(row))
        else:
            out.update(status="not run in this build",
                       note="this build has no " + ", ".join(f"{stems[m]}.csv" for m in missing)
                            + f" in build/results/{results.profile}/ (run {row['chapter']})")
        return out
    try:
        v = _call(spec, frames, reading)
    except Exception as exc:  # noqa: BLE001
        if row["id"] not in MEASURED_CLAIMS:
            raise  # a claim on this build's own results: an error is a bug, never hidden
        # the recordings under data/measured are not this build's: a bad one never stops the ledger
        warnings.warn(f"{row['id']}: its recordings could not be read ({type(exc).__name__}: {exc})", stacklevel=2)
        out.update(status="not computable", note=f"{CATEGORY['not computable'].prefix}: the recordings under "
                                                 f"data/measured could not be read ({type(exc).__name__}: {exc})")
        return out
    if v is None:  # the results hold no cell the claim is about (a reduced grid), or no GPU recording
        if need is not None and not computed_on_input(frames):
            out.update(status=NEED_STATUS[need], note=need_note(row))
        else:
            out.update(status="not run in this build",
                       note=f"this build's {', '.join(spec.inputs)} results hold no cell this claim is about "
                            f"(profile {results.profile} runs a reduced grid)")
        return out
    if not isinstance(v, Value):
        v = Value(tuple(float(x) for x in v) if isinstance(v, tuple) else float(v))
    flag = fallback_flag(frames)
    if flag:
        out["fallbacks"] = sum(int((f.attrs.get("meta") or {}).get("fallbacks") or 0) for f in frames.values())
        v = dataclasses.replace(v, note="; ".join(x for x in (v.note, flag) if x))
    evidence = v.evidence or spec.evidence
    prov = _provenance(spec, v, results)
    out["reading"] = _reading_label(frames, reading)
    if evidence in EVIDENCE_STATUS:  # a public recording of another model, or aggregates: never a verdict
        shown = v.ours if evidence != "aggregate" else None
        out.update(ours=shown, status=EVIDENCE_STATUS[evidence], evidence=evidence, provenance=prov,
                   n_seeds=v.n_seeds, note=v.note)
        return out
    if need is not None and evidence not in SATISFIES[need]:
        who = "stand-in" if evidence in ("gpu", "cluster") else "CPU stand-in"  # a GPU measurement is no CPU run
        stand = f"{who} ({EVIDENCE[evidence]}): {format_value(v.ours)} {row['unit']}, not a verdict"
        out.update(status=NEED_STATUS[need], evidence=evidence, provenance=prov,
                   note="; ".join(x for x in (need_note(row), stand, v.note) if x))
        return out
    bad = not_finite(v.ours)
    if bad and v.cause:  # the function found the claimed effect absent on this grid and says why
        out.update(ours=v.ours, status="deviates", evidence=evidence, provenance=prov, n_seeds=v.n_seeds,
                   note="; ".join(x for x in (f"computed cause: {v.cause}", v.note) if x and x != v.cause))
        return out
    if bad:  # NaN or inf (a zero time in a recording, an empty slice): no number to judge
        out.update(ours=v.ours, status="not computable", evidence=evidence, provenance=prov, n_seeds=v.n_seeds,
                   note="; ".join(x for x in (f"{CATEGORY['not computable'].prefix}: {bad}", v.note) if x))
        return out
    cat, why = category_of(row, v, evidence, results, spec)
    if cat:
        # a stand-in (other hardware, a partial grid), a time on this machine ...: shown, never a verdict
        out.update(ours=v.ours, status=cat, evidence=evidence, provenance=prov, n_seeds=v.n_seeds,
                   note="; ".join(x for x in (f"{CATEGORY[cat].prefix}: {why}", v.note) if x))
        return out
    ok, why = check(row, v)
    tol, _ = tolerance(row, v)
    if evidence in CONSISTENCY:
        status = "consistent" if ok else "deviates"
    else:
        status = "reproduced" if ok else "deviates"
    note = v.note
    if status == "deviates" and v.cause:
        note = "; ".join(x for x in (f"computed cause: {v.cause}", note) if x)
    calib = [r.id for r in readings.specs().values() if r.calibration and row["id"] in r.claims]
    if status == "reproduced" and calib:
        # decided by one of the paper's own inputs (readings.yaml `calibration`): consistent, not reproduced
        status = "consistent"
        note = "; ".join(x for x in (f"decided by the paper's own input ({', '.join(calib)}): consistent, not a "
                                     "reproduction", note) if x)
    out.update(ours=v.ours, status=status, evidence=evidence, provenance=prov, note=note,
               tolerance=f"{format_value(tol)} ({why}){_seeds_text(v, row.get('bound'))}", ci=v.ci, n_seeds=v.n_seeds)
    return out


def not_finite(ours) -> str:
    """Why ``ours`` (a float or a pair) is no number a verdict can use, or ``""``."""
    vals = ours if isinstance(ours, tuple) else (ours,)
    bad = [x for x in vals if x is None or not np.isfinite(x)]
    if not bad:
        return ""
    return (f"our value is {format_value(ours)}: the results it is computed from give no finite number "
            f"(a zero or missing time, an empty slice of the table)")


def machine_text(results: Results, stems) -> str:
    """The machine the inputs ``stems`` were computed on, from their ``.meta.json``
    (``machine``), or ``"this build's machine"`` when they do not record it."""
    seen = [m.get("machine") for m in (results.meta(s) for s in stems) if m and m.get("machine")]
    return "; ".join(dict.fromkeys(seen)) or "this build's machine"


def category_of(row: dict, v: Value, evidence: str, results: Results, spec: Spec) -> tuple[str, str]:
    """(category status, why) of a value the ledger shows but never judges (:data:`CATEGORIES`),
    or ("", "") for a verdict: the value's own category, else its evidence's
    (:data:`EVIDENCE_CATEGORY`: a time on this machine is a machine figure)."""
    if v.category:
        return v.category, v.why
    cat = EVIDENCE_CATEGORY.get(evidence)
    if cat == "machine figure":
        return cat, (f"a time measured on {machine_text(results, spec.inputs)}; the paper's "
                     f"{printed(row['paper_text'])} {row['unit']} comes from a machine it does not name, so the two are "
                     f"figures of two machines, not a check of one against the other")
    return (cat, EVIDENCE[evidence]) if cat else ("", "")


def sensitivity(row: dict, profile) -> list[dict]:
    """The claim under each alternative of each reading ``data/paper/readings.yaml`` lists it
    under (one choice changed at a time, the rest the paper's): one dict per (reading, choice)
    with our value, the status it would get and its note.  Empty for a claim no reading lists.
    ``profile``: a profile name or a :class:`~tempo.studies.results.Results`."""
    results = _results(profile)
    out = []
    for sp in readings.specs().values():
        if row["id"] not in sp.claims:
            continue
        for choice in sp.choices:
            if choice == sp.paper:
                continue
            e = evaluate(row, results, (sp.id, choice))
            out.append({"id": row["id"], "reading": sp.id, "choice": choice, "ours": format_value(e["ours"]),
                        "status": e["status"], "note": e["note"]})
    return out


def fallback_flag(frames: dict) -> str:
    """The ledger's flag for a claim whose inputs hold dispatches a solver's fallback produced
    (``fallbacks`` in a result's ``.meta.json``, :func:`tempo.studies.run`), or ``""``."""
    hit = {s: int((f.attrs.get("meta") or {}).get("fallbacks") or 0) for s, f in frames.items()}
    hit = {s: n for s, n in hit.items() if n > 0}
    if not hit:
        return ""
    return ("FLAG: computed with solver fallbacks (a time limit or a declined exact method: "
            + ", ".join(f"{n} in {s}.csv" for s, n in sorted(hit.items())) + ")")


def computed_on_input(frames: dict) -> bool:
    """Whether a need's claim's inputs ran on an input that can decide it (a recorded trace or the
    calibrated proxy, :func:`tempo.book.claims.functions.trace.decisive_input`): a function that
    then finds nothing says why in the build's terms, never with the recording recipe."""
    from .functions.trace import decisive_input

    return decisive_input(frames)


def need_note(row: dict) -> str:
    """What a claim that declares a need (trace, GPU, cluster) waits for, with the commands that give it."""
    if row.get("requires"):
        return f"needs {row['requires']}"
    if row["needs"] == "trace" and row["id"] in RECIPES:
        return RECIPES[row["id"]]
    return {"trace": trace_need_note(row["chapter"]),
            "gpu": f"needs a GPU: run `make notebook NB={row['chapter']} PROFILE=gpu` on one",
            "cluster": "needs a multi-GPU cluster: record it (see the serving chapter for the commands) and store the "
                       "recording with python -m tempo ingest"}[row["needs"]]


#: how a person records the routing trace a "needs a recorded trace" claim waits for
RECORD_TRACE = ("record routing with SGLang: launch the server with `--expert-distribution-recorder-mode per_pass` "
                "and `SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR=DIR`, POST /start_expert_distribution_record, serve "
                "the workload, POST /stop_expert_distribution_record and /dump_expert_distribution_record; then "
                "`python -m tempo import-trace DIR/*.pt -o trace.npz --model MODEL --top-k K`")


def trace_need_note(chapter: str) -> str:
    """The exact commands that give a trace claim of ``chapter`` its verdict."""
    return (f"needs a recorded routing trace: {RECORD_TRACE}, then `make notebook NB={chapter} TRACE=trace.npz` "
            f"and `python -m tempo ledger` (the whole book: `make book TRACE=trace.npz`)")


def build_ledger(profile: str, write: bool = True) -> pd.DataFrame:
    """Every claim with paper, ours, tolerance, status, evidence, provenance and note, recomputed
    from ``build/results/<profile>/`` now (each result file read once), under the paper's
    reading; ``readings`` names the readings it depends on and ``under other readings`` its value
    and status under each alternative (:func:`sensitivity`; ``attrs["sensitivity"]`` holds them
    as a table).  Also written to ``claims.csv``, ``claims_sensitivity.csv`` and
    ``ledger_summary.md`` there."""
    results = Results(profile)
    with one_build():   # each intermediate (a recording read, a fit) computed once
        rows, sens = _rows(results)
    df = pd.DataFrame(rows)
    df.attrs["sensitivity"] = pd.DataFrame(sens, columns=["id", "reading", "choice", "ours", "status", "note",
                                                          "paper_reading_ours", "paper_reading_status"])
    if write:
        d = results.dir
        atomic_write_csv(show_table(df), d / "claims.csv")
        atomic_write_csv(df.attrs["sensitivity"], d / "claims_sensitivity.csv")
        atomic_write_text(d / "ledger_summary.md", summary_markdown(df, profile))
    return df


def _rows(results: Results) -> tuple[list, list]:
    rows, sens = [], []
    for r in claim_rows():
        e = evaluate(r, results)
        alt = sensitivity(r, results) if e["status"] not in NEED_STATUS.values() else []
        for a in alt:
            a["paper_reading_status"], a["paper_reading_ours"] = e["status"], format_value(e["ours"])
        sens += alt
        if e["status"] == "deviates":
            e["note"] = deviation_note(e["note"], alt)
        e.update(unpublished_choice(e, alt))
        rows.append({"id": r["id"], "section": r["section"], "claim": r["claim"], "unit": r["unit"],
                     "paper": r["paper"], "paper_text": printed(r["paper_text"]), "ours": e["ours"], "tolerance": e["tolerance"], "status": e["status"],
                     "evidence": e["evidence"], "provenance": e["provenance"], "note": e["note"],
                     "kind": r["kind"], "needs": r["needs"] or "", "chapter": r["chapter"], "reading": e["reading"],
                     "n_seeds": e["n_seeds"], "readings": ", ".join(dict.fromkeys(a["reading"] for a in alt)),
                     "under other readings": alternatives_text(alt), "fallbacks": e.get("fallbacks", 0)})
    return rows, sens


def unpublished_choice(e: dict, alt: list[dict]) -> dict:
    """``{status, note}`` for a verdict that differs under an alternative of a reading the paper
    leaves unpublished (``unpublished: true`` in readings.yaml: how grids are pooled, a suite's
    shapes): the category "hangs on an unpublished choice", with the verdict under each reading;
    ``{}`` otherwise."""
    if e["status"] not in VERDICTS:
        return {}
    specs = readings.specs()
    moved = [a for a in alt if a["reading"] in specs and specs[a["reading"]].unpublished
             and verdict_moves(e["status"], a["status"])]
    if not moved:
        return {}
    per = "; ".join([f"paper's reading: {e['status']} ({format_value(e['ours'])})"]
                    + [f"{a['reading']}={a['choice']}: {a['status']} ({a['ours']})" for a in moved])
    prefix = CATEGORY["hangs on an unpublished choice"].prefix
    return {"status": "hangs on an unpublished choice",
            "note": "; ".join(x for x in (f"{prefix}: {per}", e["note"]) if x)}


def deviation_note(note: str, alt: list[dict]) -> str:
    """A deviating claim's note with its readings' cause (:func:`reading_cause`): in front when
    the claim has no computed cause of its own; after its own cause when some alternative
    reading would make it agree (both are true)."""
    if "computed cause: " not in note:
        return "; ".join(x for x in (reading_cause(alt), note) if x)
    if any(a["status"] in ("reproduced", "consistent") for a in alt):
        return "; ".join(x for x in (note, reading_cause(alt).replace("computed cause: ", "", 1)) if x)
    return note


def reading_cause(alt: list[dict]) -> str:
    """The computed cause of a deviation that has no claim-specific one, from its
    :func:`sensitivity` rows: the alternatives under which it would not deviate, or the
    statement that no listed reading moves it (then the cause is outside the readings)."""
    moved = [a for a in alt if a["status"] in ("reproduced", "consistent")]
    if moved:
        return ("computed cause: the verdict rests on a reading; it agrees under "
                + ", ".join(f"{a['reading']}={a['choice']} ({a['ours']})" for a in moved))
    ran = [a for a in alt if a["status"] == "deviates"]
    if ran:
        return (f"computed cause: outside the readings; it deviates under every alternative run too "
                f"({len(ran)} of {len(alt)}: " + ", ".join(f"{a['reading']}={a['choice']} {a['ours']}" for a in ran[:4])
                + (", ..." if len(ran) > 4 else "") + ")")
    return ""


def alternatives_text(alt: list[dict]) -> str:
    """``"reading=choice: ours (status); ..."`` for a claim's :func:`sensitivity` rows."""
    return "; ".join(f"{a['reading']}={a['choice']}: {a['ours'] or '-'} ({a['status']})" for a in alt)


def _claims_of(ids) -> dict:
    """The claims.yaml rows of ``ids`` by id; ``ValueError`` naming the unknown ids."""
    rows = {r["id"]: r for r in claim_rows()}
    unknown = [i for i in ids if i not in rows]
    if unknown:
        raise ValueError(f"unknown claim ids {unknown}")
    return rows


def view(profile: str, ids) -> pd.DataFrame:
    """The ledger rows of ``ids`` as a chapter shows them beside its results: the claim, the
    paper's number, ours, the status and the note, computed now from this build's results."""
    results = Results(profile)
    rows = _claims_of(ids)
    out = []
    with one_build():
        evals = {i: evaluate(rows[i], results) for i in ids}
    for i in ids:
        e = evals[i]
        out.append({"claim": rows[i]["claim"], "paper": printed(rows[i]["paper_text"]), "this artifact": format_value(e["ours"]),
                    "unit": rows[i]["unit"], "status": e["status"], "note": e["note"]})
    return pd.DataFrame(out, index=pd.Index(list(ids), name="id"))


def verdict_moves(paper_status: str, other_status: str) -> bool:
    """Whether a claim's verdict differs under another reading: both are verdicts or categories
    (:data:`VERDICTS`, :data:`CATEGORIES`) and they differ.  A missing run or a need moves nothing."""
    kinds = set(VERDICTS) | set(CATEGORY)
    return paper_status in kinds and other_status in kinds and paper_status != other_status


def sensitivity_view(profile: str, ids) -> pd.DataFrame:
    """The claims ``ids`` under the paper's reading and under each alternative the ledger shows
    (:func:`sensitivity`), as a chapter shows them beside its results: one row per claim and
    alternative reading, our value and the status it would get, the paper-reading row first."""
    results = Results(profile)
    rows = _claims_of(ids)
    out = []
    for i in ids:
        e = evaluate(rows[i], results)
        out.append({"id": i, "reading": "paper's reading", "paper": printed(rows[i]["paper_text"]),
                    "this artifact": format_value(e["ours"]), "status": e["status"]})
        out += [{"id": i, "reading": f"{a['reading']} = {a['choice']}", "paper": "", "this artifact": a["ours"],
                 "status": a["status"] + (" (verdict moves)" if verdict_moves(e["status"], a["status"]) else "")}
                for a in sensitivity(rows[i], results)]
    return pd.DataFrame(out).set_index(["id", "reading"])


def counts(df: pd.DataFrame) -> dict:
    return {s: int((df.status == s).sum()) for s in STATUSES}


def categories_text(c: dict) -> str:
    """``"n stand-ins (...), n machine figures (...), ..."``: the counts of every category
    (:data:`CATEGORIES`) as the summary, the README and the intro give them."""
    return ", ".join(f"{c[k.status]} {k.counted}" for k in CATEGORIES)


def summary_markdown(df: pd.DataFrame, profile: str) -> str:
    """The ledger's counts as one paragraph (``ledger_summary.md``, which the book's intro
    includes): every status of :data:`STATUSES`, the categories apart from the verdicts."""
    c = counts(df)
    return (f"**Claims ledger** ({len(df)} claims, profile `{profile}`, recomputed from this build's results under the "
            f"paper's reading): {c['reproduced']} reproduced, {c['consistent']} consistent with the paper's own parameters "
            f"(not counted as reproduced), {c['deviates']} deviate; apart from the verdicts {categories_text(c)}; "
            f"{c['not run in this build']} not run in this build, "
            f"{c['needs a recorded trace']} need a recorded trace, {c['needs a GPU']} need a GPU, "
            f"{c['needs a cluster']} need a cluster. See the [Claims ledger](claims-ledger) chapter.\n")


def show_table(df: pd.DataFrame) -> pd.DataFrame:
    """The ledger as the chapter and the CLI show it (formatted numbers)."""
    cols = ["id", "status", "paper", "ours", "unit", "tolerance", "section", "claim", "evidence", "provenance", "note"]
    cols += [c for c in ("reading", "readings", "under other readings") if c in df]
    return df.assign(paper=df.paper_text, ours=df.ours.map(format_value))[cols]


def skipped_recordings() -> list:
    """``(folder, why)`` of every recording under data/measured that its reader skips (a bad
    recording never stops the ledger: it is left out with a warning; here it is counted)."""
    import warnings

    from ...measured.catalog import recordings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(recordings().attrs.get("skipped", []))


def claims_reading(kind: str) -> list[str]:
    """The ledger claims whose function reads ingested recordings of ``kind`` (``"epbench"``,
    ``"serve-bench"``; :mod:`tempo.measured.catalog`)."""
    return [c for c, k in MEASURED_CLAIMS.items() if k == kind]
