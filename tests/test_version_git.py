"""Provenance names the git commit: tempo.core.version.git_commit, and the results'
meta files that carry it."""
import json
import subprocess

import pytest

from tempo.core.version import git_commit


def run(*args, cwd):
    subprocess.run(args, cwd=cwd, check=True, capture_output=True)


@pytest.mark.skipif(subprocess.run(["git", "--version"], capture_output=True).returncode != 0, reason="no git")
def test_git_commit_clean_dirty_and_outside(tmp_path):
    assert git_commit(tmp_path) is None                                   # not a checkout
    repo = tmp_path / "repo"
    repo.mkdir()
    run("git", "init", "-q", cwd=repo)
    (repo / "a.txt").write_text("1")
    run("git", "add", "a.txt", cwd=repo)
    run("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x", cwd=repo)
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    assert git_commit(repo) == head and len(head) == 12
    (repo / "untracked.txt").write_text("u")                              # untracked files do not make it dirty
    assert git_commit(repo) == head
    (repo / "a.txt").write_text("2")
    assert git_commit(repo) == head + "-dirty"
    sub = repo / "sub"
    sub.mkdir()
    assert git_commit(sub) is None                                        # a folder inside a checkout is not its root


def test_results_meta_carry_the_git_commit(tmp_path, monkeypatch):
    from tempo import studies as experiments
    from tempo.core import paths

    monkeypatch.setattr(paths, "BUILD", tmp_path)
    experiments.run("toy_dispatch", {"b": 15.0, "beta": 0.1}, "smoke")
    meta = json.loads((paths.results_dir("smoke") / "toy_dispatch.meta.json").read_text())
    assert "git_commit" in meta and meta["git_commit"] == git_commit()
    assert "code_version" in meta                                         # the source hash stays beside it
