"""This build's results (tempo.studies.results): a result's key spells its stem in one place,
and a Results object reads each file once."""
import json
from pathlib import Path

import pandas as pd
import pytest

from tempo.core import paths
from tempo.studies.results import ResultKey, Results, key_of


@pytest.mark.parametrize("key, stem", [
    (ResultKey("phase_diagram"), "phase_diagram"),
    (ResultKey("phase_diagram", "scale"), "phase_diagram-scale"),
    (ResultKey("phase_diagram", None, ("ties", "first_listed")), "phase_diagram-ties=first_listed"),
    (ResultKey("phase_diagram", "scale", ("token_lp_face", "even_spread")), "phase_diagram-scale.token_lp_face=even_spread"),
    (ResultKey("phase_diagram").under("skew_grid", "seven_skews"), "phase_diagram-skew_grid=seven_skews"),
])
def test_stems_round_trip(key, stem):
    assert key.stem == stem and ResultKey.parse(stem) == key and key_of(stem) == key
    assert key.suffix == (None if stem == key.name else stem.split("-", 1)[1])  # the tag a .meta.json records


@pytest.mark.parametrize("bad", [dict(name=""), dict(name="a-b"), dict(name="a", tag="x-y"), dict(name="a", tag="x=y"),
                                 dict(name="a", tag=""), dict(name="a", alternative=("id",)),
                                 dict(name="a", alternative=("id", "a.b"))])
def test_bad_keys_are_refused(bad):
    with pytest.raises(ValueError):
        ResultKey(**bad)


def test_a_stem_no_key_spells_is_refused():
    with pytest.raises(ValueError):
        ResultKey.parse("a-x.y.z=w=v")
    with pytest.raises(ValueError, match="profile"):
        Results("nightly")


def test_results_read_each_file_once_and_write_what_they_keep(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    res = Results("smoke")
    key = ResultKey("toy", "t")
    assert not res.exists(key) and res.meta(key) is None
    with pytest.raises(FileNotFoundError, match="toy"):
        res.load(key)
    res.write(key, pd.DataFrame({"a": [1, 2]}), {"experiment": "toy", "tag": key.suffix, "config": {"x": 1}})
    assert (tmp_path / "results" / "smoke" / "toy-t.csv").is_file()
    assert json.loads((tmp_path / "results" / "smoke" / "toy-t.meta.json").read_text())["tag"] == "t"

    fresh = Results("smoke")
    opened = []
    from tempo.studies import results as results_module

    read_json, read_regular = results_module.read_json, results_module.read_regular
    monkeypatch.setattr(results_module, "read_json", lambda path, *a, **k: opened.append(Path(path).name)
                        or read_json(path, *a, **k))
    monkeypatch.setattr(results_module, "read_regular", lambda path, *a, **k: opened.append(Path(path).name)
                        or read_regular(path, *a, **k))
    for _ in range(3):
        assert fresh.exists("toy-t") and fresh.meta(key)["config"] == {"x": 1}
        df = fresh.load(key)
        assert df.a.tolist() == [1, 2] and df.attrs["meta"]["experiment"] == "toy"
        df["a"] = 0  # a copy: the next load is unchanged
    assert sorted(opened) == ["toy-t.csv", "toy-t.meta.json"]


def test_a_csv_without_its_meta_does_not_count(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    res = Results("smoke")
    pd.DataFrame({"a": [1]}).to_csv(res.path("old"), index=False)
    res.path("bad", ".meta.json").write_text("{not json")
    pd.DataFrame({"a": [1]}).to_csv(res.path("bad"), index=False)
    assert res.has_csv("old") and not res.exists("old") and not res.exists("bad") and res.meta("bad") is None
