"""The prepared GPU-node scripts, on CPU: syntax, and the DeepGEMM wheel probe choosing the newest
carried wheel that works (fake wheels, a probe that needs no GPU); the whole node script runs to
its end on a machine without a GPU, each step reporting why it could not run."""
import os
import subprocess
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("script", ["gpu-node-all.sh", "gpu-node-deepgemm.sh", "gpu-node-wheels.sh"])
def test_scripts_parse(script):
    assert subprocess.run(["bash", "-n", str(ROOT / "scripts" / script)]).returncode == 0


def _wheel(d: Path, name: str, files: dict) -> None:
    with zipfile.ZipFile(d / name, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)


def test_deep_gemm_probe_takes_the_newest_wheel_that_works(tmp_path):
    whl = tmp_path / "whl"
    whl.mkdir()
    # 0.2.5: built against another torch (the import fails); 0.2.0: imports but needs tvm-ffi to work;
    # 0.1.5: works alone
    _wheel(whl, "sgl_deep_gemm-0.2.5-py3-none-manylinux2014_x86_64.whl",
           {"deep_gemm/__init__.py": "raise OSError('undefined symbol: _ZN3c104cuda')\n"})
    _wheel(whl, "sgl_deep_gemm-0.2.0-py3-none-manylinux2014_x86_64.whl",
           {"deep_gemm/__init__.py": "import tvm_ffi\nWORKS = tvm_ffi.OK\n__version__ = '0.2.0'\n"})
    _wheel(whl, "apache_tvm_ffi-0.1.11-cp311-cp311-manylinux_2_28_x86_64.whl", {"tvm_ffi/__init__.py": "OK = True\n"})
    _wheel(whl, "sgl_deep_gemm-0.1.5-py3-none-manylinux2014_x86_64.whl",
           {"deep_gemm/__init__.py": "WORKS = True\n__version__ = '0.1.5'\n"})
    probe = "import deep_gemm; assert deep_gemm.WORKS; print('deep_gemm', deep_gemm.__version__, 'works')"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["DG_PROBE"] = probe
    r = subprocess.run(["bash", "-c", f"source scripts/gpu-node-deepgemm.sh {whl}; echo PYTHONPATH=$PYTHONPATH"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("[deep_gemm] sgl-deep-gemm 0.2.5") and "undefined symbol" in lines[0]
    assert any("using sgl-deep-gemm 0.2.0" in x and "works" in x for x in lines)  # with tvm-ffi beside it
    pp = lines[-1].removeprefix("PYTHONPATH=").split(":")[0]
    assert (Path(pp) / "deep_gemm" / "__init__.py").read_text().startswith("import tvm_ffi")
    assert (Path(pp) / "tvm_ffi" / "__init__.py").is_file()


def test_node_script_runs_to_its_end_without_a_gpu(tmp_path):
    import sys

    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the script would measure")
    env = dict(os.environ, PYTHON=sys.executable, DEADLINE_S="1500")  # room under load
    env.pop("OUT", None)
    r = subprocess.run(["bash", "scripts/gpu-node-all.sh", str(tmp_path / "out"), str(tmp_path / "no-wheels")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    assert "gpu-check rc=1" in out and "no candidate imports here" in out
    assert "calibrate --preset appendix-b --part 1" in out  # the Appendix B preset's first part
    assert "part 1 rc=1" in out and "needs backends that cannot run here: deep_gemm" in out
    assert "done (gpu-check rc=1)" in out
    log = (tmp_path / "out" / "logs" / "gpu-check.log").read_text()
    assert "needs a CUDA GPU" in log
