"""Which CUDA toolkit DeepGEMM's JIT compiler will use, and pointing it at a usable one.

DeepGEMM (``sgl-deep-gemm``) compiles every kernel at first use with ``nvcc`` (paper Appendix
B calibrates with it).  ``import deep_gemm`` calls ``deep_gemm.cuda_helpers.find_cuda_home()``:
``$CUDA_HOME``, else ``$CUDA_PATH``, else the parent of the ``nvcc`` on ``PATH``, else
``/usr/local/cuda``, else it raises ``AssertionError``; the compiler is then
``<CUDA_HOME>/bin/nvcc`` (0.2.x asserts "NVCC version must be at least 12.9").  A GPU node
often has an older system toolkit in ``/usr/local/cuda`` or ``$CUDA_HOME``, which passes the
import and fails at the first kernel.

The GPU lock (``requirements-gpu.txt``, see GPU.md) installs nvcc 13.0 from pip
(``cuda-toolkit[nvcc,cccl,crt]``) under ``site-packages/nvidia/cu13`` -- a complete CUDA home
(``bin/nvcc``, ``include/``, ``nvvm/``) that nothing puts on ``PATH``.  :func:`ensure_cuda_home`
sets ``CUDA_HOME`` to it when DeepGEMM's own search would find no nvcc >= 12.9; call it before
``import deep_gemm``.  Nothing here imports torch or deep_gemm.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

MIN_NVCC = (12, 9)  # sgl-deep-gemm 0.2.x: "NVCC version must be at least 12.9"


def deep_gemm_cuda_home(environ=None, which=shutil.which, default: str = "/usr/local/cuda") -> str | None:
    """The CUDA home ``deep_gemm.cuda_helpers.find_cuda_home()`` would pick (None where it
    would raise), without importing deep_gemm."""
    environ = os.environ if environ is None else environ
    home = environ.get("CUDA_HOME") or environ.get("CUDA_PATH")
    if home:
        return home
    nvcc = which("nvcc")
    if nvcc:
        return str(Path(nvcc).parent.parent)
    return default if os.path.exists(default) else None


def nvcc_version(cuda_home) -> tuple[int, int] | None:
    """``(major, minor)`` of ``<cuda_home>/bin/nvcc --version`` ("release X.Y"), or None if there
    is no runnable nvcc there."""
    if not cuda_home:
        return None
    nvcc = Path(cuda_home) / "bin" / "nvcc"
    if not (nvcc.is_file() and os.access(nvcc, os.X_OK)):
        return None
    try:
        out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release (\d+)\.(\d+)", out.stdout)
    return (int(m.group(1)), int(m.group(2))) if out.returncode == 0 and m else None


def pip_cuda_homes() -> list[Path]:
    """CUDA homes installed by pip (``site-packages/nvidia/cu<major>`` holding ``bin/nvcc``),
    newest major first."""
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations or []) if spec else []
    homes = [d for r in roots for d in Path(r).glob("cu[0-9]*") if (d / "bin" / "nvcc").is_file()]
    return sorted(homes, key=lambda d: int(re.sub(r"\D", "", d.name) or 0), reverse=True)


def ensure_cuda_home(environ=None, candidates=None, which=shutil.which, default: str = "/usr/local/cuda") -> dict:
    """Make DeepGEMM's JIT find an nvcc >= 12.9: keep what its own search finds if that nvcc is
    new enough, else set ``environ["CUDA_HOME"]`` to the first candidate (default: the pip
    toolkits of :func:`pip_cuda_homes`) whose nvcc is.  Returns ``{"cuda_home", "nvcc",
    "source", "reason"}``; ``cuda_home`` is None (and nothing is changed) when no usable nvcc
    exists, with the reason."""
    environ = os.environ if environ is None else environ
    found = deep_gemm_cuda_home(environ, which, default)
    ver = nvcc_version(found)
    if ver is not None and ver >= MIN_NVCC:
        return {"cuda_home": found, "nvcc": "%d.%d" % ver, "source": "deep_gemm search", "reason": "ok"}
    why = (f"no CUDA home found ($CUDA_HOME, $CUDA_PATH, nvcc on PATH, {default})" if found is None else
           f"no runnable nvcc in {found}/bin" if ver is None else
           f"nvcc {ver[0]}.{ver[1]} in {found} is older than {MIN_NVCC[0]}.{MIN_NVCC[1]}")
    for cand in (pip_cuda_homes() if candidates is None else candidates):
        cv = nvcc_version(cand)
        if cv is not None and cv >= MIN_NVCC:
            environ["CUDA_HOME"] = str(cand)
            return {"cuda_home": str(cand), "nvcc": "%d.%d" % cv, "source": "pip toolkit",
                    "reason": why + f"; CUDA_HOME set to the pip toolkit {cand}"}
    return {"cuda_home": None, "nvcc": None, "source": None,
            "reason": why + "; no pip toolkit with nvcc >= 12.9 (pip install 'cuda-toolkit[nvcc,cccl,crt]==13.0.3')"}


def main(argv=None) -> int:
    """``python -m tempo.calib.cuda_env``: print the CUDA home DeepGEMM should use (after
    :func:`ensure_cuda_home`), the reason on stderr; exit 1 when there is none.  For shells and
    scripts outside tempo: ``export CUDA_HOME=$(python -m tempo.calib.cuda_env)``.  (tempo's own
    entries need nothing: they call it in-process before ``import deep_gemm``.)"""
    import sys

    r = ensure_cuda_home(dict(os.environ))
    print(r["reason"] + (f" (nvcc {r['nvcc']}, {r['source']})" if r["cuda_home"] else ""), file=sys.stderr)
    if r["cuda_home"] is None:
        return 1
    print(r["cuda_home"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
