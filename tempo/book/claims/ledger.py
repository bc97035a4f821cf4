"""The claims ledger: every claim of ``claims.yaml`` evaluated on this build's results, now.

:func:`evaluate` gives one claim's row (status, ours, tolerance, evidence, provenance, note) from
the result CSVs under ``build/results/<profile>/``; :func:`ledger` gives all of them (and writes
``claims.csv`` and ``ledger_summary.md``); :func:`view` the rows a chapter shows beside its
results; :func:`main` is ``python -m tempo ledger``.  Importing this module registers every
claim function (:mod:`tempo.book.claims.functions`).
"""
from __future__ import annotations

import dataclasses
import json
import sys

import pandas as pd

from ...core import paths
from ..paper import claim_rows
from . import functions  # noqa: F401  (registers every claim's function)
from .functions.measured import MEASURED_CLAIMS
from .registry import (CONSISTENCY, EVIDENCE, NEED_STATUS, REGISTRY, SATISFIES, STATUSES, Spec, Value, check,
                       format_value, printed, tolerance)


def _meta(profile: str, stem: str) -> dict | None:
    p = paths.results_dir(profile) / f"{stem}.meta.json"
    if not p.exists():
        return None
    try:
        return json.loads(p.read_text())
    except ValueError:
        return None


def load_inputs(profile: str, stems) -> tuple[dict, list]:
    """The frames of ``stems`` this build wrote, and the stems that are missing.  A CSV without
    its ``.meta.json`` (written by an older tempo, or by hand) counts as missing."""
    frames, missing = {}, []
    d = paths.results_dir(profile)
    for s in stems:
        csv = d / f"{s}.csv"
        meta = _meta(profile, s)
        if not csv.exists() or meta is None:
            missing.append(s)
        else:
            frames[s] = pd.read_csv(csv)
            frames[s].attrs["meta"] = meta  # the run's config: a claim on a recorded trace names it
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


def _provenance(spec: Spec, value: Value, profile: str) -> str:
    text = value.provenance or spec.provenance or EVIDENCE[value.evidence or spec.evidence]
    metas = [(s, _meta(profile, s)) for s in spec.inputs]
    built = "; ".join(f"{s}.csv ({_config_text(m.get('config') or {})}; {m['written_utc'][:10]}, tempo {m['code_version']})"
                      for s, m in metas if m)
    return f"{text}" + (f" [{built}]" if built else "")


def evaluate(row: dict, profile: str) -> dict:
    """One ledger row for one claim, computed from this build's results."""
    spec = REGISTRY.get(row["id"])
    need = row["needs"]
    out = {"ours": None, "tolerance": "", "evidence": "", "provenance": "", "note": ""}
    if spec is None:
        if need is None:
            raise ValueError(f"claim {row['id']!r} has neither a function in tempo.book.claims.functions nor a declared need")
        out.update(status=NEED_STATUS[need], note=need_note(row))
        return out
    frames, missing = load_inputs(profile, spec.inputs)
    if missing:
        if need is not None:
            out.update(status=NEED_STATUS[need], note=need_note(row))
        else:
            out.update(status="not run in this build",
                       note="this build has no " + ", ".join(f"{m}.csv" for m in missing)
                            + f" in build/results/{profile}/ (run {row['chapter']})")
        return out
    v = spec.fn(frames)
    if v is None:  # the results hold no cell the claim is about (a reduced grid), or no GPU recording
        if need is not None:
            out.update(status=NEED_STATUS[need], note=need_note(row))
        else:
            out.update(status="not run in this build",
                       note=f"this build's {', '.join(spec.inputs)} results hold no cell this claim is about "
                            f"(profile {profile} runs a reduced grid)")
        return out
    if not isinstance(v, Value):
        v = Value(tuple(float(x) for x in v) if isinstance(v, tuple) else float(v))
    flag = fallback_flag(frames)
    if flag:
        out["fallbacks"] = sum(int((f.attrs.get("meta") or {}).get("fallbacks") or 0) for f in frames.values())
        v = dataclasses.replace(v, note="; ".join(x for x in (v.note, flag) if x))
    evidence = v.evidence or spec.evidence
    prov = _provenance(spec, v, profile)
    if need is not None and evidence not in SATISFIES[need]:
        who = "stand-in" if evidence in ("gpu", "cluster") else "CPU stand-in"  # a GPU measurement is no CPU run
        stand = f"{who} ({EVIDENCE[evidence]}): {format_value(v.ours)} {row['unit']}, not a verdict"
        out.update(status=NEED_STATUS[need], evidence=evidence, provenance=prov,
                   note="; ".join(x for x in (need_note(row), stand, v.note) if x))
        return out
    ok, why = check(row, v)
    tol, _ = tolerance(row, v)
    if evidence in CONSISTENCY:
        status = "consistent" if ok else "deviates"
    else:
        status = "reproduced" if ok else "deviates"
    out.update(ours=v.ours, status=status, evidence=evidence, provenance=prov, note=v.note,
               tolerance=f"{format_value(tol)} ({why})", ci=v.ci)
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


def need_note(row: dict) -> str:
    """What a claim that declares a need (trace, GPU, cluster) waits for, with the commands that give it."""
    if row.get("requires"):
        return f"needs {row['requires']}"
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


def ledger(profile: str, write: bool = True) -> pd.DataFrame:
    """Every claim with paper, ours, tolerance, status, evidence, provenance and note, recomputed
    from ``build/results/<profile>/`` now.  Also written to ``claims.csv`` and
    ``ledger_summary.md`` there."""
    rows = []
    for r in claim_rows():
        e = evaluate(r, profile)
        rows.append({"id": r["id"], "section": r["section"], "claim": r["claim"], "unit": r["unit"],
                     "paper": r["paper"], "paper_text": printed(r["paper_text"]), "ours": e["ours"], "tolerance": e["tolerance"], "status": e["status"],
                     "evidence": e["evidence"], "provenance": e["provenance"], "note": e["note"],
                     "kind": r["kind"], "needs": r["needs"] or "", "chapter": r["chapter"],
                     "fallbacks": e.get("fallbacks", 0)})
    df = pd.DataFrame(rows)
    if write:
        from ...core.io import atomic_write_csv, atomic_write_text

        d = paths.results_dir(profile)
        atomic_write_csv(show_table(df), d / "claims.csv")
        atomic_write_text(d / "ledger_summary.md", summary_markdown(df, profile))
    return df


def view(profile: str, ids) -> pd.DataFrame:
    """The ledger rows of ``ids`` as a chapter shows them beside its results: the claim, the
    paper's number, ours, the status and the note, computed now from this build's results."""
    rows = {r["id"]: r for r in claim_rows()}
    unknown = [i for i in ids if i not in rows]
    if unknown:
        raise ValueError(f"unknown claim ids {unknown}")
    out = []
    for i in ids:
        e = evaluate(rows[i], profile)
        out.append({"claim": rows[i]["claim"], "paper": printed(rows[i]["paper_text"]), "this artifact": format_value(e["ours"]),
                    "unit": rows[i]["unit"], "status": e["status"], "note": e["note"]})
    return pd.DataFrame(out, index=pd.Index(list(ids), name="id"))


def counts(df: pd.DataFrame) -> dict:
    return {s: int((df.status == s).sum()) for s in STATUSES}


def summary_markdown(df: pd.DataFrame, profile: str) -> str:
    c = counts(df)
    return (f"**Claims ledger** ({len(df)} claims, profile `{profile}`, recomputed from this build's results): "
            f"{c['reproduced']} reproduced, {c['consistent']} consistent with the paper's own parameters "
            f"(not counted as reproduced), {c['deviates']} deviate, {c['not run in this build']} not run in this build, "
            f"{c['needs a recorded trace']} need a recorded trace, {c['needs a GPU']} need a GPU, "
            f"{c['needs a cluster']} need a cluster. See the [Claims ledger](claims-ledger) chapter.\n")


def show_table(df: pd.DataFrame) -> pd.DataFrame:
    """The ledger as the chapter and the CLI show it (formatted numbers)."""
    return df.assign(paper=df.paper_text, ours=df.ours.map(format_value))[
        ["id", "status", "paper", "ours", "unit", "tolerance", "section", "claim", "evidence", "provenance", "note"]]


def main(argv=None) -> int:
    """``python -m tempo ledger --profile P``: rebuild the ledger from this build's results."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tempo ledger", description=main.__doc__)
    ap.add_argument("--profile", default="full", choices=["smoke", "full", "gpu"])
    ap.add_argument("--status", help="show only claims with this status")
    a = ap.parse_args(argv)
    df = ledger(a.profile)
    show = show_table(df)
    if a.status:
        if a.status not in STATUSES:
            ap.error(f"--status must be one of {STATUSES}")
        show = show[show.status == a.status]
    from ..textwrap_table import wrap_table

    print(wrap_table(show[["id", "status", "paper", "ours", "unit", "note"]],   # wrapped to the terminal's width
                     caps={"id": 26, "status": 14, "paper": 10, "ours": 10, "unit": 8}))
    print()
    print(summary_markdown(df, a.profile).replace(" See the [Claims ledger](claims-ledger) chapter.", ""))
    skipped = skipped_recordings()
    if skipped:
        print(f"{len(skipped)} recording(s) under data/measured skipped (they do not load): "
              + "; ".join(f"{f.parent.name}/{f.name}: {why}" for f, why in skipped), file=sys.stderr)
    flagged = int((df.get("fallbacks", pd.Series(dtype=int)) > 0).sum())
    if flagged:
        print(f"{flagged} claim(s) computed with solver fallbacks (see their notes)", file=sys.stderr)
    print(f"written: {(paths.results_dir(a.profile) / 'claims.csv').relative_to(paths.ROOT)}", file=sys.stderr)
    return 0


def skipped_recordings() -> list:
    """``(folder, why)`` of every recording under data/measured that its reader skips (a bad
    recording never stops the ledger: it is left out with a warning; here it is counted)."""
    import warnings

    from ...calib.record import recordings as calibrations
    from ..recordings import recordings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(calibrations().attrs.get("skipped", [])) + list(recordings().attrs.get("skipped", []))


def claims_reading(kind: str) -> list[str]:
    """The ledger claims whose function reads ingested recordings of ``kind`` (``"epbench"``,
    ``"serve-bench"``; :mod:`tempo.book.recordings`)."""
    return [c for c, k in MEASURED_CLAIMS.items() if k == kind]
