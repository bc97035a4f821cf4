"""Reading the recordings ``python -m tempo ingest`` stored under ``data/measured/`` for the
claims measured on GPUs and clusters (Sections 5.1, 5.2, 5.8-5.15), shared by chapters 05-07."""
from __future__ import annotations

import re
import warnings

import pandas as pd

from ..registry import Value, bootstrap_ci, claim


# Each function reads the newest recording stored by `python -m tempo ingest` under data/measured/
# that can compute the paper's number.  The value is evidence "cluster" only when the recording is
# the paper's setting measured on GPUs (not --emulate, not CPU ranks; the paper's EP size, shape,
# model or scenario); any other recording that computes the number is a stand-in, shown in the
# note, never a verdict.  calib_nstar_refit, calib_miscalibration and moonep_prefetch_us have no
# function: no recording this artifact can produce holds their number (claims.yaml `requires`).

#: claim id -> the kind of ingested recording its function reads (tempo.book.claims.ledger.claims_reading)
MEASURED_CLAIMS: dict[str, str] = {}
FP8_KERNEL = "deep_gemm_fp8_masked"
FIXED_POLICIES = ("static", "uniform", "token_lp", "metro")


def measured_claim(cid, kind, what):
    """:func:`~tempo.book.claims.registry.claim` for a claim measured on a cluster, whose function
    reads ingested recordings of ``kind`` (``"epbench"`` or ``"serve-bench"``)."""
    MEASURED_CLAIMS[cid] = kind
    return claim(cid, [], "cluster", f"{what} ({kind} recording stored by python -m tempo ingest under data/measured/)")


def measured_provenance(rows) -> str:
    """The recordings a measured value comes from: machine, date and folder of each."""
    from ....measured.catalog import where

    return "measurement: " + "; ".join(f"{r['machine']}, {r['date']}, {where(r)}" for r in rows)


def measured_value(ours, rows, reasons, ci=None, note=""):
    """The Value of a measured claim: evidence "cluster" unless a reason disqualifies the recording(s)."""
    if reasons:
        ev = "gpu" if {r["manifest"].get("device") for r in rows} == {"cuda"} else "machine"
        note = "; ".join(x for x in (f"not the paper's cluster measurement: {'; '.join(dict.fromkeys(reasons))}", note) if x)
        return Value(ours, ci=ci, note=note, evidence=ev, provenance=measured_provenance(rows))
    return Value(ours, ci=ci, note=note, evidence="cluster", provenance=measured_provenance(rows))


def ep_reasons(man, world=8, shape="dsv3"):
    """Why an epbench recording is not the paper's EP8 wall clock (Section 5.1): empty when it is."""
    r = []
    if man.get("device") != "cuda":
        r.append(f"device {man.get('device') or 'not recorded'}, not GPUs")
    if man.get("emulate") is not False:
        r.append("an --emulate run (ranks one after another on one device, no all-to-all)" if man.get("emulate")
                 else "not known whether it was emulated (ingest with --command)")
    if man.get("world_size") != world:
        r.append(f"EP{man.get('world_size') or '?'}, not the paper's EP{world}")
    if man.get("shape") != shape:
        r.append(f"shape {man.get('shape') or '?'}, not {shape}")
    if man.get("expert_kernel") != FP8_KERNEL:
        r.append(f"expert kernel {man.get('expert_kernel') or '?'}, not the fp8 grouped GEMM")
    return r


def guarded(row, what: str, fn, *args):
    """``fn(*args)`` for the recording ``row``, or None with a warning naming the recording and
    the error when it raises (a recording whose tables disagree with its manifest, written by
    hand or by another tool): one bad recording is skipped, never stops the ledger."""
    from ....measured.catalog import where

    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001  (any error of one recording's data: skip that recording)
        warnings.warn(f"{what}: recording {where(row)} skipped: {type(exc).__name__}: {exc}", stacklevel=2)
        return None


def ep_pick(usable, compute=None, per_tokens=False, what="epbench claim"):
    """[(row, frame, reasons)] (with ``compute``: [(row, compute(row, frame), reasons)]): the
    newest usable epbench recording (one per tokens/GPU with ``per_tokens``) whose ``compute``
    does not raise (:func:`guarded`: a failing one is skipped with a warning and the next newest
    taken), from the cluster-grade ones when any exist, else from the stand-ins."""
    from ....measured.catalog import load_epbench, recordings

    cands = [(row, None, ep_reasons(row.manifest)) for _, row in recordings("epbench").iterrows() if usable(row.manifest)]
    if not cands:
        return None
    for pool in ([c for c in cands if not c[2]], [c for c in cands if c[2]]):   # cluster-grade first
        out = {}
        for row, _, reasons in pool:
            key = row.manifest.get("tokens") if per_tokens else None
            if key in out:
                continue
            df = guarded(row, what, load_epbench, row.path)
            got = df if df is None or compute is None else guarded(row, what, compute, row, df)
            if got is not None:
                out[key] = (row, got, reasons)
                if not per_tokens:
                    break
        if out:
            return [out[k] for k in sorted(out, key=lambda k: (k is None, k))]
    return None


def has_policies(man, *policies):
    return set(policies) <= set(man.get("policies") or [])


# serve-bench recordings: pairs.csv deltas are against the same window's static run (Section 5.10's protocol)
WORKLOAD_NAME = re.compile(r"^(?P<dataset>.+)-r(?P<rate>[^-]+)-c(?P<conc>\d+)$")


def workload_info(man, name) -> dict:
    for w in man.get("workloads") or []:
        if w.get("name") == name:
            return w
    m = WORKLOAD_NAME.match(str(name))
    return {"name": name, "dataset": m["dataset"], "request_rate": m["rate"], "max_concurrency": int(m["conc"])} if m \
        else {"name": name}


def request_rate(w):
    try:
        return float(w.get("request_rate"))
    except (TypeError, ValueError):
        return None


def is_govreport(man, w):
    return any("govreport" in re.sub(r"[^a-z]", "", str(x).lower())
               for x in (w.get("dataset"), w.get("dataset_file"), man.get("label")) if x)


def workload_names(man, pairs, pred):
    return [n for n in pairs.workload.astype(str).unique() if pred(workload_info(man, n))]


def truthy(s: pd.Series) -> pd.Series:
    return s.astype(str).str.strip().str.lower().isin(["true", "1"])


def kept_deltas(pairs, policy, names, metric="throughput_delta_pct"):
    p = pairs[(pairs.policy == policy) & truthy(pairs.kept) & pairs.workload.astype(str).isin(names)]
    if metric not in p:
        return pd.Series(dtype=float)
    return pd.to_numeric(p[metric], errors="coerce").dropna()


def same_window(runs, a, b, names, metric):
    """Per (window, workload) where both runs are ok: 100 * (a / b - 1) of ``metric`` (runs.csv)."""
    if runs is None or metric not in runs:
        return pd.Series(dtype=float)
    ok = runs[(runs.status == "ok") & runs.workload.astype(str).isin(names)]
    x = ok.pivot_table(index=["window", "workload"], columns="policy", values=metric, aggfunc="first")
    if a not in x or b not in x:
        return pd.Series(dtype=float)
    return (100 * (x[a] / x[b] - 1)).dropna()


def serve_reasons(man, ep=8, model=None, drift=False, redundant=None):
    """Why a serve-bench recording is not the paper's cluster run for a claim: empty when it is."""
    r = []
    if man.get("device") != "cuda":
        r.append("no GPUs recorded in the serve-bench manifest")
    if man.get("ep") != ep:
        r.append(f"EP{man.get('ep') or '?'}, not EP{ep}")
    if model and model not in re.sub(r"[^a-z0-9]+", "-", str(man.get("model") or "").lower()):
        r.append(f"model {man.get('model') or '?'}, not {model}")
    if drift and not man.get("drift_placement"):
        r.append("fresh placement, not the drift-16 scenario (--init-expert-location)")
    if redundant is not None and man.get("redundant") != redundant:
        r.append(f"{man.get('redundant')} redundant experts, not {redundant} (1.06x of 256)")
    return r


def serve_pick(compute, **want):
    """(row, series, extra) of the newest serve-bench recording where ``compute(man, pairs, runs)``
    gives a non-empty per-window series, preferring the cluster-grade ones; None when none does."""
    from ....measured.catalog import load_serve, recordings

    cands = []
    for _, row in recordings("serve-bench").iterrows():
        loaded = guarded(row, "serve-bench claim", load_serve, row.path)
        got = None if loaded is None else guarded(row, "serve-bench claim", compute, row.manifest, *loaded)
        if got is not None and len(got[0]):
            cands.append((row, got, serve_reasons(row.manifest, **want)))
    if not cands:
        return None
    return ([c for c in cands if not c[2]] or cands)[0]


def serve_value(got, label):
    row, (v, extra), reasons = got
    note = f"{label}: median over {len(v)} kept same-window pairs ({', '.join(f'{x:+.1f}' for x in v)})" \
        + (f"; {extra}" if extra else "")
    return measured_value(float(v.median()), [row], reasons, ci=bootstrap_ci(v), note=note)


def median_text(s):
    return f"{s.median():+.1f}%" if len(s) else "not run"
