"""How a study turns a reading (:class:`tempo.paper.readings.Reading`, ``data/paper/readings.yaml``)
into batches and dispatches: the synthetic router and what the placement is built from, the
fixed policies' faces and orders, and which TEMPO runs.  Every study that depends on a reading
calls these, so one choice means one thing everywhere."""
from __future__ import annotations

import hashlib

import numpy as np

from ..core.cost import CostModel
from ..core.instance import Dispatch, Instance
from ..paper.readings import Reading
from ..policies import solve
from ..policies._fallback import add_count, fallback_count
from .scenarios import zipf_batches
from .sweep import memo_get, memo_put

#: ``ensemble_lp`` choices -> tempo's ``lp_variants`` (Section 4.2 stage 4, Proposition 1).
LP_VARIANTS = {"highs_vertex": ("highs",), "maxflow_vertex": ("vertex",), "auto": "auto"}
#: ``tempo_preset`` choices -> tempo's ``options`` preset (Section 4.2).
PRESETS = {"paper": "paper", "default": "default"}
#: ``thm2_suite`` choices -> the fewest GPUs of a probe instance (Theorem 2's suite, Section 3.1).
PROBE_MIN_GPUS = {"two_to_sixteen_gpus": 2, "one_to_sixteen_gpus": 1}
#: ``chain_depth`` choices -> the paper preset's ``chain_depth`` (Section 4.2 stage 2, Lemma 2).
CHAIN_DEPTHS = {"depth_2": 2, "any_length": None}


def of(config) -> Reading:
    """The reading a study's config carries (missing ids: the paper's choice)."""
    return Reading.of(config)


def batches(reading: Reading, n_experts: int, n_gpus: int, tokens_per_gpu: int, skew: float, replication: float,
            n_batches: int, seed: int, top_k: int = 8, trace=None) -> list[Instance]:
    """:func:`tempo.studies.scenarios.zipf_batches` with the reading's router
    (``synthetic_router``) and placement (``placement_loads``, ``eplb_ties``)."""
    return zipf_batches(n_experts, n_gpus, tokens_per_gpu, skew, replication, n_batches, seed=seed, top_k=top_k,
                        trace=trace, router=reading["synthetic_router"], placement_from=reading["placement_loads"],
                        eplb_ties=reading["eplb_ties"])


def tempo_options(reading: Reading, preset_reading: str = "tempo_preset") -> dict:
    """``solve(..., "tempo", **tempo_options(r))``: the preset of ``tempo_preset`` (or of
    ``ablation_reference`` when ``preset_reading`` says so), the ensemble's LP candidates of
    ``ensemble_lp`` and, for the paper preset, the chain depth of ``chain_depth`` (the library's
    default preset always searches augmenting paths of any length)."""
    if preset_reading == "ablation_reference":
        preset = "paper" if reading["ablation_reference"] == "paper_preset" else "default"
    elif preset_reading == "tempo_preset":
        preset = PRESETS[reading["tempo_preset"]]
    else:
        raise ValueError(f"preset_reading must be 'tempo_preset' or 'ablation_reference', got {preset_reading!r}")
    out = {"options": preset, "lp_variants": LP_VARIANTS[reading["ensemble_lp"]]}
    if preset == "paper":
        out["chain_depth"] = CHAIN_DEPTHS[reading["chain_depth"]]
    return out


def policy_options(reading: Reading, policy: str, face_reading: str = "token_lp_face") -> dict:
    """The options a policy runs with under ``reading``: tempo's (:func:`tempo_options`), the
    token-LP face (``token_lp_face``, or ``toy_token_lp_face`` for Fig. 1b), METRO's order
    (``metro_order``); none for the others."""
    if policy == "tempo":
        return tempo_options(reading)
    if policy == "token_lp":
        return {"face": reading[face_reading]}
    if policy == "metro":
        return {"order": reading["metro_order"]}
    return {}


def dispatch(inst: Instance, model: CostModel | None, policy: str, reading: Reading,
             face_reading: str = "token_lp_face") -> Dispatch:
    """``solve(inst, model, policy)`` as the reading has it (:func:`policy_options`)."""
    return solve(inst, model, policy, **policy_options(reading, policy, face_reading))


def moonep_home(inst: Instance, reading: Reading) -> Instance:
    """The instance MoonEP's replay starts from (``moonep_home``, Appendix H): MoonEP's own
    layout, expert e whole on rank ``e * g // E`` (E / g consecutive experts per rank, no
    replicas; every remote piece is then a copied expert), or ``inst`` itself (its EPLB
    placement's first replicas as homes)."""
    if reading["moonep_home"] == "eplb_first_replica":
        return inst
    E, g = inst.n_experts, inst.n_gpus
    return Instance(inst.counts, (np.arange(E) * g // E)[:, None], g)


def batch_hash(inst: Instance, *more) -> bytes:
    """sha256 of a batch (counts and replica placement, their dtypes and shapes, group and node
    sizes) and of ``repr(more)``: the key of a memoised computation on it (the grid memo,
    :func:`tempo.studies.sweep.memo_get`)."""
    h = hashlib.sha256()
    for a in (inst.counts, inst.replica_gpu):
        arr = np.ascontiguousarray(a)
        h.update(repr((arr.dtype.str, arr.shape)).encode())
        h.update(arr.tobytes())
    h.update(repr((inst.n_gpus, inst.gpus_per_node, *more)).encode())
    return h.digest()


def _dispatch_key(inst: Instance, model: CostModel, policy: str, options: dict) -> bytes:
    """Everything a dispatch's per-GPU times depend on: the batch, the cost model, the policy
    and its options."""
    return b"dispatch_times:" + batch_hash(inst, model, policy, sorted(options.items()))


def makespan(inst: Instance, model: CostModel, policy: str, **options) -> float:
    """``model.makespan(inst, solve(inst, model, policy, **options))``, reused when this process
    (or a worker of a grid it ran) solved the same batch with the same model, policy and options
    before (:func:`tempo.studies.sweep.memo_get`): an alternative reading whose batches come out
    the same (an EPLB tie order that changes no placement) re-solves none of them.  The
    fallbacks the first solve marked are counted again on reuse."""
    key = b"makespan:" + batch_hash(inst, model, policy, sorted(options.items()))
    hit = memo_get(key)
    if hit is None:
        before = fallback_count()
        hit = (model.makespan(inst, solve(inst, model, policy, **options)), fallback_count() - before)
        memo_put(key, hit)
    else:
        add_count(hit[1])
    return hit[0]


def dispatch_times(inst: Instance, model: CostModel, policy: str, reading: Reading,
                   face_reading: str = "token_lp_face") -> tuple[np.ndarray, np.ndarray]:
    """``(t, N)``: each GPU's time (Eq. 1/2, ``model.time``) and tokens under
    :func:`dispatch`, reused when this process (or a worker of a grid it ran) dispatched the
    same batch with the same policy and options before (:func:`tempo.studies.sweep.memo_get`):
    an alternative reading that changes one policy re-runs only that one.  The fallbacks the
    first dispatch marked are counted again on reuse."""
    options = policy_options(reading, policy, face_reading)
    key = _dispatch_key(inst, model, policy, options)
    hit = memo_get(key)
    if hit is None:
        before = fallback_count()
        G, N, T = model.gpu_features(inst, solve(inst, model, policy, **options))
        t, N = model.time(G, N, T), np.array(N, dtype=float)
        t.setflags(write=False)
        N.setflags(write=False)
        hit = (t, N, fallback_count() - before)
        memo_put(key, hit)
    else:
        add_count(hit[2])
    return hit[0], hit[1]
