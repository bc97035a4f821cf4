"""tempo.calib.cuda_env: the CUDA home DeepGEMM's JIT will use, with fake nvcc executables."""
import os
import sys

import pytest

from tempo.calib.cuda_env import deep_gemm_cuda_home, ensure_cuda_home, nvcc_version, pip_cuda_homes

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fake nvcc is a shell script")


def fake_home(root, release, ok=True):
    """A CUDA home whose bin/nvcc prints ``release X.Y`` like the real one (exit 1 if not ok)."""
    b = root / "bin"
    b.mkdir(parents=True)
    nvcc = b / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
                    f"echo 'Cuda compilation tools, release {release}, V{release}.88'\nexit {0 if ok else 1}\n")
    nvcc.chmod(0o755)
    return root


def no_nvcc_on_path(_):
    return None


def test_search_order_matches_deep_gemm(tmp_path):
    a, b = fake_home(tmp_path / "a", "12.4"), fake_home(tmp_path / "b", "13.0")
    assert deep_gemm_cuda_home({"CUDA_HOME": str(a), "CUDA_PATH": str(b)}) == str(a)
    assert deep_gemm_cuda_home({"CUDA_PATH": str(b)}) == str(b)
    assert deep_gemm_cuda_home({}, which=lambda _: str(b / "bin" / "nvcc")) == str(b)
    assert deep_gemm_cuda_home({}, which=no_nvcc_on_path, default=str(a)) == str(a)
    assert deep_gemm_cuda_home({}, which=no_nvcc_on_path, default=str(tmp_path / "none")) is None


def test_nvcc_version(tmp_path):
    assert nvcc_version(fake_home(tmp_path / "x", "13.0")) == (13, 0)
    assert nvcc_version(fake_home(tmp_path / "y", "12.10")) == (12, 10)
    assert nvcc_version(fake_home(tmp_path / "z", "13.0", ok=False)) is None
    assert nvcc_version(tmp_path / "missing") is None and nvcc_version(None) is None


def test_old_system_toolkit_is_replaced_by_the_pip_one(tmp_path):
    old, new = fake_home(tmp_path / "usr-cuda-12.4", "12.4"), fake_home(tmp_path / "cu13", "13.0")
    env = {"CUDA_HOME": str(old)}
    r = ensure_cuda_home(env, candidates=[new], which=no_nvcc_on_path)
    assert env["CUDA_HOME"] == str(new) and r["cuda_home"] == str(new) and r["nvcc"] == "13.0"
    assert "12.4" in r["reason"] and "older than 12.9" in r["reason"] and r["source"] == "pip toolkit"


def test_good_toolkit_is_kept(tmp_path):
    good, new = fake_home(tmp_path / "cuda-12.9", "12.9"), fake_home(tmp_path / "cu13", "13.0")
    env = {}
    r = ensure_cuda_home(env, candidates=[new], which=lambda _: str(good / "bin" / "nvcc"))
    assert env == {} and r == {"cuda_home": str(good), "nvcc": "12.9", "source": "deep_gemm search", "reason": "ok"}


def test_nothing_usable_changes_nothing(tmp_path):
    old = fake_home(tmp_path / "old", "12.4")
    env = {}
    r = ensure_cuda_home(env, candidates=[old, tmp_path / "missing"], which=no_nvcc_on_path,
                         default=str(tmp_path / "none"))
    assert env == {} and r["cuda_home"] is None and "no CUDA home found" in r["reason"]
    broken = fake_home(tmp_path / "broken", "13.0", ok=False)
    r = ensure_cuda_home({"CUDA_HOME": str(broken)}, candidates=[], which=no_nvcc_on_path)
    assert r["cuda_home"] is None and "no runnable nvcc" in r["reason"]


def test_pip_cuda_homes_finds_the_nvidia_namespace(tmp_path, monkeypatch):
    site = tmp_path / "site"
    fake_home(site / "nvidia" / "cu13", "13.0")
    fake_home(site / "nvidia" / "cu12", "12.9")
    (site / "nvidia" / "cudnn").mkdir()
    monkeypatch.syspath_prepend(str(site))
    for mod in [m for m in sys.modules if m == "nvidia" or m.startswith("nvidia.")]:
        monkeypatch.delitem(sys.modules, mod)
    homes = pip_cuda_homes()
    assert [h.name for h in homes if str(h).startswith(str(site))] == ["cu13", "cu12"]
    env = {}
    r = ensure_cuda_home(env, which=no_nvcc_on_path, default=str(tmp_path / "none"))
    assert env["CUDA_HOME"] == str(site / "nvidia" / "cu13") and r["nvcc"] == "13.0"
    assert os.path.isfile(os.path.join(env["CUDA_HOME"], "bin", "nvcc"))


FAKE_DEEP_GEMM = '''
import os, subprocess
# deep_gemm's own search at import (sgl-deep-gemm find_cuda_home / upstream _find_cuda_home)
home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
if home is None:
    try:
        nvcc = subprocess.check_output(["which", "nvcc"], stderr=subprocess.DEVNULL).decode().strip()
        home = os.path.dirname(os.path.dirname(nvcc))
    except Exception:
        home = "/usr/local/cuda" if os.path.exists("/usr/local/cuda") else None
assert home is not None
FOUND_AT_IMPORT = home
def m_grouped_fp8_gemm_nt_masked(*args):
    pass
'''


def test_import_deep_gemm_points_it_at_the_pip_toolkit_in_process(tmp_path):
    """CUDA_HOME unset, an nvcc 12.4 first on PATH (a node image's old toolkit), the GPU lock's
    pip toolkit under site-packages/nvidia/cu13: tempo's import of deep_gemm makes deep_gemm
    find the pip toolkit, in the importing process (no shell step)."""
    import json
    import subprocess

    site = tmp_path / "site"
    fake_home(site / "nvidia" / "cu13", "13.0")
    (site / "deep_gemm").mkdir(parents=True)
    (site / "deep_gemm" / "__init__.py").write_text(FAKE_DEEP_GEMM)
    old = fake_home(tmp_path / "old-cuda", "12.4")
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = f"{old / 'bin'}:/usr/bin:/bin"
    env["PYTHONPATH"] = os.pathsep.join([str(site), os.getcwd()])
    code = ("import json, os\nfrom tempo.calib.backends import import_deep_gemm, cuda_home_setup\n"
            "assert 'CUDA_HOME' not in os.environ\n"
            "dg = import_deep_gemm()\n"
            "print(json.dumps({'found': dg.FOUND_AT_IMPORT, 'env': os.environ.get('CUDA_HOME'), "
            "'setup': cuda_home_setup()}))\n")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    want = str(site / "nvidia" / "cu13")
    assert out["found"] == out["env"] == want
    assert out["setup"]["source"] == "pip toolkit" and "12.4" in out["setup"]["reason"]
    # without tempo's step, the same import finds the older toolkit
    r = subprocess.run([sys.executable, "-c", "import deep_gemm; print(deep_gemm.FOUND_AT_IMPORT)"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == str(old)
    # the shell form for scripts outside tempo
    r = subprocess.run([sys.executable, "-m", "tempo.calib.cuda_env"], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == want and "older than 12.9" in r.stderr


def test_deep_gemm_is_imported_only_through_import_deep_gemm():
    """Every entry that uses DeepGEMM gets its CUDA home set first: no other ``import deep_gemm``
    in tempo/ (read with ast: top-level and inside functions)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "tempo"
    found = []
    for py in root.rglob("*.py"):
        for node in ast.walk(ast.parse(py.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n == "deep_gemm" or n.startswith("deep_gemm.") for n in names):
                found.append(f"{py.relative_to(root.parent)}:{node.lineno}")
    assert found == ["tempo/calib/backends.py:" + str(_import_line(root / "calib" / "backends.py"))], found


def _import_line(path) -> int:
    lines = path.read_text().splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("def import_deep_gemm"))
    return next(i for i in range(start, len(lines)) if lines[i].strip() == "import deep_gemm") + 1
