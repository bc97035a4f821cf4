"""The Triton dispatch-and-count kernel against the torch reference under the Triton CPU
interpreter (``TRITON_INTERPRET=1``): padding, zero rows, negative and out-of-range ids,
int32/int64 counters, NaN/negative probabilities (cases in ``tests/triton_cases.py``).

The interpreter is chosen when ``triton`` is first imported, so the cases run in a child
process with the variable set; this process never imports triton.  The same cases run on a
GPU node with ``python tests/triton_cases.py --device cuda``.
"""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from triton_cases import CASE_NAMES  # noqa: E402  (imports neither torch nor triton)

HERE = Path(__file__).parent
pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                                reason="triton is not installed (it is in requirements.txt)")


@pytest.fixture(scope="module")
def interpreted():
    env = dict(os.environ, TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run([sys.executable, str(HERE / "triton_cases.py"), "--device", "cpu"], env=env,
                          capture_output=True, text=True, timeout=600, cwd=HERE.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["interpret"] and res["device"] == "cpu"
    return res


def test_all_cases_ran(interpreted):
    assert list(interpreted["cases"]) == CASE_NAMES
    assert sum(c["pairs"] for c in interpreted["cases"].values()) > 3000


@pytest.mark.parametrize("name", CASE_NAMES)
def test_triton_matches_reference(interpreted, name):
    c = interpreted["cases"][name]
    assert c["error"] is None, c["error"]
    assert c["out_mismatch"] == 0, f"{c['out_mismatch']} of {c['pairs']} physical ids differ"
    assert c["counts_equal"], "cumulative counters (or the invalid-pair counter) differ"
    assert c["dtype_ok"], "output dtype or shape differs from the reference"

