"""Compile the Triton dispatch kernel for a GPU target without a GPU: the compile time, the
PTX size and ptxas's register and spill figures, per table width ``R`` and kernel variant.

Uses only the triton wheel: ``triton.compile`` on the kernel's AST for
``GPUTarget("cuda", 90, 32)`` (H100/H200, sm_90a) and the ``ptxas`` that ships in
``triton/backends/nvidia/bin``; no CUDA install, no driver.  Each compile starts from an empty
Triton cache, so the time is a cold compile (what a server's first warm-up pays).

``R`` is a runtime argument the JIT does not specialise on (the kernel's
``do_not_specialize``), so every width runs one binary; the report per width shows it (the
same PTX digest) and that nothing grows with it.

    python -m tempo.serving.kernel_build --R 1 9 17 33 65 129     # one JSON object on stdout
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# (ids, phys, counts) dtypes as SGLang passes them on CUDA: int32 top-k ids, int32 table, int64 counters
SIGNATURE = {
    "ids_ptr": "*i32", "prob_ptr": "*fp32", "phys_ptr": "*i32", "counts_ptr": "*i64", "out_ptr": "*i32",
    "u_ptr": "*fp32", "step_ptr": "*i64", "nvalid_ptr": "*i64", "invalid_ptr": "*i64", "mask_ptr": "*i64",
    "n_pairs": "i32", "K": "i32", "E": "i32", "R": "i32", "s0": "i32", "s1": "i32", "prob_off": "i32",
    "phys_off": "i32", "counts_off": "i32", "n_valid_scalar": "i32", "layer": "i32", "rank": "i32",
    "dp_width": "i32", "n_dp": "i32",
    "NVALID_FROM_PTR": "constexpr", "COUNT_INVALID": "constexpr", "ROW_MASK": "constexpr", "U": "constexpr",
    "BLOCK": "constexpr",
}
# name -> constexprs; "attention DP" is the largest (slot mask and a device prefix bound)
VARIANTS = {
    "deepep": dict(NVALID_FROM_PTR=True, COUNT_INVALID=True, ROW_MASK=0, U=2, BLOCK=256),
    "rank-invariant": dict(NVALID_FROM_PTR=True, COUNT_INVALID=True, ROW_MASK=0, U=1, BLOCK=256),
    "attention DP": dict(NVALID_FROM_PTR=True, COUNT_INVALID=True, ROW_MASK=1, U=1, BLOCK=256),
}


def ptxas_path() -> Path | None:
    """The ptxas inside the triton wheel, or None."""
    try:
        import triton
    except ImportError:
        return None
    p = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    return p if p.is_file() and os.access(p, os.X_OK) else None


def build(R: int, variant: str = "attention DP", arch: int = 90) -> dict:
    """Compile one variant cold for ``sm_{arch}a``; ``R`` is the width the launch would pass.

    Returns ``{"R", "variant", "seconds", "ptx_lines", "ptx_sha", "registers", "spill_stores",
    "spill_loads"}`` (bytes per thread; from ``ptxas -v``)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from .triton_kernels import _dispatch_count_kernel

    if "R" not in _dispatch_count_kernel.do_not_specialize and 13 not in _dispatch_count_kernel.do_not_specialize:
        raise RuntimeError("the kernel specialises on R: one binary per width")
    with tempfile.TemporaryDirectory(prefix="tempo-triton-") as cache:
        os.environ["TRITON_CACHE_DIR"] = cache
        try:
            from triton import knobs

            knobs.cache.dir = cache
        except (ImportError, AttributeError):
            pass
        t0 = time.perf_counter()
        src = ASTSource(_dispatch_count_kernel, dict(SIGNATURE), dict(VARIANTS[variant]))
        k = triton.compile(src, target=GPUTarget("cuda", arch, 32))
        seconds = time.perf_counter() - t0
        ptx = k.asm["ptx"]
        f = Path(cache) / "k.ptx"
        f.write_text(ptx)
        ptxas = ptxas_path()
        proc = subprocess.run([str(ptxas), f"-arch=sm_{arch}a", "-v", str(f), "-o", str(Path(cache) / "k.cubin")],
                              capture_output=True, text=True, timeout=600)
        info = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"ptxas failed: {info[-2000:]}")
    regs = re.search(r"Used (\d+) registers", info)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", info)
    return {"R": int(R), "variant": variant, "seconds": round(seconds, 2), "ptx_lines": len(ptx.splitlines()),
            "ptx_sha": hashlib.sha256(ptx.encode()).hexdigest()[:16],
            "registers": int(regs.group(1)) if regs else None,
            "spill_stores": int(spill.group(1)) if spill else None,
            "spill_loads": int(spill.group(2)) if spill else None}


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--R", type=int, nargs="+", default=[1, 9, 17, 33, 65, 129])
    ap.add_argument("--variants", nargs="+", default=["attention DP"], choices=list(VARIANTS))
    ap.add_argument("--arch", type=int, default=90)
    a = ap.parse_args(argv)
    if ptxas_path() is None:
        print(json.dumps({"skipped": "triton or its ptxas is not installed"}))
        return 0
    rows = [build(R, v, a.arch) for v in a.variants for R in a.R]
    print(json.dumps({"arch": a.arch, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
