"""How a study turns a reading (:class:`tempo.core.readings.Reading`, ``data/paper/readings.yaml``)
into batches and dispatches: the synthetic router and what the placement is built from, the
fixed policies' faces and orders, and which TEMPO runs.  Every study that depends on a reading
calls these, so one choice means one thing everywhere."""
from __future__ import annotations

from ..core.cost import CostModel
from ..core.instance import Dispatch, Instance
from ..core.readings import Reading
from ..policies import solve
from .scenarios import zipf_batches

#: ``ensemble_lp`` choices -> tempo's ``lp_variants`` (Section 4.2 stage 4, Proposition 1).
LP_VARIANTS = {"highs_vertex": ("highs",), "maxflow_vertex": ("vertex",), "auto": "auto"}
#: ``tempo_preset`` choices -> tempo's ``options`` preset (Section 4.2).
PRESETS = {"paper": "paper", "default": "default"}


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
    ``ablation_reference`` when ``preset_reading`` says so) and the ensemble's LP candidates of
    ``ensemble_lp``."""
    if preset_reading == "ablation_reference":
        preset = "paper" if reading["ablation_reference"] == "paper_preset" else "default"
    elif preset_reading == "tempo_preset":
        preset = PRESETS[reading["tempo_preset"]]
    else:
        raise ValueError(f"preset_reading must be 'tempo_preset' or 'ablation_reference', got {preset_reading!r}")
    return {"options": preset, "lp_variants": LP_VARIANTS[reading["ensemble_lp"]]}


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
