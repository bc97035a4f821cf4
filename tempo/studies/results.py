"""This build's results, ``build/results/<profile>/``: every experiment run writes a tidy CSV
``<stem>.csv`` and its provenance ``<stem>.meta.json`` (the experiment, its config with the
readings it ran under, the code version and git commit, when, and how many dispatches came from
a solver's fallback).

:class:`ResultKey` names a result and spells its stem, the one place stems are made and parsed;
:class:`Results` reads and writes one profile's results, each file read at most once per object
(make one per ledger evaluation or page, not one per process: files change between runs)."""
from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..core import paths
from ..core.io import atomic_write_csv, atomic_write_text, read_json, read_regular

#: the most bytes a result's CSV or .meta.json may hold (the largest full-profile table is 1.8 MB)
MAX_BYTES = 512 * 2**20

#: The build profiles: smoke (the seconds-long test build), full, gpu (the full sizes on a GPU).
PROFILES = ("smoke", "full", "gpu")


@dataclass(frozen=True)
class ResultKey:
    """A result's name: experiment ``name``; ``tag``, a second run of it on one page
    (``"scale"``, ``"whole"``); ``alternative``, the (reading id, choice) it ran under instead
    of the page's reading (:func:`tempo.studies.run_alternatives`).

    Its :attr:`stem` is ``name``, ``name-tag``, ``name-id=choice`` or ``name-tag.id=choice``."""

    name: str
    tag: str | None = None
    alternative: tuple[str, str] | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name or "-" in self.name:
            raise ValueError(f"name must be an experiment name without '-', got {self.name!r}")
        if self.tag is not None and (not isinstance(self.tag, str) or not self.tag
                                     or any(c in self.tag for c in "-=")):
            raise ValueError(f"tag must be None or a non-empty string without '-' or '=', got {self.tag!r}")
        if self.alternative is not None:
            alt = tuple(self.alternative)
            if len(alt) != 2 or not all(isinstance(x, str) and x and not any(c in x for c in "-=.") for x in alt):
                raise ValueError(f"alternative must be a (reading id, choice) pair of names, got {self.alternative!r}")
            object.__setattr__(self, "alternative", alt)

    @property
    def suffix(self) -> str | None:
        """What follows ``name-`` in the stem (the ``tag`` a ``.meta.json`` records), or None."""
        if self.alternative is None:
            return self.tag
        rid, choice = self.alternative
        return f"{self.tag + '.' if self.tag else ''}{rid}={choice}"

    @property
    def stem(self) -> str:
        return self.name if self.suffix is None else f"{self.name}-{self.suffix}"

    def under(self, reading_id: str, choice: str) -> "ResultKey":
        """This result run under one alternative choice of a reading."""
        return ResultKey(self.name, self.tag, (reading_id, choice))

    @classmethod
    def parse(cls, stem: str) -> "ResultKey":
        """The key whose :attr:`stem` is ``stem``; ``ValueError`` for a stem no key spells."""
        if not isinstance(stem, str):
            raise TypeError(f"stem must be a string, got {stem!r}")
        name, dash, rest = stem.partition("-")
        if not dash:
            return cls(name)
        if "=" not in rest:
            return cls(name, rest)
        head, choice = rest.split("=", 1)
        tag, _, rid = head.rpartition(".")
        key = cls(name, tag or None, (rid, choice))
        if key.stem != stem:
            raise ValueError(f"{stem!r} is not a result stem (name[-tag][.id=choice])")
        return key


class Meta(dict):
    """A result's ``.meta.json`` as a frame's ``attrs["meta"]``: read-only by convention, so a
    deep copy is the object itself (pandas deep-copies ``attrs`` on every operation; a config
    holds hundreds of values, and the ledger's claims run thousands of operations)."""

    def __deepcopy__(self, memo):
        return self

    def __copy__(self):
        return self


def key_of(key: "ResultKey | str") -> ResultKey:
    """``key`` as a :class:`ResultKey` (a stem string is parsed)."""
    return key if isinstance(key, ResultKey) else ResultKey.parse(key)


class Results:
    """One profile's results folder, read through a cache: each ``.meta.json`` and CSV is read
    at most once per object (:meth:`meta`, :meth:`load`); :meth:`write` writes a result
    atomically and keeps what it wrote.  Keys are :class:`ResultKey` or stems."""

    def __init__(self, profile: str):
        if profile not in PROFILES:
            raise ValueError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
        self.profile = profile
        self.dir: Path = paths.results_dir(profile)
        self._meta: dict = {}
        self._frames: dict = {}
        self._csv: dict = {}

    def __repr__(self) -> str:
        return f"Results({self.profile!r})"

    def path(self, key, suffix: str = ".csv") -> Path:
        """Where result ``key``'s file with ``suffix`` (``.csv``, ``.meta.json``) lives."""
        return self.dir / f"{key_of(key).stem}{suffix}"

    def has_csv(self, key) -> bool:
        """Whether result ``key``'s CSV is there (its ``.meta.json`` may not be)."""
        stem = key_of(key).stem
        if stem not in self._csv:
            self._csv[stem] = self.path(stem).is_file()
        return self._csv[stem]

    def meta(self, key) -> dict | None:
        """Result ``key``'s ``.meta.json`` (the experiment, config, code version ...), or None
        when it is missing or not JSON."""
        stem = key_of(key).stem
        if stem not in self._meta:
            try:  # bounded: a regular file (no link, FIFO or device), size and depth capped
                m = read_json(self.path(stem, ".meta.json"), MAX_BYTES)
                self._meta[stem] = Meta(m) if isinstance(m, dict) else m
            except (OSError, ValueError):
                self._meta[stem] = None
        return self._meta[stem]

    def exists(self, key) -> bool:
        """Whether result ``key`` is there with its provenance: a CSV without its ``.meta.json``
        (written by an older tempo, or by hand) does not count."""
        return self.has_csv(key) and self.meta(key) is not None

    def load(self, key) -> pd.DataFrame:
        """Result ``key``'s table (a shallow copy: pandas copies on write, so a caller that changes
        it changes only its own; ``attrs["meta"]``: its ``.meta.json`` or None);
        ``FileNotFoundError`` naming the experiment when this build has no such CSV."""
        k = key_of(key)
        if k.stem not in self._frames:
            if not self.has_csv(k):
                raise FileNotFoundError(f"{self.path(k)} does not exist: run the notebook that computes {k.name!r} first")
            self._frames[k.stem] = pd.read_csv(io.BytesIO(read_regular(self.path(k), MAX_BYTES, str(self.path(k)))))
        df = self._frames[k.stem].copy(deep=False)
        df.attrs["meta"] = self.meta(k)
        return df

    def write(self, key, df: pd.DataFrame, meta: dict) -> None:
        """Write result ``key``: its table as ``<stem>.csv`` and ``meta`` as ``<stem>.meta.json``,
        each atomically (:mod:`tempo.core.io`)."""
        k = key_of(key)
        atomic_write_csv(df, self.path(k))
        text = json.dumps(meta, default=str, indent=1)
        atomic_write_text(self.path(k, ".meta.json"), text)
        self._csv[k.stem] = True
        self._meta[k.stem] = json.loads(text)
        self._frames.pop(k.stem, None)
