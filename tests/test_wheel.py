"""The wheel works without the source tree: build it, install
it into a fresh virtual environment, and from a folder outside the checkout run
``python -m tempo solve``, ``CostModel.named(...)``, the SGLang plugin's default parameter
load, the paper tables and claims, and ``tempo.__version__`` from the package metadata.

The new environment gets numpy/scipy/pandas/highspy from the running one (a ``.pth`` line to
its site-packages; ``--no-deps``), so nothing is downloaded.  About 20-40 s."""
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd, cwd, env, timeout=180):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r.stdout


@pytest.mark.wheel
def test_wheel_installs_and_runs_outside_the_checkout(tmp_path):
    if not (ROOT / "pyproject.toml").is_file():
        pytest.skip("not a source checkout")
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TEMPO_ROOT", "TEMPO_DEBUG")}
    # This test is about packaging.  A fresh install location has no numba cache, and compiling the
    # solver's kernels there costs about 110 s of CPU: more than the timeout on a loaded 2-core CI
    # machine.  The compiled path is tested in the checkout (tests/test_solver.py).
    env["NUMBA_DISABLE_JIT"] = "1"
    # 1. build from a copy of the sources (an in-tree build would write build/ and *.egg-info here)
    src = tmp_path / "src"
    shutil.copytree(ROOT / "tempo", src / "tempo", ignore=shutil.ignore_patterns("__pycache__"))
    for sub in ("params", "paper", "traces"):
        shutil.copytree(ROOT / "data" / sub, src / "data" / sub)
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "dist"),
          str(src)], tmp_path, env)
    wheels = list((tmp_path / "dist").glob("tempo_book-*.whl"))
    assert len(wheels) == 1
    import zipfile

    names = zipfile.ZipFile(wheels[0]).namelist()
    assert "tempo/_data/params/cost_params.csv" in names and "tempo/_data/paper/claims.yaml" in names
    assert "tempo/_data/traces/profiles.npz" in names and "tempo/_data/traces/manifest.json" in names
    # 2. a fresh venv that sees this environment's packages but not its tempo
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], tmp_path, env)
    py = venv / "bin" / "python"
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path,
                     env).strip())
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index", "-q",
          str(wheels[0])], tmp_path, env)
    # only now the shared packages (installing after this would let pip see this environment's tempo)
    (site / "_shared_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    shutil.rmtree(src)  # no source tree left anywhere near
    run = tmp_path / "elsewhere"
    run.mkdir()
    # 3. the CLI
    out = json.loads(_run([str(py), "-m", "tempo", "solve", "--counts", "600", "30", "30", "30", "30", "30", "30",
                           "--gpus", "2", "--params", "dsv3-offline"], run, env))
    import tempo

    inst = tempo.Instance.full_replication([600, 30, 30, 30, 30, 30, 30], 2)
    model = tempo.CostModel.named("dsv3-offline")
    assert out["makespan_us"] == pytest.approx(model.makespan(inst, tempo.solve(inst, model)), rel=1e-9)
    # 4. the library: named parameters, paper data, the plugin's default parameter set, the version
    probe = textwrap.dedent("""
        import json
        import numpy as np
        import tempo
        from tempo import CostModel
        from tempo.paper import claims_file, tables
        from tempo.core import paths
        from tempo.serving.settings import ServingSettings
        from tempo.serving.solver import TableSolver

        default = ServingSettings().params  # the plugin's default parameter set (TEMPO_PARAMS unset)
        p2l = np.array([[0, 1, 2, 3, 0, 1]])
        table = TableSolver(p2l, 2, default).solve(np.array([[50, 10, 5, 1]]))
        m = CostModel.named("dsv3-offline")
        print(json.dumps({"file": tempo.__file__, "version": tempo.__version__, "params": str(paths.PARAMS),
                          "in_checkout": paths.IN_CHECKOUT, "b": m.b, "beta": m.beta, "default": default,
                          "plugin_model": str(CostModel.named(default)), "table_rows": np.asarray(table).shape[-2],
                          "n_claims": len(claims_file.claims()), "table6": tables.table(6).shape[0]}))
    """)
    res = json.loads(_run([str(py), "-c", probe], run, env))
    assert res["file"].startswith(str(venv)) and res["params"].startswith(str(venv))
    assert not res["in_checkout"] and res["version"] == version
    assert (res["b"], res["beta"]) == (model.b, model.beta)
    assert res["default"] == "proxy-serving" and "proxy-serving" in res["plugin_model"]
    assert res["table_rows"] == 4 and res["n_claims"] >= 60 and res["table6"] >= 1
    # 5. the shipped routing profiles, read from the package data
    probe = ("from tempo.world.workloads import popularity; from tempo.core import paths; "
             "print(popularity(None, 'esft-dsv2lite', layer=0).size, paths.TRACES)")
    size, where = _run([str(py), "-c", probe], run, env).split()
    assert size == "64" and where.startswith(str(venv))
