"""Routed-expert shapes of the calibrated models (paper Section 2.2, Table 6): hidden size
``d_model`` and expert intermediate size ``d_ff``.  One expert FFN holds ``3 * d_model * d_ff``
weights (gate, up, down)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExpertShape:
    name: str
    d_model: int
    d_ff: int
    n_experts: int
    top_k: int

    def weights(self) -> int:
        """Parameters of one expert FFN: 3 * d_model * d_ff."""
        return 3 * self.d_model * self.d_ff

    def bytes(self, dtype_bytes: float = 1.0) -> float:
        return self.weights() * dtype_bytes


SHAPES = {
    "qwen3-30b": ExpertShape("qwen3-30b", 2048, 768, 128, 8),
    "dsv2-lite": ExpertShape("dsv2-lite", 2048, 1408, 64, 6),
    "dsv3": ExpertShape("dsv3", 7168, 2048, 256, 8),
    "qwen3-235b": ExpertShape("qwen3-235b", 4096, 1536, 128, 8),
    "tiny": ExpertShape("tiny", 256, 128, 16, 4),  # tests and quick CPU smoke runs
}


def shape(name: str) -> ExpertShape:
    if name not in SHAPES:
        raise ValueError(f"unknown expert shape {name!r}; known: {', '.join(SHAPES)}")
    return SHAPES[name]


def roofline_us(shape_name: str, hbm_tb_s: float, dtype_bytes: float = 1.0) -> float:
    """Weight-streaming floor of one expert (Section 2.2): its bytes over the HBM bandwidth,
    in microseconds.  DSv3 at fp8 on a 4.8 TB/s H200: 44.0 MB / 4.8 TB/s = 9.2 us."""
    if hbm_tb_s <= 0:
        raise ValueError(f"hbm_tb_s must be positive, got {hbm_tb_s}")
    return shape(shape_name).bytes(dtype_bytes) / (hbm_tb_s * 1e12) * 1e6
