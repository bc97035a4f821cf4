import pandas as pd
import pytest

from tempo.studies import cache
from tempo import studies as experiments
from tempo.core import paths


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
    for p in (tmp_path / "cache").glob(f"exp-*{cache.SUFFIX}"):
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


def test_key_is_canonical_over_arrays_and_scalars():
    import numpy as np

    a = np.zeros(5000)
    b = a.copy()
    b[2500] = 1.0  # str() of both arrays is identical ("[0. 0. 0. ... 0. 0. 0.]")
    assert str(a) == str(b)
    assert cache.key("e", {"w": a}, "v") != cache.key("e", {"w": b}, "v")
    assert cache.key("e", {"w": a}, "v") == cache.key("e", {"w": a.copy()}, "v")
    assert cache.key("e", {"w": a}, "v") != cache.key("e", {"w": a.astype(np.float32)}, "v")  # dtype
    assert cache.key("e", {"w": a}, "v") != cache.key("e", {"w": a.reshape(50, 100)}, "v")  # shape
    assert cache.key("e", {"n": np.int64(3)}, "v") == cache.key("e", {"n": 3}, "v")
    assert cache.key("e", {"n": 3}, "v") != cache.key("e", {"n": 3.0}, "v")
    assert cache.key("e", {"x": float("nan")}, "v") != cache.key("e", {"x": float("inf")}, "v")
    with pytest.raises(TypeError, match=r"config\['f'\]"):
        cache.key("e", {"f": lambda c: c}, "v")  # two lambdas would print alike


def test_cache_serves_only_what_it_wrote_and_recovers_any_entry(tmp_path, monkeypatch):
    import pickle

    monkeypatch.setattr(paths, "BUILD", tmp_path)
    calls = []

    def fn(cfg):
        calls.append(1)
        return pd.DataFrame({"v": [cfg["x"]]})

    path = tmp_path / "cache" / f"exp-{cache.key('exp', {'x': 1})}{cache.SUFFIX}"
    path.parent.mkdir(parents=True)
    for squatter in ([1, 2, 3], None, pd.Series([1.0])):  # valid pickles, not entries it wrote
        path.write_bytes(pickle.dumps(squatter))
        assert cache.cached("exp", {"x": 1}, fn).v.item() == 1
    assert len(calls) == 3
    path.write_bytes(pickle.dumps(pd.DataFrame({"v": [99]})))  # a bare DataFrame: not a marked entry
    assert cache.cached("exp", {"x": 1}, fn).v.item() == 1 and len(calls) == 4
    path.unlink()
    path.mkdir()  # a directory at the entry path
    (path / "junk").write_text("x")
    assert cache.cached("exp", {"x": 1}, fn).v.item() == 1 and path.is_file() and len(calls) == 5
    assert cache.cached("exp", {"x": 1}, fn).v.item() == 1 and len(calls) == 5  # now served
    stale = path.parent / f".{path.name}.abc.tmp"  # left by an interrupted write
    stale.write_bytes(b"half")
    import os

    os.utime(stale, (0, 0))
    cache.cached("exp", {"x": 1}, fn, refresh=True)
    assert not stale.exists()


class _Boom:
    def __reduce__(self):
        import os

        return (os.system, ("touch PLANTED",))


def test_a_planted_entry_runs_no_code(tmp_path, monkeypatch):
    """A pickle planted at an entry's path (with the right mark and key) would run code
    if the cache unpickled it.  Entries are .npz read with allow_pickle=False: the plant is
    removed and the result recomputed; nothing runs."""
    import pickle

    import numpy as np

    monkeypatch.setattr(paths, "BUILD", tmp_path)
    monkeypatch.chdir(tmp_path)
    k = cache.key("exp", {"x": 1})
    path = cache.entry_path("exp", {"x": 1})
    plants = [pickle.dumps({"mark": cache._MARK, "key": k, "df": _Boom()}),
              pickle.dumps({"mark": "tempo-cache-entry/1", "key": k, "df": _Boom()})]
    import io

    buf = io.BytesIO()  # an .npz whose column is an object array (a pickle inside the zip)
    np.savez(buf, header=np.frombuffer(json_header(k).encode(), dtype=np.uint8), c0=np.array([_Boom()], dtype=object))
    plants.append(buf.getvalue())
    for plant in plants:
        path.write_bytes(plant)
        df = cache.cached("exp", {"x": 1}, lambda cfg: pd.DataFrame({"v": [cfg["x"]]}))
        assert df.v.tolist() == [1]
        assert not (tmp_path / "PLANTED").exists()


def json_header(k):
    import json

    return json.dumps({"mark": cache._MARK, "key": k, "experiment": "exp", "rows": 1,
                       "columns": [{"name": "v", "dtype": "|O", "as": "npy"}]})


def test_entries_round_trip_exactly_or_are_not_cached(tmp_path, monkeypatch):
    import numpy as np

    monkeypatch.setattr(paths, "BUILD", tmp_path)
    df = pd.DataFrame({"a": [1, 2, 3], "b": [1.5, np.nan, 2.0], "s": ["x", None, "z"], "t": [True, False, True],
                       "o": pd.Series([[1, 2], None, "q"], dtype=object)})
    calls = []

    def fn(cfg):
        calls.append(1)
        return df
    cache.cached("rt", {}, fn)
    back = cache.cached("rt", {}, fn)
    assert len(calls) == 1
    pd.testing.assert_frame_equal(back, df, check_exact=True)
    odd = df.set_index("a")  # an index the format does not hold: returned, not cached
    assert cache.cached("odd", {}, lambda cfg: odd).equals(odd)
    assert not cache.entry_path("odd", {}).exists()
