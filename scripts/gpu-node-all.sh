#!/usr/bin/env bash
# Everything this artifact checks and measures on one GPU node, in one go, on the node's own
# image: no network, nothing installed (carried wheels are unpacked with python's zipfile into
# temporary folders on PYTHONPATH).  Written for a lent H200 with 15 minutes of device time in
# all and at most 10 minutes per command:
#
#   bash scripts/gpu-node-all.sh [OUT] [WHEEL_DIR]         # OUT default $OUT, else build/gpu-node
#
# runs, until DEADLINE_S seconds after it started (default 540, so one 600 s command holds it):
#   1. deep_gemm: the node's own, else the newest carried sgl-deep-gemm wheel that runs one call
#      correctly under the node's torch (scripts/gpu-node-deepgemm.sh); log in OUT/logs;
#   2. gpu-check --record into OUT/measured/<machine>/<date>-gpu-check/ (budget CHECK_SECONDS,
#      default 420, cut to what the deadline leaves; exits 1 naming each failed section);
#   3. the Triton cases of the CI interpreter test compiled on CUDA (tests/triton_cases.py), and
#      with RUN_PYTEST=1 the GPU unit tests (needs pytest in the image);
#   4. with the time left, Appendix B calibration parts into OUT/measured/<machine>/, each
#      resumable: started only when a whole part fits (CAL_PART_S, default 390 s).  HOOK: when
#      `python -m tempo calibrate` has the readings issue's --preset (issue 24), its parts run
#      (`--preset appendix-b --part K`, K = 1, 2, ...); until then the fallback is the default
#      Appendix B grid (G 1..40 x n 1..4096 plus the tile sweep) per shape of CAL_SHAPES with
#      --max-seconds, which a rerun of the same command resumes (same --date: CAL_DATE).
# The logs are copied into the gpu-check folder.  Bring OUT/measured/<machine>/ back and copy it
# under data/measured/<machine>/ (manifests included).  To resume a calibration in a later
# session, carry the previous OUT/measured as build/gpu-node/measured: it is copied in first.
# STEPS (default check,triton,calibrate) picks steps; e.g. STEPS=calibrate for a second command.
set -u
T0=$(date +%s)
OUT="${1:-${OUT:-build/gpu-node}}"
WHEELS="${2:-.whl}"
DEADLINE_S="${DEADLINE_S:-540}"
STEPS="${STEPS:-check,triton,calibrate}"
CAL_PART_S="${CAL_PART_S:-390}"
CAL_SHAPES="${CAL_SHAPES:-dsv3 qwen3-30b}"
CAL_DATE="${CAL_DATE:-$(date +%F)}"
PY="${PYTHON:-python3}"
left() { echo $(( DEADLINE_S - ($(date +%s) - T0) )); }
has() { case ",$STEPS," in *",$1,"*) return 0;; *) return 1;; esac; }
say() { echo "[gpu-node $(( $(date +%s) - T0 ))s] $*"; }
mkdir -p "$OUT/logs" "$OUT/measured"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # tempo from this checkout (not installed on the node)
if [ -d build/gpu-node/measured ] && [ "$(cd "$OUT" && pwd)" != "$(pwd)/build/gpu-node" ]; then
  cp -rn build/gpu-node/measured/. "$OUT/measured/" && say "carried partial recordings copied in"
fi
# carried wheels other than DeepGEMM's (e.g. highspy, which a node image may lack): unpacked onto PYTHONPATH
extra=$(ls "$WHEELS"/*.whl 2>/dev/null | grep -v -e sgl_deep_gemm -e apache_tvm_ffi)
if [ -n "$extra" ]; then
  extra_dir=$(mktemp -d)
  for w in $extra; do "$PY" -m zipfile -e "$w" "$extra_dir" >/dev/null 2>&1 || say "could not unpack $w"; done
  export PYTHONPATH="$extra_dir:$PYTHONPATH"
fi
"$PY" -c "import torch, triton, numpy, scipy, pandas, highspy; print('node image: python', __import__('sys').version.split()[0],
      'torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.cuda.is_available())" 2>&1 | tail -1

# 1. deep_gemm
source scripts/gpu-node-deepgemm.sh "$WHEELS" > "$OUT/logs/deep_gemm_probe.log" 2>&1
say "$(tail -1 "$OUT/logs/deep_gemm_probe.log")"

# 2. gpu-check --record
check_rc=skipped
if has check; then
  budget=$(( $(left) - 75 ))
  [ "$budget" -gt "${CHECK_SECONDS:-420}" ] && budget="${CHECK_SECONDS:-420}"
  if [ "$budget" -ge 120 ]; then
    say "gpu-check --record, budget ${budget} s"
    timeout $(( $(left) - 15 )) "$PY" -m tempo gpu-check --record --out "$OUT/measured" --budget-s "$budget" \
      > "$OUT/logs/gpu-check.log" 2>&1
    check_rc=$?
    say "gpu-check rc=$check_rc"
  else
    say "gpu-check skipped: $(left) s left"
  fi
fi

# 3. Triton cases on CUDA; GPU unit tests
if has triton && [ "$(left)" -gt 60 ]; then
  timeout $(( $(left) - 10 )) "$PY" tests/triton_cases.py --device cuda > "$OUT/logs/triton_cases_cuda.json" \
    2> "$OUT/logs/triton_cases_cuda.err"
  say "triton cases rc=$? $("$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); c=r['cases']; \
print(f\"{sum(v['ok'] for v in c.values())}/{len(c)} exact ({r['triton']})\")" "$OUT/logs/triton_cases_cuda.json" 2>/dev/null)"
fi
if [ "${RUN_PYTEST:-0}" = 1 ] && [ "$(left)" -gt 90 ]; then
  timeout $(( $(left) - 10 )) "$PY" -m pytest -q -p no:cacheprovider tests/test_serving.py -k triton \
    tests/test_gpu_paths.py tests/test_backend_interface.py > "$OUT/logs/pytest_gpu.log" 2>&1
  say "pytest rc=$? $(tail -1 "$OUT/logs/pytest_gpu.log")"
fi

# 4. Appendix B calibration parts, while a whole part fits
if has calibrate; then
  if "$PY" -m tempo calibrate --help 2>/dev/null | grep -q -- '--preset'; then
    # HOOK (issue 24): the Appendix B preset, split into parts of <= 6 min that resume one another
    k=1
    while [ "$(left)" -ge "$CAL_PART_S" ]; do
      say "calibrate --preset appendix-b --part $k"
      timeout $(( $(left) - 10 )) "$PY" -m tempo calibrate --preset "${CAL_PRESET:-appendix-b}" --part "$k" \
        --out "$OUT/measured" > "$OUT/logs/calibrate-part$k.log" 2>&1
      rc=$?; say "part $k rc=$rc $(tail -1 "$OUT/logs/calibrate-part$k.log")"
      [ "$rc" = 0 ] || break
      k=$((k + 1))
    done
  else
    # fallback until the preset lands: the default Appendix B grid per shape, --max-seconds, resumable
    for s in $CAL_SHAPES; do
      [ "$(left)" -ge 90 ] || break
      secs=$(( $(left) - 60 )); [ "$secs" -gt "$CAL_PART_S" ] && secs=$CAL_PART_S
      say "calibrate deep_gemm $s, at most ${secs} s (resumable: same command, CAL_DATE=$CAL_DATE)"
      timeout $(( $(left) - 10 )) "$PY" -m tempo calibrate --backend deep_gemm --shape "$s" --max-seconds "$secs" \
        --date "$CAL_DATE" --out "$OUT/measured" > "$OUT/logs/calibrate-$s.log" 2>&1
      say "calibrate $s rc=$? $(grep -E '^wrote|Error|error' "$OUT/logs/calibrate-$s.log" | tail -1)"
    done
  fi
fi

# logs beside the check they belong to; the summary
chk=$(ls -d "$OUT"/measured/*/*-gpu-check* 2>/dev/null | sort | tail -1)
if [ -n "$chk" ]; then
  for f in "$OUT"/logs/*; do [ -s "$f" ] && gzip -c "$f" > "$chk/$(basename "$f").gz"; done
  say "check folder: $chk"
  grep -v "^  " "$OUT/logs/gpu-check.log" 2>/dev/null | grep -E "^(- |Failed sections|Sections|gpu-check FAILED|flags)" | tail -40
fi
say "done (gpu-check rc=$check_rc); bring back $OUT/measured"
