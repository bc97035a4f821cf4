"""Helpers more than one chapter module uses."""
from __future__ import annotations

import pandas as pd

from ...paper import claims_file

PROFILES = ("smoke", "full", "gpu")


def sizes(table: dict, profile: str):
    """A chapter's experiment sizes for a book profile: a copy of ``table[profile]``, where
    ``gpu`` falls back to ``full`` when the table has no ``gpu`` entry (``smoke`` is the
    seconds-long test build)."""
    import copy

    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    return copy.deepcopy(table.get(profile, table["full"]))


def chapter_claims(chapter: str) -> pd.DataFrame:
    """The paper's claims a chapter tracks (``claims.yaml`` rows whose chapter is ``chapter``):
    id, section, claim, the paper's value, unit and kind."""
    led = claims_file.claims()
    if chapter not in set(led.chapter):
        raise ValueError(f"chapter {chapter!r} has no claims in claims.yaml")
    return led[led.chapter == chapter][["id", "section", "claim", "paper", "unit", "kind"]]


def recordings_table(recs: pd.DataFrame) -> pd.DataFrame:
    """A recordings listing (:func:`tempo.measured.catalog.recordings`) as a chapter shows it:
    every column but the folder and the manifest."""
    return recs.drop(columns=["path", "manifest"], errors="ignore")


def glue_tables(**tables) -> None:
    """Glue tables (DataFrames, or anything a notebook displays) under their names, not
    displayed, for a page to paste with ```{glue} name``` (MyST-NB): a chapter's folded
    "ledger" box holds its claim views and alternatives this way, so the lecture around it
    reads as a lecture."""
    from myst_nb import glue

    for name, table in tables.items():
        if not name.isidentifier():
            raise ValueError(f"glue name must be an identifier, got {name!r}")
        glue(name, table, display=False)


# ---------------------------------------------------------------------------- the running example
#: Chapter 01's toy batch (Fig. 1b), the running example later chapters return to: one hot expert
#: of 600 tokens and six of 30, on two GPUs holding every expert, priced by Eq. 1 with a = c = 0,
#: b = 15 us and beta = 0.1 us/token (the model Fig. 1b's numbers imply).
TOY_COUNTS = (600, 30, 30, 30, 30, 30, 30)
TOY_GPUS = 2
TOY_MODEL = {"a": 0.0, "b": 15.0, "c": 0.0, "beta": 0.1}


def toy():
    """The running example: ``(Instance, CostModel)`` of :data:`TOY_COUNTS` on :data:`TOY_GPUS`
    GPUs under full replication, priced by :data:`TOY_MODEL`."""
    from ...core.cost import CostModel
    from ...core.instance import Instance

    return Instance.full_replication(list(TOY_COUNTS), TOY_GPUS), CostModel(**TOY_MODEL)
