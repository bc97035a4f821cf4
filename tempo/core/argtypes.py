"""argparse ``type=`` callables and the parser every command uses (``python -m tempo <command>``).

A bad value becomes "argument --name: <message>" and exit status 2, before any work starts.
Every driver (the benchmarks, calibration, trace import, ingest) builds its parser from here,
never from :mod:`tempo.cli`, which only dispatches commands.  Names that live in a higher layer
(the policy registry) are passed in by the caller: ``choice(available_policies, "policy")``.
"""
from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

#: int64's largest value
INT64_MAX = 2**63 - 1
#: the most tokens a command accepts, per count and in total (``tempo.core.instance.MAX_TOTAL_TOKENS``:
#: float64 is exact on integers up to 2^53, and so is every solver)
MAX_TOKENS = 2**53
#: the most GPUs a command accepts (a cluster of 512 nodes of 8)
MAX_GPUS = 4096
#: the most (expert, GPU) slots one full-replication instance may hold (2^24: 128 MiB per float64 array)
MAX_SLOTS = 2**24


def int_range(lo: int | None = None, hi: int | None = None):
    """An integer in [lo, hi] (either bound optional)."""

    def parse(s: str) -> int:
        try:
            v = int(s)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"must be an integer, got {s!r}") from None
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            lo_s = "" if lo is None else f" >= {lo}"
            hi_s = "" if hi is None else f" <= {hi}"
            raise argparse.ArgumentTypeError(f"must be an integer{lo_s}{' and' if lo_s and hi_s else ''}{hi_s}, "
                                             f"got {s!r}")
        return v

    parse.__name__ = "integer"
    return parse


def float_range(lo: float | None = None, hi: float | None = None, lo_open: bool = False, allow_inf: bool = False):
    """A finite float in [lo, hi] (``lo_open``: > lo); ``allow_inf`` admits +inf."""

    def parse(s: str) -> float:
        try:
            v = float(s)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"must be a number, got {s!r}") from None
        if math.isnan(v) or (math.isinf(v) and not (allow_inf and v > 0)):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {s!r}")
        if lo is not None and (v <= lo if lo_open else v < lo):
            raise argparse.ArgumentTypeError(f"must be {'>' if lo_open else '>='} {lo:g}, got {s!r}")
        if hi is not None and v > hi:
            raise argparse.ArgumentTypeError(f"must be <= {hi:g}, got {s!r}")
        return v

    parse.__name__ = "number"
    return parse


positive_int = int_range(1)
nonneg_int = int_range(0)
count_int = int_range(0, MAX_TOKENS)
gpu_count = int_range(1, MAX_GPUS)
positive_float = float_range(0.0, lo_open=True)
nonneg_float = float_range(0.0)


def git_rev(s: str) -> str:
    """A commit name handed to ``git`` (a hash, a branch or a tag, ``~``/``^`` suffixes), or ``''``
    (skip): never starting with ``-`` (git would read it as an option, re-audit D13), no ``..``,
    no whitespace, at most 100 characters."""
    import re

    if s == "":
        return s
    if len(s) > 100 or ".." in s or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/~^-]*", s):
        raise argparse.ArgumentTypeError(f"must be a commit name (hash, branch or tag; not starting with '-'), got {s!r:.60}")
    return s


def comma_list(item, name: str = "item"):
    """A non-empty comma-separated list, each entry parsed by ``item``."""

    def parse(s: str) -> list:
        parts = [p.strip() for p in str(s).split(",") if p.strip()]
        if not parts:
            raise argparse.ArgumentTypeError(f"must be a comma-separated list of {name}s, got {s!r}")
        return [item(p) for p in parts]

    parse.__name__ = f"{name} list"
    return parse


def choice(options, what: str):
    """One of ``options`` (a list, or a callable returning it: resolved on first use)."""

    def parse(s: str) -> str:
        known = list(options() if callable(options) else options)
        if s not in known:
            raise argparse.ArgumentTypeError(f"unknown {what} {s!r}; known: {', '.join(map(str, known))}")
        return s

    parse.__name__ = what
    return parse


def _param_names():
    from .params import names

    return names()


#: a named cost-parameter set (:func:`tempo.core.params.names`; paper Tables 6, 7)
params_name = choice(_param_names, "parameter set")


def input_file(s: str) -> Path:
    """An existing regular file (a FIFO or a device node is refused: reading it would hang or
    never end)."""
    p = Path(s)
    if p.is_dir():
        raise argparse.ArgumentTypeError(f"{s!r} is a directory, expected a file")
    if p.exists() and not p.is_file():
        raise argparse.ArgumentTypeError(f"{s!r} is not a regular file (a FIFO, a device node or a socket)")
    if not p.is_file():
        raise argparse.ArgumentTypeError(f"{s!r} does not exist")
    if not os.access(p, os.R_OK):
        raise argparse.ArgumentTypeError(f"{s!r} is not readable")
    return p


def output_file(s: str) -> Path:
    """A file to write: not a directory, in an existing writable folder."""
    p = Path(s)
    if not str(s).strip():
        raise argparse.ArgumentTypeError("must be a file path, got ''")
    if p.is_dir():
        raise argparse.ArgumentTypeError(f"{s!r} is a directory, expected a file path")
    from .io import is_writable_target

    why = is_writable_target(p)
    if why:  # never replace a device node (as root, /dev/null), a FIFO (a hang) or a link's target
        raise argparse.ArgumentTypeError(f"{s!r} {why}; expected a new or regular file")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"folder {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK):
        raise argparse.ArgumentTypeError(f"folder {str(parent)!r} is not writable")
    return p


def output_dir(s: str) -> Path:
    """A folder to write into: absent (created later) or an existing folder, never a file."""
    p = Path(s)
    if not str(s).strip():
        raise argparse.ArgumentTypeError("must be a folder path, got ''")
    for q in (p, *p.parents):
        if q.exists():
            if not q.is_dir():
                raise argparse.ArgumentTypeError(f"{str(q)!r} is a file, expected a folder")
            break
    return p


class ArgumentParser(argparse.ArgumentParser):
    """argparse with ``fail(arg, msg)``: a usage error naming the argument (exit 2)."""

    def fail(self, arg: str, msg: str):
        self.error(f"argument {arg}: {msg}")
