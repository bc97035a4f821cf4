#!/usr/bin/env bash
# Everything this artifact checks and measures on one GPU node, in one go (about 8 minutes on
# one H200), writing every result under OUT (default build/gpu-node).  Knobs: CHECK_SECTIONS,
# CHECK_SECONDS (gpu-check), CAL_SECONDS and CAL_G (the calibration), RUN_PYTEST=0 (skip the unit tests):
#   bash scripts/gpu-node-all.sh [OUT] [WHEEL_DIR]
# 1. deep_gemm: the node's own, else a carried sgl-deep-gemm wheel that works under its torch
#    (scripts/gpu-node-deepgemm.sh);
# 2. make gpu-check (environment, Triton vs reference, numerics, timer bias, short grids,
#    epbench --emulate) into OUT/run;
# 3. the Triton cases of the CI interpreter test, compiled on CUDA (tests/triton_cases.py), and
#    the GPU-only unit tests;
# 4. a longer DeepGEMM calibration of DSv3 with the tile sweep (Fig. 4, Table 6), stopped by
#    --max-seconds and resumable with the same command.
# Then `tar czf` OUT/run into OUT/gpu-node.tgz; unpack it under data/measured/<machine>/.
set -u
OUT="${1:-build/gpu-node}"
WHEELS="${2:-.whl}"
CAL_SECONDS="${CAL_SECONDS:-150}"   # CHECK_SECONDS, CHECK_SECTIONS: gpu-check's budget and sections
mkdir -p "$OUT/run"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # tests/triton_cases.py imports tempo from here
# other carried wheels (e.g. highspy, which the node's image may lack) go on PYTHONPATH too
extra=$(ls "$WHEELS"/*.whl 2>/dev/null | grep -v -e sgl_deep_gemm -e apache_tvm_ffi)
if [ -n "$extra" ]; then
  extra_dir=$(mktemp -d)
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$extra_dir" $extra >/dev/null 2>&1 \
    && export PYTHONPATH="$extra_dir${PYTHONPATH:+:$PYTHONPATH}"
fi
source scripts/gpu-node-deepgemm.sh "$WHEELS" > "$OUT/run/deep_gemm_probe.log" 2>&1
tail -1 "$OUT/run/deep_gemm_probe.log"
ARGS="--out $OUT/run --budget-s ${CHECK_SECONDS:-300} --sections ${CHECK_SECTIONS:-env,triton,numerics,timer,grids,epbench}"
if command -v make >/dev/null; then
  make --no-print-directory gpu-check GPU_CHECK_ARGS="$ARGS" > "$OUT/run/gpu-check.log" 2>&1
else
  python3 -m tempo gpu-check $ARGS > "$OUT/run/gpu-check.log" 2>&1
fi
echo "gpu-check rc=$?"
python3 tests/triton_cases.py --device cuda > "$OUT/run/triton_cases_cuda.json" 2> "$OUT/run/triton_cases_cuda.err"
echo "triton cases rc=$?"; python3 -c "import json,sys; r=json.load(open(sys.argv[1])); c=r['cases']; \
print(f\"triton cases on CUDA: {sum(v['ok'] for v in c.values())}/{len(c)} exact ({r['triton']})\")" \
  "$OUT/run/triton_cases_cuda.json" 2>/dev/null
if [ "${RUN_PYTEST:-1}" = 1 ]; then
  python3 -m pytest -q -p no:cacheprovider tests/test_serving.py -k triton tests/test_gpu_paths.py \
    > "$OUT/run/pytest_gpu.log" 2>&1; echo "pytest rc=$?"; tail -1 "$OUT/run/pytest_gpu.log"
fi
python3 -m tempo calibrate --backend deep_gemm --shape dsv3 --G ${CAL_G:-1 4 8 13 20} --max-seconds "$CAL_SECONDS" \
  --out "$OUT/cal" > "$OUT/run/calibrate.log" 2>&1; echo "calibrate rc=$?"; tail -8 "$OUT/run/calibrate.log"
cp -r "$OUT"/cal/*/* "$OUT/run/" 2>/dev/null
tar czf "$OUT/gpu-node.tgz" -C "$OUT" run
grep -v "^  " "$OUT/run/gpu-check.log" | tail -25
