"""Readings: where the paper's text settles, or leaves open, how a number was computed
(``data/paper/readings.yaml``), as data a study takes as a parameter.

Each entry of the file has an ``id``, the ``section`` that speaks to the choice, the choice the
paper's own computation used (``paper``), the ``alternatives`` (name: what it is; the library's
own default is marked `` `default` `` in its text) and the ``claims`` it moves.  A
:class:`Reading` holds one choice per id: :meth:`Reading.paper` the paper's, :meth:`Reading.library`
what a user of the library gets without asking (the marked default, else the paper's choice),
and ``reading.with_(token_lp_face="maxflow_vertex")`` any alternative.  An unknown id or choice
raises ``ValueError`` naming the reading.

A study reads its choices with :meth:`Reading.of` from its config's ``"reading"`` (a dict id ->
choice; missing ids take the paper's choice), so the reading is part of the experiment's cache
key; :func:`tempo.studies.run` writes the ids a study depends on into its config
(:meth:`Reading.select`).

The file needs PyYAML (a dependency of the book and dev extras); ``import tempo`` does not load
it, only the first call that needs a reading.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Mapping

from ..core import paths

#: The marker of the library's default in an alternative's text (the file's own convention).
_DEFAULT_MARK = re.compile(r"`default`\)")


@dataclass(frozen=True)
class ReadingSpec:
    """One entry of ``readings.yaml``."""

    id: str
    section: str
    settled: str
    paper: str
    why: str
    alternatives: Mapping[str, str]
    claims: tuple
    calibration: bool
    library: str
    #: the text that supports the alternatives (counter-evidence to the paper's choice), or ""
    against: str = ""
    #: the choice rests on something the paper does not publish (a grid's size, a suite's
    #: shapes): a verdict that differs between its alternatives is shown per reading, not judged
    unpublished: bool = False

    @property
    def choices(self) -> tuple:
        return tuple(self.alternatives)


def _library_choice(entry: dict) -> str:
    marked = [name for name, text in entry["alternatives"].items() if _DEFAULT_MARK.search(str(text))]
    if len(marked) > 1:
        raise ValueError(f"readings.yaml: reading {entry['id']!r} marks more than one alternative `default`: {marked}")
    return marked[0] if marked else entry["paper"]


#: the most bytes readings.yaml may hold (it holds about 25 KB)
MAX_BYTES = 4 * 2**20
_TEXT = {"type": "string", "minLength": 1}
#: the fields a reader uses, with their types (an entry may carry more)
SCHEMA = {
    "type": "object", "required": ["readings"],
    "properties": {"readings": {"type": "array", "items": {
        "type": "object", "required": ["id", "section", "settled", "paper", "why", "alternatives"],
        "properties": {"id": _TEXT, "section": {"type": ["string", "number"]},
                       "settled": {"type": ["string", "boolean"]}, "paper": _TEXT, "why": {"type": "string"},
                       "alternatives": {"type": "object", "minProperties": 1, "additionalProperties": {"type": "string"}},
                       "claims": {"type": ["array", "null"], "items": _TEXT},
                       "calibration": {"type": "boolean"}, "against": {"type": "string"},
                       "unpublished": {"type": "boolean"}}}}}}


@functools.lru_cache(maxsize=4)
def _load(path: str) -> Mapping[str, ReadingSpec]:
    from ..core.io import check_schema, read_yaml

    # a regular file of bounded size, depth and alias expansion, then the fields' types
    doc = check_schema(read_yaml(path, MAX_BYTES, "readings.yaml"), SCHEMA, "readings.yaml")
    out = {}
    for entry in doc["readings"]:
        rid = entry["id"]
        alts = {str(k): str(v) for k, v in entry["alternatives"].items()}
        if rid in out:
            raise ValueError(f"readings.yaml: reading {rid!r} appears twice")
        if entry["paper"] not in alts:
            raise ValueError(f"readings.yaml: reading {rid!r}: the paper's choice {entry['paper']!r} is not among its "
                             f"alternatives {sorted(alts)}")
        settled = entry["settled"]
        settled = {True: "yes", False: "no"}.get(settled, settled) if isinstance(settled, bool) else str(settled)
        out[rid] = ReadingSpec(id=rid, section=str(entry["section"]), settled=settled,  # YAML 1.1 reads yes as True
                               paper=str(entry["paper"]), why=" ".join(str(entry["why"]).split()),
                               alternatives=MappingProxyType(alts), claims=tuple(entry.get("claims") or ()),
                               calibration=bool(entry.get("calibration", False)), library=_library_choice(entry),
                               against=" ".join(str(entry.get("against") or "").split()),
                               unpublished=bool(entry.get("unpublished", False)))
    return MappingProxyType(out)


def specs() -> Mapping[str, ReadingSpec]:
    """Every reading of ``data/paper/readings.yaml``, by id, in file order."""
    return _load(str(paths.PAPER / "readings.yaml"))


def spec(reading_id: str) -> ReadingSpec:
    """The entry of one reading; ``ValueError`` naming it when the file has no such id."""
    s = specs()
    if reading_id not in s:
        raise ValueError(f"unknown reading {reading_id!r}; readings.yaml has: {', '.join(s)}")
    return s[reading_id]


def _check(reading_id, choice) -> None:
    if not isinstance(reading_id, str):
        raise TypeError(f"a reading id must be a string, got {reading_id!r}")
    sp = spec(reading_id)
    if not isinstance(choice, str) or choice not in sp.alternatives:
        raise ValueError(f"reading {reading_id!r} has no choice {choice!r}; its choices: {', '.join(sp.choices)} "
                         f"(the paper's: {sp.paper})")


class Reading(Mapping):
    """One choice per reading of ``readings.yaml`` (an immutable mapping id -> choice).

    Build it with :meth:`paper`, :meth:`library` or :meth:`of` (a study's config), derive others
    with :meth:`with_`; :meth:`select` gives the plain dict a study's config carries.  Equal
    readings compare (and hash) equal."""

    __slots__ = ("_choices",)

    def __init__(self, choices: Mapping[str, str] | None = None, base: str = "paper"):
        if base not in ("paper", "library"):
            raise ValueError(f"base must be 'paper' or 'library', got {base!r}")
        full = {rid: (sp.paper if base == "paper" else sp.library) for rid, sp in specs().items()}
        for rid, choice in (choices or {}).items():
            _check(rid, choice)
            full[rid] = choice
        self._choices = MappingProxyType(full)

    def __reduce__(self):
        """Pickles as its choices (a grid's cells carry it to worker processes)."""
        return (Reading, (dict(self._choices),))

    # constructors
    @classmethod
    def paper(cls, **overrides) -> "Reading":
        """The paper's reading (each entry's ``paper`` choice), with ``overrides``."""
        return cls(overrides, base="paper")

    @classmethod
    def library(cls, **overrides) -> "Reading":
        """What the library does for its users: each entry's alternative marked `` `default` ``
        (the distinct top-K router, the even-spread token-LP, the default tempo preset and its
        ``lp_variants="auto"`` ensemble, ...), the paper's choice where the library has none of its
        own; with ``overrides``."""
        return cls(overrides, base="library")

    @classmethod
    def of(cls, config, base: str = "paper") -> "Reading":
        """The reading a study's ``config`` carries (``config["reading"]``: a dict id -> choice,
        or a :class:`Reading`; missing ids take ``base``'s choice).  A config without one gets
        ``base`` (the paper's reading)."""
        if isinstance(config, Reading):
            return config
        if config is None:
            return cls(base=base)
        if not isinstance(config, Mapping):
            raise TypeError(f"config must be a dict, got {type(config).__name__}")
        r = config.get("reading")
        if r is None:
            return cls(base=base)
        if isinstance(r, Reading):
            return r
        if not isinstance(r, Mapping):
            raise TypeError(f"config['reading'] must be a dict of reading id -> choice, got {r!r}")
        return cls(dict(r), base=base)

    def with_(self, **choices) -> "Reading":
        """This reading with some choices replaced (each checked)."""
        return Reading({**self._choices, **choices})

    # mapping protocol
    def __getitem__(self, reading_id: str) -> str:
        if reading_id not in self._choices:
            spec(reading_id)  # raises, naming the reading
        return self._choices[reading_id]

    def __iter__(self):
        return iter(self._choices)

    def __len__(self) -> int:
        return len(self._choices)

    def __eq__(self, other) -> bool:
        return isinstance(other, Reading) and dict(self._choices) == dict(other._choices)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._choices.items())))

    def __repr__(self) -> str:
        paper = Reading.paper()
        diff = {k: v for k, v in self._choices.items() if paper[k] != v}
        return f"Reading.paper({', '.join(f'{k}={v!r}' for k, v in diff.items())})"

    # what studies and chapters use
    def select(self, ids: Iterable[str]) -> dict:
        """``{id: choice}`` for ``ids`` (each checked): what a study's config carries, so the
        cache key holds exactly the choices the study depends on."""
        return {rid: self[rid] for rid in ids}

    def differs_from_paper(self) -> dict:
        """``{id: choice}`` where this reading departs from the paper's."""
        paper = Reading.paper()
        return {k: v for k, v in self._choices.items() if paper[k] != v}

    def label(self, ids: Iterable[str] | None = None) -> str:
        """A short name: ``"paper"``, ``"library"`` or ``"paper+token_lp_face=maxflow_vertex"``
        (only ``ids`` considered when given)."""
        keys = list(ids) if ids is not None else list(self._choices)
        paper, lib = Reading.paper(), Reading.library()
        if all(self[k] == paper[k] for k in keys):
            return "paper"
        if all(self[k] == lib[k] for k in keys):
            return "library"
        return "paper+" + ",".join(f"{k}={self[k]}" for k in keys if self[k] != paper[k])

    def alternatives(self, reading_id: str) -> list["Reading"]:
        """This reading with ``reading_id`` set to each of its other choices, in file order."""
        sp = spec(reading_id)
        return [self.with_(**{reading_id: c}) for c in sp.choices if c != self[reading_id]]

    # the choices a study turns into numbers
    @property
    def skews(self) -> list[float]:
        """The phase grid's skews (``skew_grid``; Section 3.2)."""
        return list(SKEW_GRIDS[self["skew_grid"]])

    @property
    def batch_ladder(self) -> list[int]:
        """The phase grid's tokens per GPU (``batch_ladder``; Section 3.2)."""
        return list(BATCH_LADDERS[self["batch_ladder"]])

    def seeds(self, first: int = 0) -> list[int]:
        """The seeds a statistic over random batches is computed over (``random_maxima``): at
        least 8 (Section 3.2, Table 2), or the one seed ``first``."""
        return [first] if self["random_maxima"] == "one_seed" else list(range(first, first + N_SEEDS))


#: ``skew_grid`` choices -> skews (Section 3.2: s in 0..1.5, 12 columns over two replications).
SKEW_GRIDS = MappingProxyType({"six_skews": (0.0, 0.3, 0.6, 0.9, 1.2, 1.5),
                               "seven_skews": (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5)})
#: ``batch_ladder`` choices -> tokens per GPU (Section 3.2: B in 16..2048 per GPU).
BATCH_LADDERS = MappingProxyType({"powers_of_two": (16, 32, 64, 128, 256, 512, 1024, 2048)})
#: Seeds of a statistic over random batches under ``random_maxima: seeds`` (at least 8).
N_SEEDS = 8
