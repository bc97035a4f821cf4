"""The claims the paper computes on recorded routing: their value is trace evidence when every
input was computed on the same recorded trace (``TRACE=trace.npz``), otherwise synthetic."""
from __future__ import annotations

from ..registry import REGISTRY, Value


#: every claim whose yaml says ``needs: trace``: its experiment draws its batches from a trace
#: when the build is given one (``TRACE=trace.npz``, :class:`tempo.studies.scenarios.TraceRouting`)
TRACE_CLAIMS = ("tile_prefill_gain", "t1_uniform_b128", "t1_metro_b128", "t1_static_b1024", "t1_tokenlp_b512",
                "t1_spread_b1024", "mixed_real_min", "linear_token_share", "thm2_eps_median", "thm2_eps_max",
                "thm2_eps_max_4x", "solver_ratio_mean", "solver_ratio_max", "t4_tempo_mixed", "t4_tempo_floor",
                "t8_full_b512", "t9_drop_traffic_b512", "staleness_stale1", "t10_tempo_b512", "t10_uni_cum16_b128",
                "t10_compose_b512", "moonep_charged_decode", "tile_changed_share", "tile_uniform_extra", "ba2a_flip",
                "trace_oracle_gap", "moonep_decode_free_max", "moonep_tempo_decode_max")


def trace_evidence(frames: dict, stems) -> tuple[str | None, str | None]:
    """(provenance, note) of a claim's inputs as to recorded routing.

    Reads each input's run config (``frame.attrs["meta"]``, the ``.meta.json`` the run wrote).
    When every input was computed on the same trace (``trace_sha256``) and that trace holds
    recorded routing (its metadata ``source`` is not "synthetic", :func:`tempo.world.traces.is_recorded`):
    (``"recorded routing trace (<file>, sha256 <12 hex>, <source metadata>)"``, None).  A
    synthetic trace: (None, a note that it is a pipeline demonstration).  Otherwise (None, None)."""
    from ....world.traces import is_recorded, provenance

    configs = [((frames[s].attrs.get("meta") or {}).get("config") or {}) for s in stems]
    provs = [provenance(c) for c in configs]
    if not configs or any(p is None for p in provs) or len({c["trace_sha256"] for c in configs}) != 1:
        return None, None
    if not is_recorded(configs[0].get("trace_source")):
        return None, (f"computed on a synthetic trace ({provs[0].split('(', 1)[1].rstrip(')')}): "
                      "a pipeline demonstration, not evidence")
    return provs[0], None


def _on_trace(fn, stems):
    def wrapped(frames, **kw):  # kw: the reading, for a function that declares ``uses``
        v = fn(frames, **kw)
        prov, note = trace_evidence(frames, stems)
        if v is None or (prov is None and note is None):
            return v
        if not isinstance(v, Value):
            v = Value(tuple(float(x) for x in v) if isinstance(v, tuple) else float(v))
        if prov is not None:
            v.evidence, v.provenance = "trace", prov
        else:
            v.evidence = "synthetic"
            v.note = "; ".join(x for x in (v.note, note) if x)
        return v
    wrapped.__wrapped__ = fn
    return wrapped


def wrap_trace_claims():
    """Wrap the function of every :data:`TRACE_CLAIMS` claim with :func:`_on_trace` (once; run
    after every chapter's functions registered)."""
    for cid in TRACE_CLAIMS:
        spec = REGISTRY[cid]
        if not getattr(spec.fn, "__wrapped__", None):
            spec.fn = _on_trace(spec.fn, spec.inputs)

