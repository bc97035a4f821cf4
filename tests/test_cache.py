import pandas as pd
import pytest

from tempo import cache, experiments, paths


def test_cached_is_keyed_by_config_and_atomic(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    calls = []

    def fn(cfg):
        calls.append(cfg)
        return pd.DataFrame({"v": [cfg["x"]]})

    a = cache.cached("exp", {"x": 1}, fn)
    b = cache.cached("exp", {"x": 1}, fn)
    c = cache.cached("exp", {"x": 2}, fn)
    assert len(calls) == 2 and a.equals(b) and c.v.item() == 2
    assert not list((tmp_path / "cache").glob(".*.tmp"))  # no temp files left behind
    # a corrupt entry is recomputed, not trusted
    for p in (tmp_path / "cache").glob("exp-*.pkl"):
        p.write_bytes(b"garbage")
    cache.cached("exp", {"x": 1}, fn)
    assert len(calls) == 3
    with pytest.raises(TypeError, match="DataFrame"):
        cache.cached("bad", {}, lambda cfg: [1, 2])


def test_key_changes_with_version():
    assert cache.key("e", {"a": 1}, "0.1") != cache.key("e", {"a": 1}, "0.2")
    assert cache.key("e", {"a": 1, "b": 2}, "0.1") == cache.key("e", {"b": 2, "a": 1}, "0.1")


def test_experiment_run_writes_tidy_csv(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    df = experiments.run("toy_dispatch", {"b": 15.0, "beta": 0.1}, "smoke")
    ms = df.groupby("policy").makespan_us.first()
    assert ms.to_dict() == pytest.approx({"token_lp": 105.0, "metro": 69.0, "tempo": 60.0})
    assert (tmp_path / "results" / "smoke" / "toy_dispatch.csv").exists()
    assert experiments.load("toy_dispatch", "smoke").shape == df.shape
    # a second run of the same experiment in one notebook keeps its own file
    other = experiments.run("toy_dispatch", {"b": 0.0, "beta": 0.1}, "smoke", tag="flat")
    assert (tmp_path / "results" / "smoke" / "toy_dispatch-flat.csv").exists()
    assert experiments.load("toy_dispatch", "smoke", tag="flat").makespan_us.tolist() == other.makespan_us.tolist()
    assert experiments.load("toy_dispatch", "smoke").makespan_us.tolist() == df.makespan_us.tolist()
    with pytest.raises(ValueError, match="unknown experiment"):
        experiments.run("nope", {}, "smoke")
    with pytest.raises(ValueError, match="profile"):
        experiments.run("toy_dispatch", {"b": 1.0, "beta": 0.1}, "huge")
