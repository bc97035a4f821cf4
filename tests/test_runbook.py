"""The notebook runner: a failing notebook names itself and keeps its partial output."""
import textwrap

import pytest

from tempo.core import paths
from tempo.book import runbook

NB = textwrap.dedent('''\
    ---
    jupytext:
      text_representation:
        extension: .md
        format_name: myst
    kernelspec:
      display_name: Python 3
      language: python
      name: python3
    ---
    # t
    ```{code-cell} ipython3
    :tags: [parameters]
    profile = "full"
    ```
    ```{code-cell} ipython3
    assert profile == "smoke", profile
    raise RuntimeError("boom in cell two")
    ```
    ''')


@pytest.mark.needs('papermill', 'jupytext')
def test_failing_notebook_reports_and_keeps_partial(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(paths, "NOTEBOOKS", tmp_path / "nb")
    monkeypatch.setattr(paths, "BUILD", tmp_path / "build")
    (tmp_path / "nb").mkdir()
    (tmp_path / "nb" / "50_fail.md").write_text(NB)
    rc = runbook.run("50_fail", "smoke", progress=False)
    err = capsys.readouterr().err
    assert rc == 1
    assert "notebook 50_fail failed" in err and "boom in cell two" in err
    assert (tmp_path / "build" / "executed" / "smoke" / "50_fail.partial.ipynb").exists()
    assert not (tmp_path / "build" / "executed" / "smoke" / "50_fail.ipynb").exists()
    assert runbook.run("99_missing", "smoke") == 2
    assert runbook.run("50_fail", "huge") == 2


@pytest.mark.needs('papermill', 'jupytext')
def test_executed_notebook_hides_the_injected_parameters(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "NOTEBOOKS", tmp_path / "nb")
    monkeypatch.setattr(paths, "BUILD", tmp_path / "build")
    (tmp_path / "nb").mkdir()
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    (tmp_path / "nb" / "51_ok.md").write_text(NB.split("```{code-cell} ipython3\nassert")[0])
    assert runbook.run("51_ok", "smoke", progress=False) == 0
    import nbformat

    nb = nbformat.read(str(tmp_path / "build" / "executed" / "smoke" / "51_ok.ipynb"), as_version=4)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and all("remove-cell" in c.metadata["tags"] for c in injected)
    assert 'profile = "smoke"' in injected[0].source


OK_NB = NB.replace('assert profile == "smoke", profile\nraise RuntimeError("boom in cell two")',
                   'import sys\nprint("cells done 3/3", file=sys.stderr)')


@pytest.mark.needs('papermill', 'jupytext')
def test_a_run_names_the_notebook_and_forwards_the_kernels_stderr(tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(paths, "NOTEBOOKS", tmp_path / "nb")
    monkeypatch.setattr(paths, "BUILD", tmp_path / "build")
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    (tmp_path / "nb").mkdir()
    (tmp_path / "nb" / "51_ok.md").write_text(OK_NB)
    assert runbook.run("51_ok", "smoke", progress=True) == 0
    out, err = capfd.readouterr()
    assert out.startswith('notebook 1/1 51_ok: chapter 51, "t" (profile smoke)\n')
    assert "51_ok: executed in " in out and "cells done 3/3" in err
    assert "without encryption" not in out + err  # the kernel talks over local sockets
    assert (tmp_path / "build" / "executed" / "smoke" / "51_ok.ipynb").is_file()
