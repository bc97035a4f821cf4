"""The readings of ``data/paper/readings.yaml`` (:mod:`tempo.paper.readings`) as the book shows
and runs them: the tables a page shows (every reading, the claims each moves) and the runs of a
result under each alternative the ledger shows.  The chapters run every study the ledger's
claims read under :meth:`~tempo.paper.readings.Reading.paper`, passed explicitly
(``studies.run(..., reading=READING)``)."""
from __future__ import annotations

import pandas as pd

from .. import studies
from ..paper.readings import Reading, spec, specs
from ..studies import READINGS
from ..studies.results import ResultKey
from .claims import REGISTRY


def table() -> pd.DataFrame:
    """One row per reading: id, section, how settled, the paper's choice, the library's
    default, the alternatives and the claims it moves (in file order)."""
    return pd.DataFrame([{"reading": s.id, "section": s.section, "settled": s.settled, "paper": s.paper,
                          "library": s.library, "alternatives": ", ".join(s.choices), "claims": len(s.claims),
                          "calibration": s.calibration} for s in specs().values()]).set_index("reading")


def claims_of(reading_id: str) -> list[str]:
    """The ledger claims a reading moves (its ``claims`` list)."""
    return list(spec(reading_id).claims)


def readings_of(claim_id: str) -> list[str]:
    """The readings whose ``claims`` list names ``claim_id``, in file order."""
    return [s.id for s in specs().values() if claim_id in s.claims]


def matrix() -> pd.DataFrame:
    """Claims x readings: True where the reading lists the claim (rows: every claim some
    reading lists, sorted)."""
    ids = sorted({c for s in specs().values() for c in s.claims})
    return pd.DataFrame({s.id: [c in s.claims for c in ids] for s in specs().values()}, index=pd.Index(ids, name="claim"))


def alternative_ids(stem: str) -> list[str]:
    """The readings whose alternatives a chapter runs result ``stem`` under (``"phase_diagram"``,
    ``"phase_diagram-scale"``, ``"ablation-whole"`` ...): those its experiment depends on
    (``@experiment(..., readings=...)``) that ``readings.yaml`` lists for a claim reading ``stem``,
    in file order.  The ledger shows each such claim under each of them."""
    deps = READINGS.get(ResultKey.parse(stem).name, ())
    claims = {cid for cid, sp in REGISTRY.items() if stem in sp.inputs}
    return [s.id for s in specs().values() if s.id in deps and claims & set(s.claims)]


def run_alternatives(stem: str, config: dict, profile: str, reading: Reading) -> dict:
    """Result ``stem`` (``<experiment>[-<tag>]``) under ``reading`` and under each single
    alternative of :func:`alternative_ids`: :func:`tempo.studies.run_alternatives` (cached; each
    run writes its CSV for the ledger).  ``{(id, choice): DataFrame}``, ``(None, None)`` for
    ``reading``."""
    key = ResultKey.parse(stem)
    return studies.run_alternatives(key.name, config, profile, reading=reading, ids=alternative_ids(stem), tag=key.tag)


def run_skew_grids(stem: str, config: dict, profile: str, reading: Reading) -> dict:
    """Result ``stem`` with its config's ``skews`` set by each other choice of the ``skew_grid``
    reading (Section 3.2's grid; a config value, not a reading the experiment takes), written as
    the stem the ledger looks for (``<stem>-skew_grid=<choice>``).  ``{choice: DataFrame}``."""
    key = ResultKey.parse(stem)
    out = {}
    for alt in reading.alternatives("skew_grid"):
        choice = alt["skew_grid"]
        out[choice] = studies.run(key.name, {**config, "skews": alt.skews}, profile, reading=reading, tag=key.tag,
                                  alternative=("skew_grid", choice))
    return out
