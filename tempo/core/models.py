"""One table of MoE model shapes (paper Section 2.2 and Table 6): routed experts, top-k, the
expert FFN's hidden size ``d_model`` and intermediate size ``d_ff`` (from the models' public
configs), and the Table 6 parameter set fitted for the model, where there is one.

The older per-module tables are views of this one and keep their names:
``tempo.theory.bounds.SHAPES`` (label -> (d_model, d_ff)), ``tempo.calib.shapes.SHAPES``
(key -> shape) and ``tempo.studies.simulator.SHAPES`` (label -> (E, K, params)).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelShape:
    """A MoE model's routed-expert shape.  One expert FFN holds ``3 * d_model * d_ff`` weights
    (gate, up, down)."""

    name: str
    d_model: int
    d_ff: int
    n_experts: int
    top_k: int
    label: str = ""
    params: str | None = None

    def weights(self) -> int:
        """Parameters of one expert FFN: 3 * d_model * d_ff."""
        return 3 * self.d_model * self.d_ff

    def bytes(self, dtype_bytes: float = 1.0) -> float:
        """Bytes of one expert's weights (fp8: one byte per parameter)."""
        return self.weights() * dtype_bytes


#: key -> shape; ``label`` is the paper's spelling, ``params`` the Table 6 offline set.
MODELS: dict[str, ModelShape] = {m.name: m for m in [
    ModelShape("qwen3-30b", 2048, 768, 128, 8, "Qwen3-30B", "qwen3-30b-offline"),
    ModelShape("dsv2-lite", 2048, 1408, 64, 6, "DSv2-Lite", "dsv2lite-offline"),
    ModelShape("dsv3", 7168, 2048, 256, 8, "DSv3", "dsv3-offline"),
    ModelShape("qwen3-235b", 4096, 1536, 128, 8, "Qwen3-235B", None),
    ModelShape("tiny", 256, 128, 16, 4, "tiny", None),  # tests and quick CPU smoke runs
]}


def model_shape(name: str) -> ModelShape:
    """The shape for a key (``"dsv3"``) or a paper label (``"DSv3"``)."""
    if name in MODELS:
        return MODELS[name]
    for m in MODELS.values():
        if m.label == name:
            return m
    raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)} "
                     f"(or {', '.join(m.label for m in MODELS.values())})")


def roofline_us(name: str, hbm_bytes_per_s: float, dtype_bytes: float = 1.0) -> float:
    """Weight-streaming floor of one expert (Section 2.2): its bytes over the HBM bandwidth
    (bytes/s), in microseconds."""
    if not hbm_bytes_per_s > 0:
        raise ValueError(f"hbm_bytes_per_s must be positive, got {hbm_bytes_per_s}")
    return model_shape(name).bytes(dtype_bytes) / hbm_bytes_per_s * 1e6
