#!/usr/bin/env bash
# Make `import deep_gemm` work on a GPU node whose Python lacks it (or has a build for another
# torch), from a folder of candidate wheels, without touching the node's environment:
#   source scripts/gpu-node-deepgemm.sh WHEEL_DIR
# Each sgl-deep-gemm wheel is built against one torch version (its _C.so links libtorch), so
# the candidates (sgl_deep_gemm-*.whl, each alone and with every apache_tvm_ffi-*.whl beside it:
# sgl-deep-gemm up to 0.2.2 links libtvm_ffi, later ones do not) are tried newest
# first, each unpacked into a fresh temporary folder (mktemp -d) and imported in a fresh interpreter; the
# first that imports and lays out one scale tensor correctly (a build against another torch
# can import yet misread tensors) is put on PYTHONPATH; gpu-check then checks its GEMMs against fp32.  Prints what it
# tried and why each failed.  Leaves PYTHONPATH alone when the node's own deep_gemm works.
dir="${1:-.whl}"
py="${PYTHON:-python3}"
probe='import torch
from tempo.calib.backends import backend_status, import_deep_gemm, mn_major_tma_aligned
ok, why = backend_status()["deep_gemm"]; assert ok, why  # imports deep_gemm with CUDA_HOME set up first
deep_gemm = import_deep_gemm()
# a build against another torch can import yet misread every tensor (ABI): call it once
sf = torch.rand(2, 130, 3, device="cuda")
got = deep_gemm.get_mn_major_tma_aligned_tensor(sf)
want = mn_major_tma_aligned(sf)
assert torch.equal(got, want) and got.stride() == want.stride(), (got.stride(), want.stride())
print("deep_gemm", getattr(deep_gemm, "__version__", "?"), "works under torch", torch.__version__)'
probe="${DG_PROBE:-$probe}"  # tests replace the probe (no GPU there)
if "$py" -c "$probe" 2>/dev/null; then return 0 2>/dev/null || exit 0; fi
for w in $(ls "$dir"/sgl_deep_gemm-*.whl 2>/dev/null | sort -V -r); do
  v=$(basename "$w" | cut -d- -f2)
  for t in none $(ls "$dir"/apache_tvm_ffi-*.whl 2>/dev/null | sort -V -r); do
    target="$(mktemp -d)/deep_gemm-$v-$(basename "$t" | cut -d- -f2)"
    extra=$([ "$t" = none ] || echo "$t")
    mkdir -p "$target"  # a wheel is a zip: unpacking it needs neither pip nor a network
    for x in "$w" $extra; do "$py" -m zipfile -e "$x" "$target" >/dev/null 2>&1 || continue 2; done
    if err=$(PYTHONPATH="$target${PYTHONPATH:+:$PYTHONPATH}" "$py" -c "$probe" 2>&1); then
      export PYTHONPATH="$target${PYTHONPATH:+:$PYTHONPATH}"
      echo "[deep_gemm] using sgl-deep-gemm $v (unpacked to $(basename "$target")): $(echo "$err" | tail -1)"
      return 0 2>/dev/null || exit 0
    fi
    echo "[deep_gemm] sgl-deep-gemm $v + $(basename "$t" | cut -d- -f1-2): $(echo "$err" | tail -1 | cut -c1-200)"
  done
done
echo "[deep_gemm] no candidate imports here; gpu-check reports deep_gemm as unavailable"
