"""Where tempo reads its data and writes its outputs (no absolute paths anywhere else).

* In a source checkout (``data/params/cost_params.csv`` next to ``tempo/``), or with
  ``TEMPO_ROOT`` set, ``ROOT`` is that folder: data is read from ``ROOT/data`` and outputs go
  to ``ROOT/build``.
* In an installed wheel there is no checkout: the cost parameters (paper Tables 6, 7), the
  paper's tables and claims, and the shipped routing traces are package data (``tempo/_data/``, located with
  :mod:`importlib.resources`), and ``ROOT`` is the working folder, so ``build/`` and
  ``data/measured/`` (:mod:`tempo.measured.store`) are created where the command runs.
"""
from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent  # tempo/ (this file is tempo/core/paths.py)


def _is_checkout(root: Path) -> bool:
    return (root / "data" / "params" / "cost_params.csv").is_file()


def _package_data(sub: str) -> Path:
    """``tempo/_data/<sub>`` of an installed package (shipped by setup.py's build_py)."""
    return Path(str(files("tempo").joinpath("_data", sub)))


if os.environ.get("TEMPO_ROOT"):
    ROOT = Path(os.environ["TEMPO_ROOT"])
elif _is_checkout(_PACKAGE.parent):
    ROOT = _PACKAGE.parent
else:
    ROOT = Path.cwd()
#: True when data comes from a source checkout (or TEMPO_ROOT), False for an installed wheel.
IN_CHECKOUT = _is_checkout(ROOT)
DATA = ROOT / "data"
PARAMS = DATA / "params" if (DATA / "params").is_dir() else _package_data("params")
PAPER = DATA / "paper" if (DATA / "paper").is_dir() else _package_data("paper")
#: the shipped routing traces and profiles (``python -m tempo make-traces``; ``data/traces/``)
TRACES = DATA / "traces" if IN_CHECKOUT or (DATA / "traces").is_dir() else _package_data("traces")
BUILD = ROOT / "build"
NOTEBOOKS = ROOT / "notebooks"


def results_dir(profile: str) -> Path:
    """``build/results/<profile>/``: where every experiment writes its tidy CSV."""
    path = BUILD / "results" / profile
    path.mkdir(parents=True, exist_ok=True)
    return path
