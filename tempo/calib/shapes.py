"""Routed-expert shapes of the calibrated models (paper Section 2.2, Table 6): hidden size
``d_model`` and expert intermediate size ``d_ff``.  One expert FFN holds ``3 * d_model * d_ff``
weights (gate, up, down)."""
from __future__ import annotations

from ..core.models import MODELS, ModelShape
from ..core.models import roofline_us as _roofline_us


#: The shape record of :mod:`tempo.core.models` (``ExpertShape`` is its old name here).
ExpertShape = ModelShape

SHAPES = dict(MODELS)  # a view of tempo.core.models, keyed "qwen3-30b", "dsv3", ...


def shape(name: str) -> ExpertShape:
    if name not in SHAPES:
        raise ValueError(f"unknown expert shape {name!r}; known: {', '.join(SHAPES)}")
    return SHAPES[name]


#: a shape description (``calibrate --shape FILE.json|FILE.yaml|'{...}'``), in the names of a
#: Hugging Face MoE config: the routed expert's hidden size and intermediate size
SHAPE_SCHEMA = {
    "type": "object",
    "required": ["name", "hidden_size", "moe_intermediate_size"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]{0,39}$"},
        "hidden_size": {"type": "integer", "minimum": 1, "maximum": 65536},
        "moe_intermediate_size": {"type": "integer", "minimum": 1, "maximum": 262144},
        "dtype": {"enum": ["fp8", "bf16", "fp32"]},
        "n_experts": {"type": "integer", "minimum": 1, "maximum": 4096},
        "top_k": {"type": "integer", "minimum": 1, "maximum": 64},
    },
}
#: the largest shape description read, in bytes
MAX_SHAPE_BYTES = 64 * 1024
#: a description's dtype -> how the calibration backends name theirs (the start of ``dtype``)
DTYPES = {"fp8": "fp8", "bf16": "bfloat16", "fp32": "float32"}


def describe(doc, what: str) -> ExpertShape:
    """The shape a description ``doc`` (a mapping, :data:`SHAPE_SCHEMA`) gives; ``BadInput``
    naming ``what`` and the field when it does not match, or when it reuses a built-in name with
    other sizes.  The ``dtype`` (optional) is returned beside: ``(shape, dtype or None)``."""
    from ..core.io import BadInput, check_schema

    check_schema(doc, SHAPE_SCHEMA, what)
    sh = ExpertShape(doc["name"], d_model=doc["hidden_size"], d_ff=doc["moe_intermediate_size"],
                     n_experts=doc.get("n_experts", 1), top_k=doc.get("top_k", 1), label=doc["name"])
    known = MODELS.get(sh.name)
    if known is not None and (known.d_model, known.d_ff) != (sh.d_model, sh.d_ff):
        raise BadInput(f"{what}['name']: {sh.name!r} is a built-in shape ({known.d_model} x {known.d_ff}); "
                       "give yours another name")
    return sh, doc.get("dtype")


def shape_arg(text: str):
    """``--shape``: a registered name, a ``.json`` / ``.yaml`` / ``.yml`` file or an inline JSON
    object describing the expert (:data:`SHAPE_SCHEMA`).  A description is registered in
    :data:`SHAPES` under its name.  Returns ``(name, dtype or None)``; ``argparse``'s
    ``ArgumentTypeError`` with the reason otherwise."""
    import argparse
    from pathlib import Path

    from ..core.io import BadInput, loads_json, loads_yaml, read_regular

    if text in SHAPES:
        return text, None
    try:
        if text.lstrip().startswith("{"):
            doc = loads_json(text, "the shape description")
        elif text.endswith((".json", ".yaml", ".yml")):
            if not Path(text).is_file():
                raise BadInput(f"no such file {text!r}")
            raw = read_regular(text, MAX_SHAPE_BYTES, text, follow=True)
            doc = loads_json(raw, text) if text.endswith(".json") else loads_yaml(raw, text)
        else:
            raise BadInput(f"unknown shape {text!r}: give a registered name ({', '.join(sorted(SHAPES))}), a .json or "
                           ".yaml file, or an inline JSON object, e.g. '{\"name\": \"mine\", \"hidden_size\": 4096, "
                           "\"moe_intermediate_size\": 1536, \"dtype\": \"bf16\"}'")
        sh, dtype = describe(doc, "the shape description")
    except (BadInput, OSError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    SHAPES[sh.name] = sh
    return sh.name, dtype


def roofline_us(shape_name: str, hbm_tb_s: float, dtype_bytes: float = 1.0) -> float:
    """Weight-streaming floor of one expert (Section 2.2): its bytes over the HBM bandwidth,
    in microseconds.  DSv3 at fp8 on a 4.8 TB/s H200: 44.0 MB / 4.8 TB/s = 9.2 us."""
    if not hbm_tb_s > 0:
        raise ValueError(f"hbm_tb_s must be positive, got {hbm_tb_s}")
    return _roofline_us(shape(shape_name).name, hbm_tb_s * 1e12, dtype_bytes)


def roofline_table(names=("qwen3-30b", "dsv2-lite", "dsv3", "qwen3-235b"), hbm_tb_s: float = 4.8):
    """The roofline exercise of Section 2.2: per expert shape, its fp8 weight bytes (MB) and the
    time to stream them once at ``hbm_tb_s`` TB/s (us), a lower bound on the floor b."""
    import pandas as pd

    return pd.DataFrame([{"shape": n, "expert MB (fp8)": shape(n).bytes(1.0) / 1e6,
                          f"roofline b at {hbm_tb_s:g} TB/s (us)": roofline_us(n, hbm_tb_s)} for n in names])


def host_copy_bandwidth(nbytes: int = 64 * 2**20, reps: int = 10) -> float:
    """Bytes per second this machine's memory moves in a ``numpy.copyto`` loop over a
    ``nbytes`` buffer (past the caches), counting the read and the write: the CPU analogue of
    the HBM bandwidth in the weight-streaming bound of Section 2.2 (:func:`roofline_us`), so a
    CPU recording's fitted floor can be set beside its own bound.  Measured now, on whatever
    machine calls it."""
    import time

    import numpy as np

    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 8:
        raise ValueError(f"nbytes must be an integer of at least 8, got {nbytes!r}")
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
        raise ValueError(f"reps must be a positive integer, got {reps!r}")
    buf = np.ones(nbytes // 8)
    dst = np.empty_like(buf)
    np.copyto(dst, buf)  # warm: page faults outside the timing
    t0 = time.perf_counter()
    for _ in range(reps):
        np.copyto(dst, buf)
    return 2 * buf.nbytes * reps / (time.perf_counter() - t0)
