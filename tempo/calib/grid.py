"""Calibration grids (paper Appendix B): activated experts G x tokens per expert n on a log
ladder, and a fine sweep across 128-token tile boundaries (Fig. 4)."""
from __future__ import annotations

import numpy as np
import pandas as pd

G_LADDER = (1, 2, 4, 6, 8, 13, 20, 28, 40)


def log_ladder(lo: int, hi: int, per_octave: int = 1) -> list[int]:
    """Integers from ``lo`` to ``hi`` spaced ``per_octave`` per doubling (always ``lo`` and ``hi``)."""
    if lo < 1 or hi < lo:
        raise ValueError(f"need 1 <= lo <= hi, got {lo}, {hi}")
    n = int(np.ceil(np.log2(hi / lo) * per_octave)) + 1
    return sorted(set(int(round(v)) for v in np.geomspace(lo, hi, n)) | {lo, hi})


def tile_sweep(tiles: int = 3, width: int = 8, step: int = 4, tile: int = 128) -> list[int]:
    """Tokens per expert around the first ``tiles`` tile boundaries: k*tile - width .. k*tile + width."""
    out = set()
    for k in range(1, tiles + 1):
        out.update(range(max(1, k * tile - width), k * tile + width + 1, step))
        out.update({k * tile, k * tile + 1})
    return sorted(out)


def plan_grid(G=G_LADDER, n_max: int = 4096, per_octave: int = 1, fine: bool = True, fine_G=(1, 8),
              max_tokens: int | None = None) -> pd.DataFrame:
    """Cells to measure: ``G`` x log-ladder tokens per expert (1..``n_max``), plus the tile
    sweep at ``fine_G``; ``max_tokens`` drops cells with more than that many tokens in total
    (a CPU cannot afford the largest GPU cells).  Columns ``G``, ``n``, ``N`` (= G*n), ``kind``."""
    rows = [(g, n, "grid") for g in G for n in log_ladder(1, n_max, per_octave)]
    if fine:
        rows += [(g, n, "tile") for g in fine_G for n in tile_sweep() if n <= n_max]
    df = pd.DataFrame(rows, columns=["G", "n", "kind"]).drop_duplicates(["G", "n"])
    df["N"] = df.G * df.n
    if max_tokens is not None:
        df = df[df.N <= max_tokens]
    return df.sort_values(["G", "n"]).reset_index(drop=True)


def tiles(n, tile: int = 128):
    """M-tiles of an expert with ``n`` tokens: ceil(n / tile)."""
    return np.ceil(np.asarray(n) / tile).astype(np.int64)
