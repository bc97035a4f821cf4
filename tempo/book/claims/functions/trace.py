"""The claims the paper computes on recorded routing, and what their value is evidence of:

* on a user's recorded trace (``TRACE=trace.npz``, every input computed on the same one): trace
  evidence, a verdict;
* on a shipped public trace of another model (:func:`tempo.world.traces.public_trace`, the
  book's default input for :data:`REAL_CLAIMS`): a stand-in, never a verdict;
* on a trace of whole-run aggregates: not computable (every claim here is about batches);
* the :data:`PROXY_CLAIMS` on the synthetic proxy router at the ``proxy_skew`` reading's skew
  (Section 5.11's router is synthetic too): the paper's own input, consistent at best;
* otherwise synthetic routing: a stand-in in the note of a claim that needs a trace."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..registry import REGISTRY, Value

#: the claims the paper computed on its DSv3-shape proxy (Section 5.11: dummy weights, 256
#: experts, top-8, a "Zipf-skewed router"): Tables 1, 4, 8, 9, 10, Section 5.5, Section 5.13
PROXY_CLAIMS = ("t1_uniform_b128", "t1_metro_b128", "t1_static_b1024", "t1_tokenlp_b512", "t1_spread_b1024",
                "t4_tempo_mixed", "t4_tempo_floor", "t8_full_b512", "t9_drop_traffic_b512", "staleness_stale1",
                "t10_tempo_b512", "t10_uni_cum16_b128", "t10_compose_b512", "ba2a_flip")
#: the claims the paper computed on recorded routing of trained models (Qwen3-30B-A3B and
#: DeepSeek-V2-Lite on wikitext and GSM8K: Sections 2.2, 2.4, 3.1, 4.2, 5.4)
REAL_CLAIMS = ("mixed_real_min", "linear_token_share", "trace_oracle_gap", "solver_ratio_mean", "solver_ratio_max",
               "thm2_eps_median", "thm2_eps_max", "thm2_eps_max_4x", "tile_changed_share", "tile_prefill_gain",
               "tile_uniform_extra")
#: the claims on recorded Qwen3-235B routing (Appendix H)
QWEN235_CLAIMS = ("moonep_charged_decode", "moonep_decode_free_max", "moonep_tempo_decode_max")
#: every claim whose yaml says ``needs: trace``: its experiment draws its batches from a trace
#: when the build is given one (``TRACE=trace.npz``, :class:`tempo.studies.scenarios.TraceRouting`)
TRACE_CLAIMS = PROXY_CLAIMS + REAL_CLAIMS + QWEN235_CLAIMS

#: the one recording that decides the Qwen3-235B claims, and how to make it
QWEN235_RECIPE = (
    "needs a recorded Qwen3-235B-A22B routing trace (Appendix H): decode on ShareGPT prompts at 8-64 tokens per GPU "
    "on EP8 (64-512 concurrent requests), recorded with SGLang's per-pass recorder (launch with "
    "`--expert-distribution-recorder-mode per_pass`, `SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR=DIR`; POST "
    "/start_expert_distribution_record, serve, POST /stop_expert_distribution_record and "
    "/dump_expert_distribution_record); the trace is counts[steps, 94 MoE layers, 128 experts], top-8, one step "
    "per decode batch, at least 64 steps; `python -m tempo import-trace DIR/*.pt -o qwen3-235b.npz --model "
    "Qwen3-235B-A22B --top-k 8`, then `make book TRACE=qwen3-235b.npz` and `python -m tempo ledger`")
#: recipes for claims whose recording is more specific than the generic one (the ledger's need note)
RECIPES = {cid: QWEN235_RECIPE for cid in QWEN235_CLAIMS}

#: how far each shipped public trace is from the paper's traces (the stand-in's note)
PUBLIC_ABOUT = {
    "esft-dsv2lite": (
        "ESFT-vanilla-lite (DeepSeek-V2-Lite: 26 MoE layers x 64 routed experts, top-6) on four ESFT tasks' prompts, "
        "about {tokens} prompt tokens a step, per-layer max/mean pair share {mm:.2f} (median over layers); the "
        "paper's: Qwen3-30B-A3B and DeepSeek-V2-Lite decode batches on wikitext and GSM8K"),
    "dsv3-sglang": (
        "DeepSeek-V3 (58 MoE layers x 256 experts, top-8) on SGLang's benchmark workloads, whole-run aggregates"),
}


@lru_cache(maxsize=4)
def _public_note(name: str) -> str:
    """The stand-in note of the shipped public trace ``name`` (:data:`PUBLIC_ABOUT`)."""
    from ....core import paths
    from ....world.skew import max_over_mean
    from ....world.traces import read_trace

    if name.startswith("esft-dsv2lite"):
        counts, meta = read_trace(paths.TRACES / name)
        mm = float(np.median(max_over_mean(counts.sum(axis=0).astype(np.float64))))
        return PUBLIC_ABOUT["esft-dsv2lite"].format(tokens=f"{meta.get('tokens_per_step', 0):,}", mm=mm)
    return PUBLIC_ABOUT["dsv3-sglang"] if name.startswith("dsv3-sglang") else f"the public trace {name}"


def _config(frame) -> dict:
    return (frame.attrs.get("meta") or {}).get("config") or {}


def decisive_input(frames: dict) -> bool:
    """Whether any input ran on a trace or on the proxy router's ``proxy_skew`` reading: a
    claim function that finds nothing there is answered in the build's terms, not with the
    recording recipe."""
    return any(_config(f).get("trace") or "proxy_skew" in (_config(f).get("reading") or {}) for f in frames.values())


def trace_evidence(frames: dict, stems, claim_id: str | None = None) -> tuple[str | None, str | None, str | None]:
    """(evidence, provenance, note) of a claim's inputs as to routing, from each input's run
    config (``frame.attrs["meta"]``, the ``.meta.json`` the run wrote).

    Every input on the same trace (``trace_sha256``): ``"aggregate"`` when its steps are whole-run
    aggregates (``trace_step_kind``); ``"public-trace"`` when it is a shipped public recording of
    another model (``trace_public``); ``"trace"`` for a recorded trace (its metadata ``source`` is
    not "synthetic", :func:`tempo.world.traces.is_recorded`); a synthetic trace: ``"synthetic"``
    with a note that it is a pipeline demonstration.  No trace, a :data:`PROXY_CLAIMS` claim whose
    every input ran under the ``proxy_skew`` reading: ``"proxy"``, with the skew (the results'
    ``skew`` column).  Otherwise (None, None, None)."""
    from ....world.traces import is_recorded, provenance

    configs = [_config(frames[s]) for s in stems]
    provs = [provenance(c) for c in configs]
    if configs and all(p is not None for p in provs) and len({c["trace_sha256"] for c in configs}) == 1:
        c = configs[0]
        if c.get("trace_step_kind") == "aggregate":
            return "aggregate", provs[0], ("not computable on this trace: its steps are whole-run aggregates "
                                           "(trace_step_kind), and this claim is about batches")
        if not is_recorded(c.get("trace_source")):
            return "synthetic", None, (f"computed on a synthetic trace ({provs[0].split('(', 1)[1].rstrip(')')}): "
                                       "a pipeline demonstration, not evidence")
        if c.get("trace_public"):
            return "public-trace", provs[0], (f"stand-in on a public trace, not a verdict: "
                                              f"{_public_note(c['trace_public'])}")
        return "trace", provs[0], None
    if claim_id in PROXY_CLAIMS and configs and all("proxy_skew" in (c.get("reading") or {}) for c in configs):
        choice = configs[0]["reading"]["proxy_skew"]
        skews = sorted({float(x) for s in stems if "skew" in frames[s] for x in frames[s]["skew"].dropna().unique()})
        at = ", ".join(f"{x:g}" for x in skews) or "?"
        what = ("calibrated to Section 5.13's printed G about 13 on the busiest GPU near B = 300"
                if choice == "calibrated" else f"the proxy_skew reading's {choice}")
        return "proxy", (f"the paper's DSv3-shape proxy router, synthetic as in Section 5.11: distinct top-8 Zipf({at}) "
                         f"routing, {what}; drift-16 / R = 64 batches (tempo.studies.scenarios)"), (
            "on the paper's own input (its proxy router is synthetic too; here at the calibrated skew): consistent at "
            "best, never a reproduction")
    return None, None, None


def _on_trace(fn, stems, claim_id):
    def wrapped(frames, **kw):  # kw: the reading, for a function that declares ``uses``
        evidence, prov, note = trace_evidence(frames, stems, claim_id)
        if evidence == "aggregate":  # no function runs on aggregates: every claim here is about batches
            return Value(float("nan"), evidence="aggregate", provenance=prov, note=note)
        v = fn(frames, **kw)
        if v is None or evidence is None:
            return v
        if not isinstance(v, Value):
            v = Value(tuple(float(x) for x in v) if isinstance(v, tuple) else float(v))
        v.evidence = evidence
        if prov is not None:
            v.provenance = prov
        v.note = "; ".join(x for x in (note, v.note) if x)
        return v
    wrapped.__wrapped__ = fn
    return wrapped


def wrap_trace_claims():
    """Wrap the function of every :data:`TRACE_CLAIMS` claim with :func:`_on_trace` (once; run
    after every chapter's functions registered)."""
    for cid in TRACE_CLAIMS:
        spec = REGISTRY[cid]
        if not getattr(spec.fn, "__wrapped__", None):
            spec.fn = _on_trace(spec.fn, spec.inputs, cid)
