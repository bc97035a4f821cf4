#!/usr/bin/env bash
# Fill the wheel folder that scripts/gpu-node-all.sh carries to a lent GPU node (which has no
# network): run it here, on a machine that reaches PyPI, for the node image's Python version.
#   bash scripts/gpu-node-wheels.sh [WHEEL_DIR] [PYTHON_VERSION]     # default .whl 3.12
# * sgl-deep-gemm 0.2.3.post2 (the GPU lock's; loads under torch 2.14.x) and 0.1.5 (the newest that
#   loads under torch 2.10/2.11, as on the 2026-11-30 H200 image) -- gpu-node-deepgemm.sh tries
#   them newest first and keeps the first that runs one call correctly;
# * apache-tvm-ffi 0.1.11, which sgl-deep-gemm up to 0.2.2 links;
# * highspy (the CPU lock's version), which that image lacked;
# * with WITH_NUMBA=1, numba and llvmlite at the GPU lock's versions (about 60 MB: the carry holds
#   64 MiB in all, so only for an image without numba).
# About 15 MB without numba.
set -eu
dir="${1:-.whl}"
pyver="${2:-3.12}"
mkdir -p "$dir"
plat="--only-binary=:all: --python-version $pyver --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
pin() { grep -i "^$1==" "$2" | head -1; }
pkgs="sgl-deep-gemm==0.2.3.post2 sgl-deep-gemm==0.1.5 apache-tvm-ffi==0.1.11 $(pin highspy requirements.txt)"
[ "${WITH_NUMBA:-0}" = 1 ] && pkgs="$pkgs $(pin numba requirements-gpu.txt) $(pin llvmlite requirements-gpu.txt)"
for p in $pkgs; do
  python3 -m pip download -q --no-deps $plat -d "$dir" "$p"
done
ls -la "$dir"
du -sh "$dir"
