"""Claims as code: every claim of ``data/paper/claims.yaml`` is computed here from this build's
experiment results, and the ledger is recomputed from them on every build.

* :data:`REGISTRY` maps a claim id to a :class:`Spec`: the result CSVs it reads
  (``build/results/<profile>/<stem>.csv``, written by :func:`tempo.studies.run`), a small
  function of those frames that yields our value, and the kind of evidence that value is.
* A claim the paper computed on a recorded routing trace, on a GPU or on a cluster declares
  that need in the yaml (``needs: trace | gpu | cluster``, implied by ``kind: gpu | cluster``).
  It gets a verdict only from evidence of that kind (a recorded trace; a measurement on a GPU
  or cluster); a CPU or synthetic stand-in may appear in its note, never as a verdict.
* :func:`ledger` rebuilds every verdict from the results present now.  A claim whose inputs
  this build did not produce reads "not run in this build", never an old verdict: nothing is
  stored between builds except the experiments' CSVs and their ``.meta.json`` provenance.

Verdicts (:data:`STATUSES`):

* **reproduced**: an independent computation that could have failed lands within tolerance;
* **consistent**: an identity or arithmetic on the paper's own parameters agrees; shown, never
  counted as a reproduction;
* **deviates**: computed, outside the tolerance (the note gives what we can show);
* **not run in this build**: its inputs are missing from ``build/results/<profile>/``;
* **needs a recorded trace / a GPU / a cluster**: the evidence this build has cannot decide it.

Tolerance (one policy, also stated at the head of ``claims.yaml`` and in the ledger chapter):
the largest of (1) the paper's stated precision, half a unit of the last digit it prints;
(2) the spread the paper reports for the number (``spread`` in the yaml); (3) the half-width
of our own statistical uncertainty (a bootstrap interval over batches or seeds, where the
statistic allows one).  Exceptions carry ``tol`` and a written ``tol_why`` in the yaml.  A range
keeps both ends; a claim about a change is checked as that change.
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np
import pandas as pd

from ..core import paths

STATUSES = ["reproduced", "consistent", "deviates", "not run in this build",
            "needs a recorded trace", "needs a GPU", "needs a cluster"]
NEED_STATUS = {"trace": "needs a recorded trace", "gpu": "needs a GPU", "cluster": "needs a cluster"}
#: evidence kinds a value can rest on; the first two give "consistent", not "reproduced"
EVIDENCE = {"paper-parameters": "arithmetic on the paper's own parameters",
            "identity": "true by construction of the code",
            "model": "model-space computation (cost model, solver, MILP)",
            "synthetic": "model-space computation on synthetic routing",
            "machine": "wall-clock time on this build's machine",
            "trace": "model-space replay of a recorded routing trace",
            "gpu": "measurement on a GPU",
            "cluster": "measurement on a multi-GPU cluster"}
CONSISTENCY = {"paper-parameters", "identity"}
#: which evidence can decide a claim that declares a need
SATISFIES = {"trace": {"trace"}, "gpu": {"gpu"}, "cluster": {"cluster"}}
BOUNDS = {None, "upper", "lower", "tight"}
TOL_KINDS = {"abs", "rel", "factor"}

# ------------------------------------------------------------------ the yaml


@lru_cache(maxsize=None)
def _yaml() -> tuple:
    import yaml

    text = (paths.PAPER / "claims.yaml").read_text()
    rows = yaml.safe_load(text)["claims"]
    raw = yaml.load(text, Loader=yaml.BaseLoader)["claims"]  # the paper's numbers as printed
    out = []
    for r, s in zip(rows, raw):
        out.append({**r, "paper_text": s["paper"]})
    return tuple(out)


def claim_rows() -> list[dict]:
    """Every claim of ``claims.yaml`` as a dict, validated (kinds, needs, bounds, exceptions)."""
    rows = [dict(r) for r in _yaml()]
    ids = [r["id"] for r in rows]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError(f"duplicate claim ids in claims.yaml: {dup}")
    for r in rows:
        where = f"claims.yaml: claim {r['id']!r}"
        if r.get("kind") not in ("model", "gpu", "cluster"):
            raise ValueError(f"{where}: kind must be model, gpu or cluster, got {r.get('kind')!r}")
        if r.get("needs") not in (None, "trace", "gpu", "cluster"):
            raise ValueError(f"{where}: needs must be trace, gpu or cluster, got {r['needs']!r}")
        if r.get("bound") not in BOUNDS:
            raise ValueError(f"{where}: bound must be upper, lower or tight, got {r['bound']!r}")
        if r.get("bound") == "tight" and "limit" not in r:
            raise ValueError(f"{where}: bound 'tight' needs a 'limit' (the bound the paper's value is close to)")
        p = r["paper"]
        if isinstance(p, list):
            if len(p) != 2 or not p[0] <= p[1]:
                raise ValueError(f"{where}: a range must be [low, high], got {p}")
            if r.get("bound"):
                raise ValueError(f"{where}: a range cannot carry a bound")
        if "tol" in r:
            if not r.get("tol_why"):
                raise ValueError(f"{where}: a tolerance exception (tol) needs a written tol_why")
            if r.get("tol_kind", "abs") not in TOL_KINDS:
                raise ValueError(f"{where}: tol_kind must be one of {sorted(TOL_KINDS)}, got {r['tol_kind']!r}")
        r["needs"] = r.get("needs") or (r["kind"] if r["kind"] in ("gpu", "cluster") else None)
    return rows


def precision(text) -> float:
    """Half a unit of the last digit the paper prints: ``"0.880"`` -> 0.0005, ``"156"`` -> 0.5."""
    s = str(text).strip().lstrip("+-")
    if "e" in s.lower():
        raise ValueError(f"paper value {text!r}: write it without an exponent")
    decimals = len(s.split(".")[1]) if "." in s else 0
    return 0.5 * 10.0 ** (-decimals)


# ------------------------------------------------------------------ values and specs


@dataclass
class Value:
    """Our number for a claim.  ``ours`` is a float, or a ``(low, high)`` pair for a range
    claim (both ends) and for a ``tight`` claim (lower and upper estimate).  ``ci`` is our own
    95% uncertainty interval of a scalar (bootstrap), or None where the statistic has none."""
    ours: float | tuple
    ci: tuple | None = None
    note: str = ""
    evidence: str | None = None  # overrides the spec's (e.g. a trace that turns out synthetic)
    provenance: str = ""         # overrides the spec's description


@dataclass
class Spec:
    inputs: tuple
    fn: Callable[[dict], Value]
    evidence: str
    provenance: str
    reads_measured: bool = False


REGISTRY: dict[str, Spec] = {}


def claim(claim_id: str, inputs=(), evidence: str = "synthetic", provenance: str = ""):
    """Register ``fn(frames) -> Value | float | tuple`` as the computation of ``claim_id``."""
    if evidence not in EVIDENCE:
        raise ValueError(f"evidence must be one of {sorted(EVIDENCE)}, got {evidence!r}")

    def deco(fn):
        if claim_id in REGISTRY:
            raise ValueError(f"claim {claim_id!r} registered twice")
        REGISTRY[claim_id] = Spec(tuple(inputs), fn, evidence, provenance)
        return fn

    return deco


def bootstrap_ci(values, stat=np.median, n: int = 400, seed: int = 0, level: float = 0.95) -> tuple:
    """Percentile bootstrap interval of ``stat`` over the items of ``values`` (batches, windows
    or seeds).  Fewer than 3 items: the degenerate interval at the statistic."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) < 3:
        s = float(stat(v)) if len(v) else float("nan")
        return (s, s)
    rng = np.random.default_rng(seed)
    boots = np.array([stat(v[rng.integers(0, len(v), len(v))]) for _ in range(n)])
    a = (1 - level) / 2
    return (float(np.quantile(boots, a)), float(np.quantile(boots, 1 - a)))


# ------------------------------------------------------------------ the verdict


def tolerance(row: dict, value: Value) -> tuple[float, str]:
    """The tolerance in the claim's unit and how it arose: the largest of the paper's precision,
    its reported spread and our uncertainty, unless the yaml states a justified exception."""
    if "tol" in row:
        kind = row.get("tol_kind", "abs")
        return float(row["tol"]), f"exception ({kind} {row['tol']}): {row['tol_why']}"
    texts = row["paper_text"] if isinstance(row["paper_text"], list) else [row["paper_text"]]
    parts = {"paper precision": max(precision(t) for t in texts)}
    if row.get("spread") is not None:
        parts["paper spread"] = float(row["spread"])
    if value is not None and value.ci is not None and all(np.isfinite(value.ci)):
        parts["our 95% interval"] = (value.ci[1] - value.ci[0]) / 2
    name = max(parts, key=parts.get)
    return parts[name], name


def check(row: dict, value: Value) -> tuple[bool, str]:
    """Is ``value`` within the claim's tolerance?  Returns (ok, how the tolerance arose)."""
    tol, why = tolerance(row, value)
    kind = row.get("tol_kind", "abs") if "tol" in row else "abs"
    bound = row.get("bound")
    paper = row["paper"]
    ours = value.ours

    def near(x, p):
        if x is None or not np.isfinite(x):
            return False
        if kind == "rel":
            return abs(x - p) <= tol * abs(p) + 1e-12
        if kind == "factor":
            return p / tol - 1e-12 <= x <= p * tol + 1e-12
        return abs(x - p) <= tol + 1e-12

    def slack(p):
        return tol * abs(p) if kind == "rel" else (p * (tol - 1) if kind == "factor" else tol)

    if isinstance(paper, list):
        if isinstance(ours, tuple):
            return near(ours[0], paper[0]) and near(ours[1], paper[1]), why
        return bool(np.isfinite(ours) and paper[0] - slack(paper[0]) <= ours <= paper[1] + slack(paper[1])), why
    if bound == "tight":   # ours = (lower estimate, upper estimate) of the observed worst case
        lo, hi = ours if isinstance(ours, tuple) else (ours, ours)
        return bool(np.isfinite(lo) and lo >= paper - slack(paper) - 1e-12
                    and hi <= float(row["limit"]) + 1e-12), why
    x = ours[1] if isinstance(ours, tuple) and bound == "upper" else (ours[0] if isinstance(ours, tuple) else ours)
    if x is None or not np.isfinite(x):
        return False, why
    if bound == "upper":
        return x <= paper + slack(paper) + 1e-12, why
    if bound == "lower":
        return x >= paper - slack(paper) - 1e-12, why
    return near(x, paper), why


def _printed(text) -> str:
    """The paper's number as printed: ``"0.880"``, a range ``"4.5 to 6.0"``."""
    return " to ".join(text) if isinstance(text, list) else str(text)


def _fmt(x) -> str:
    if x is None:
        return ""
    if isinstance(x, (tuple, list)):
        return " to ".join(_fmt(v) for v in x)
    if isinstance(x, float) and not math.isfinite(x):
        return "nan"
    return f"{x:.4g}" if isinstance(x, float) else str(x)


# ------------------------------------------------------------------ inputs


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
            raise ValueError(f"claim {row['id']!r} has neither a function in tempo.book.claims nor a declared need")
        out.update(status=NEED_STATUS[need], note=_need_note(row))
        return out
    frames, missing = load_inputs(profile, spec.inputs)
    if missing:
        if need is not None:
            out.update(status=NEED_STATUS[need], note=_need_note(row))
        else:
            out.update(status="not run in this build",
                       note="this build has no " + ", ".join(f"{m}.csv" for m in missing)
                            + f" in build/results/{profile}/ (run {row['chapter']})")
        return out
    v = spec.fn(frames)
    if v is None:  # the results hold no cell the claim is about (a reduced grid), or no GPU recording
        if need is not None:
            out.update(status=NEED_STATUS[need], note=_need_note(row))
        else:
            out.update(status="not run in this build",
                       note=f"this build's {', '.join(spec.inputs)} results hold no cell this claim is about "
                            f"(profile {profile} runs a reduced grid)")
        return out
    if not isinstance(v, Value):
        v = Value(tuple(float(x) for x in v) if isinstance(v, tuple) else float(v))
    evidence = v.evidence or spec.evidence
    prov = _provenance(spec, v, profile)
    if need is not None and evidence not in SATISFIES[need]:
        who = "stand-in" if evidence in ("gpu", "cluster") else "CPU stand-in"  # a GPU measurement is no CPU run
        stand = f"{who} ({EVIDENCE[evidence]}): {_fmt(v.ours)} {row['unit']}, not a verdict"
        out.update(status=NEED_STATUS[need], evidence=evidence, provenance=prov,
                   note="; ".join(x for x in (_need_note(row), stand, v.note) if x))
        return out
    ok, why = check(row, v)
    tol, _ = tolerance(row, v)
    if evidence in CONSISTENCY:
        status = "consistent" if ok else "deviates"
    else:
        status = "reproduced" if ok else "deviates"
    out.update(ours=v.ours, status=status, evidence=evidence, provenance=prov, note=v.note,
               tolerance=f"{_fmt(tol)} ({why})", ci=v.ci)
    return out


def _need_note(row: dict) -> str:
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
                     "paper": r["paper"], "paper_text": _printed(r["paper_text"]), "ours": e["ours"], "tolerance": e["tolerance"], "status": e["status"],
                     "evidence": e["evidence"], "provenance": e["provenance"], "note": e["note"],
                     "kind": r["kind"], "needs": r["needs"] or "", "chapter": r["chapter"]})
    df = pd.DataFrame(rows)
    if write:
        from ..core.io import atomic_write_csv, atomic_write_text

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
        out.append({"claim": rows[i]["claim"], "paper": _printed(rows[i]["paper_text"]), "this artifact": _fmt(e["ours"]),
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
    return df.assign(paper=df.paper_text, ours=df.ours.map(_fmt))[
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
    with pd.option_context("display.max_rows", None, "display.max_colwidth", 60, "display.width", 200):
        print(show[["id", "status", "paper", "ours", "unit", "note"]].to_string(index=False))
    print()
    print(summary_markdown(df, a.profile).replace(" See the [Claims ledger](claims-ledger) chapter.", ""))
    print(f"written: {(paths.results_dir(a.profile) / 'claims.csv').relative_to(paths.ROOT)}", file=sys.stderr)
    return 0


from . import claim_functions  # noqa: E402,F401  (registers every claim's function)
