"""The ledger's categories (values shown beside their claim and counted apart, never verdicts):
machine figures (a time on this build's machine), values that are not computable (NaN, inf),
and recordings whose data a claim function cannot read (skipped with a warning, never a stop)."""
from __future__ import annotations

import json
import warnings

import pandas as pd
import pytest

from tempo.book import claims
from tempo.book.claims import ledger as led
from tempo.book.claims.registry import CATEGORIES, CATEGORY, REGISTRY, STATUS_COLORS, Spec, Value
from tempo.core import paths


@pytest.fixture
def put(tmp_path, monkeypatch):
    """An empty build/ and data/measured for one test; ``put(stem, df, meta)`` writes a result."""
    monkeypatch.setattr(paths, "BUILD", tmp_path / "build")
    from tempo.measured import store

    monkeypatch.setattr(store, "ROOT", tmp_path / "measured")

    def _put(stem, df, **meta):
        d = paths.results_dir("smoke")
        df.to_csv(d / f"{stem}.csv", index=False)
        (d / f"{stem}.meta.json").write_text(json.dumps({"experiment": stem, "config": {}, "profile": "smoke",
                                                         "code_version": "t", "written_utc": "2026-01-01T00:00:00Z",
                                                         **meta}))
    return _put


def _row(cid, paper=1.9, **kw):
    return {"id": cid, "paper": paper, "paper_text": str(paper), "unit": "ms", "needs": None, "chapter": "03", **kw}


def test_every_category_is_one_entry_with_its_colours_and_counted_apart():
    for c in CATEGORIES:
        assert c.status in claims.STATUSES and c.status not in claims.VERDICTS and c.status in STATUS_COLORS
    df = pd.DataFrame({"id": list("abcd"), "status": ["machine figure", "machine figure", "not computable", "deviates"]})
    c = claims.counts(df)
    assert (c["machine figure"], c["not computable"], c["deviates"], c["reproduced"]) == (2, 1, 1, 0)
    text = claims.summary_markdown(df, "smoke")
    assert "2 machine figures" in text and "1 not computable" in text and "1 deviate" in text
    assert claims.verdict_moves("machine figure", "deviates") and not claims.verdict_moves("machine figure", "needs a GPU")


def test_a_time_on_this_machine_is_a_machine_figure_named_with_the_machine(put, monkeypatch):
    put("timing", pd.DataFrame({"ms": [3.0]}), machine="Test CPU, 2 CPUs, Python 3.11")
    # 1.9 ms within the claim's factor 2 would have "reproduced": a machine figure is never a verdict
    monkeypatch.setitem(REGISTRY, "x_time", Spec(("timing",), lambda f: float(f["timing"].ms[0]), "machine", "test"))
    e = led.evaluate(_row("x_time", tol=2, tol_kind="factor", tol_why="t"), "smoke")
    assert e["status"] == "machine figure" and e["ours"] == 3.0
    assert "Test CPU, 2 CPUs" in e["note"] and e["note"].startswith("a machine figure, not a verdict")
    monkeypatch.setitem(REGISTRY, "x_time", Spec(("timing",), lambda f: 300.0, "machine", "test"))
    assert led.evaluate(_row("x_time", tol=2, tol_kind="factor", tol_why="t"), "smoke")["status"] == "machine figure"


def test_the_papers_solve_time_claims_are_machine_figures():
    for cid in ("solver_time_small_b", "solver_speedup"):
        assert REGISTRY[cid].evidence == "machine"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), (1.0, float("nan"))])
def test_nan_or_inf_is_not_computable_never_a_deviation(put, monkeypatch, bad):
    put("t", pd.DataFrame({"x": [0.0]}))
    monkeypatch.setitem(REGISTRY, "x_bad", Spec(("t",), lambda f: Value(bad, note="from t"), "model", "test"))
    e = led.evaluate(_row("x_bad", paper=5.0), "smoke")
    assert e["status"] == "not computable" and "no finite number" in e["note"] and "from t" in e["note"]
    assert e["status"] not in claims.VERDICTS


def test_a_value_may_name_its_category():
    v = Value(1.0, category="machine figure", why="a time")
    assert (v.category, v.why) == ("machine figure", "a time")
    assert Value(1.0, stand_in="a partial grid").category == "stand-in"
    with pytest.raises(ValueError, match="category"):
        Value(1.0, category="maybe")


EP8 = "python -m tempo epbench --device cuda --world-size 8 --shape dsv3 --tokens 32 --steps 10"


def _epbench(path, layer):
    rows = [{"step": s, "policy": p, "order": i, "layer_us": t, "expert_us": 0.8 * t, "model_us": t,
             "kernel": "deep_gemm_fp8_masked", "order_seed": 0}
            for s in range(10) for i, (p, t) in enumerate(layer.items())]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_a_recording_a_claim_cannot_read_is_skipped_with_a_warning_naming_it(put, tmp_path, monkeypatch):
    from tempo.book import ingest
    from tempo.measured import catalog

    old, _ = ingest.ingest(_epbench(tmp_path / "a.csv", {"uniform": 100.0, "tempo": 88.0}), machine="m", date="2026-11-01",
                        command=EP8)
    new, _ = ingest.ingest(_epbench(tmp_path / "b.csv", {"uniform": 100.0, "tempo": 95.0}), machine="m", date="2026-11-02",
                        command=EP8)
    real = catalog.load_epbench

    def load(path):   # the newest recording's table lacks a policy its manifest lists (a hand edit)
        df = real(path)
        return df[df.policy != "uniform"] if str(path) == str(new) else df

    monkeypatch.setattr(catalog, "load_epbench", load)
    row = {r["id"]: r for r in claims.claim_rows()}["wc_b32_vs_eplb"]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        e = claims.evaluate(row, "smoke")
    assert e["ours"] == pytest.approx(12.0) and e["status"] == "reproduced"   # the older one decides
    said = " ".join(str(x.message) for x in w)
    assert "wc_b32_vs_eplb" in said and new.name in said and "KeyError" in said
    assert old.name not in said


def test_a_measured_claim_whose_function_raises_is_not_computable(put, monkeypatch):
    from tempo.book.claims.functions.measured import MEASURED_CLAIMS

    def boom(f):
        raise KeyError("uniform")

    monkeypatch.setitem(REGISTRY, "x_measured", Spec((), boom, "cluster", "test"))
    monkeypatch.setitem(MEASURED_CLAIMS, "x_measured", "epbench")
    with pytest.warns(UserWarning, match="x_measured"):
        e = led.evaluate(_row("x_measured", needs="cluster"), "smoke")
    assert e["status"] == "not computable" and "KeyError" in e["note"]
    # a claim on the build's own results that raises is a bug: it is not hidden
    monkeypatch.setitem(REGISTRY, "x_own", Spec((), boom, "model", "test"))
    with pytest.raises(KeyError):
        led.evaluate(_row("x_own"), "smoke")


def test_a_stratified_interval_resamples_within_each_cell():
    import numpy as np

    rng = np.random.default_rng(1)
    v = np.concatenate([rng.normal(0, 1, 40), rng.normal(10, 1, 40)])
    cells = ["a"] * 40 + ["b"] * 40
    lo, hi = claims.bootstrap_ci(v, np.mean, strata=cells)
    # the cells keep their sizes: only the within-cell noise moves the mean (sd 1/sqrt(80))
    assert lo < v.mean() < hi and 0.25 < hi - lo < 0.6
    assert (lo, hi) == claims.bootstrap_ci(v, np.mean, strata=cells)            # a fixed seed
    med = claims.bootstrap_ci(v, lambda x: float(np.median(x)), strata=cells)   # a statistic without axis=
    assert med[0] < np.median(v) < med[1]
