"""Repository folders, resolved relative to this package (no absolute paths anywhere else)."""
from __future__ import annotations

import os
from pathlib import Path

#: The repository root: the folder holding ``tempo/``, ``data/`` and ``notebooks/``.
ROOT = Path(os.environ.get("TEMPO_ROOT", Path(__file__).resolve().parent.parent))
DATA = ROOT / "data"
PARAMS = DATA / "params"
PAPER = DATA / "paper"
MEASURED = DATA / "measured"
BUILD = ROOT / "build"
NOTEBOOKS = ROOT / "notebooks"


def results_dir(profile: str) -> Path:
    """``build/results/<profile>/``: where every experiment writes its tidy CSV."""
    path = BUILD / "results" / profile
    path.mkdir(parents=True, exist_ok=True)
    return path
