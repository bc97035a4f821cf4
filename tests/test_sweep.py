import numpy as np
import pandas as pd
import pytest

from tempo.studies.sweep import run_grid


def cell_fn(cell):
    """A seeded cell: tempo on a Zipf batch (module level, so it pickles)."""
    import tempo
    from tempo.studies.scenarios import zipf_batches

    model = tempo.CostModel.named("dsv3-offline")
    rows = []
    for b, inst in enumerate(zipf_batches(64, cell["ep"], cell["B"], cell["skew"], 1.25, 2, seed=cell["seed"])):
        rows.append({"batch": b, "tempo": model.makespan(inst, tempo.solve(inst, model, "tempo")),
                     "static": model.makespan(inst, tempo.solve(inst, model, "static"))})
    return pd.DataFrame(rows)


CELLS = [{"ep": ep, "B": B, "skew": s, "seed": 7} for ep in (4, 8) for B in (16, 256) for s in (0.0, 1.2)]


def test_local_processes_match_serial():
    serial = run_grid(cell_fn, CELLS, workers=1, progress=False)
    parallel = run_grid(cell_fn, CELLS, workers=2, progress=False)
    assert list(serial.columns[:4]) == ["ep", "B", "skew", "seed"]
    assert len(serial) == 2 * len(CELLS)
    pd.testing.assert_frame_equal(serial, parallel)


def test_dask_local_cluster_matches_local_run():
    distributed = pytest.importorskip("dask.distributed")
    local = run_grid(cell_fn, CELLS, workers=1, progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            remote = run_grid(cell_fn, CELLS, scheduler=client, progress=False)
    pd.testing.assert_frame_equal(local, remote)


def test_empty_and_bad_input():
    assert run_grid(cell_fn, [], progress=False).empty
    with pytest.raises(TypeError):
        run_grid(42, CELLS[:1], progress=False)


def memo_cell(cell):
    """Reads the memo entry of its key, then stores its own value (module level, so it pickles)."""
    from tempo.studies.sweep import memo_get, memo_put

    seen = memo_get(("test", cell["k"]))
    memo_put(("test", cell["k"]), cell["k"] * 10)
    return [{"k": cell["k"], "seen": -1 if seen is None else seen}]


@pytest.mark.parametrize("workers", [1, 2])
def test_memo_entries_travel_back_and_reach_the_next_grid(workers):
    from tempo.studies import sweep

    sweep.memo_clear()
    cells = [{"k": k} for k in range(6)]
    first = run_grid(memo_cell, cells, workers=workers, progress=False)
    assert first.seen.tolist() == [-1] * 6  # nothing stored before
    assert [sweep.memo_get(("test", k)) for k in range(6)] == [0, 10, 20, 30, 40, 50]  # back in this process
    second = run_grid(memo_cell, cells, workers=workers, progress=False)
    assert second.seen.tolist() == [0, 10, 20, 30, 40, 50]  # the next grid's workers start with them
    assert sweep.memo_clear() == 6 and sweep.memo_get(("test", 0)) is None


def test_dispatch_times_reuse_same_inputs_only(monkeypatch):
    """tempo.studies.readings.dispatch_times: the same batch, model, policy and options are solved
    once (the times equal a direct solve's), other options are solved again, and a reused
    dispatch that came from a fallback is counted again."""
    import tempo
    from tempo.paper.readings import Reading
    from tempo.policies._fallback import mark_fallback
    from tempo.studies import readings, sweep
    from tempo.studies.scenarios import zipf_batches

    sweep.memo_clear()
    model = tempo.CostModel.named("dsv3-offline")
    inst = zipf_batches(64, 8, 64, 1.2, 1.25, 1, seed=3)[0]
    calls = []

    def counting_solve(inst, model, policy, **kw):
        calls.append((policy, tuple(sorted(kw.items()))))
        d = tempo.solve(inst, model, policy, **kw)
        return mark_fallback(d, "test") if policy == "uniform" else d

    monkeypatch.setattr(readings, "solve", counting_solve)
    try:
        _check_reuse(readings, model, inst, calls, zipf_batches(64, 8, 64, 1.2, 1.25, 1, seed=4)[0])
    finally:
        sweep.memo_clear()  # no entry of this fake solve outlives the test


def _check_reuse(readings, model, inst, calls, other):
    import tempo
    from tempo.paper.readings import Reading
    from tempo.policies._fallback import fallback_count

    paper = Reading.paper()
    t, N = readings.dispatch_times(inst, model, "metro", paper)
    assert np.array_equal(t, model.gpu_times(inst, tempo.solve(inst, model, "metro", order=paper["metro_order"])))
    assert N.sum() == pytest.approx(inst.total_tokens)
    t2, _ = readings.dispatch_times(inst, model, "metro", paper)
    assert np.array_equal(t, t2) and len(calls) == 1
    readings.dispatch_times(inst, model, "metro", paper.with_(metro_order="random_order"))  # other options: solved
    assert len(calls) == 2
    readings.dispatch_times(other, model, "metro", paper)  # another batch: solved
    assert len(calls) == 3
    before = fallback_count()
    readings.dispatch_times(inst, model, "uniform", paper)
    readings.dispatch_times(inst, model, "uniform", paper)
    assert len(calls) == 4 and fallback_count() - before == 2
    with pytest.raises(ValueError):
        t[0] = 0.0  # the stored times are read-only


def test_refresh_forgets_the_memo(monkeypatch, tmp_path):
    """studies.run(refresh=True) recomputes everything, so it also forgets the grid memo; a
    plain run keeps it (the alternatives after it reuse its solves)."""
    from tempo import studies
    from tempo.core import paths
    from tempo.studies import sweep

    sweep.memo_put(("test", "x"), 1)
    monkeypatch.setattr(studies, "cached", lambda name, config, fn, refresh=False: pd.DataFrame({"a": [1]}))
    monkeypatch.setattr(paths, "results_dir", lambda profile: tmp_path)
    studies.run("lemmas", {"n": 1}, "smoke")
    assert sweep.memo_get(("test", "x")) == 1
    studies.run("lemmas", {"n": 1}, "smoke", refresh=True)
    assert sweep.memo_get(("test", "x")) is None


def test_refresh_of_alternatives_forgets_the_memo_once(monkeypatch, tmp_path):
    """run_alternatives(refresh=True): the memo is forgotten before the first run only, so the
    alternatives still reuse what the refreshed run computed (the same MILP answers)."""
    from tempo import studies
    from tempo.core import paths
    from tempo.paper.readings import Reading
    from tempo.studies import sweep

    seen = []

    def fake(name, config, fn, refresh=False):
        seen.append(sweep.memo_get(("test", "y")))
        sweep.memo_put(("test", "y"), len(seen))
        return pd.DataFrame({"a": [1]})

    sweep.memo_put(("test", "y"), 0)
    monkeypatch.setattr(studies, "cached", fake)
    monkeypatch.setattr(paths, "results_dir", lambda profile: tmp_path)
    out = studies.run_alternatives("thm2_probe", {"n": 1}, "smoke", reading=Reading.paper(), refresh=True)
    assert len(out) >= 2 and seen == [None] + list(range(1, len(out)))
    sweep.memo_clear()


def test_a_grid_bar_is_named_by_its_study_and_reading():
    from tempo.studies import sweep

    with sweep.labelled("phase_diagram (skew_grid=seven_skews)"):
        bar = sweep._bar(5, "phase diagram", True)
        assert bar.desc == "phase_diagram (skew_grid=seven_skews)" and bar.total == 5
        bar.close()
        with sweep.labelled("scale"):
            bar = sweep._bar(2, "lemmas", True)
            assert bar.desc == "scale: lemmas"
            bar.close()
    assert sweep._bar(1, "x", False) is None and not sweep._labels


def _one_by_one(results, cells):
    from tempo.studies.sweep import _as_frame

    return pd.concat([_as_frame(r.copy() if isinstance(r, pd.DataFrame) else r, c) for r, c in zip(results, cells)],
                     ignore_index=True)


@pytest.mark.parametrize("case", ["uniform", "int_and_float", "a_key_in_rows", "empty_cell", "numpy_scalar"])
def test_grid_table_equals_a_column_per_key_and_cell(case):
    """run_grid's table (keys inserted once over the concatenated rows) equals inserting each
    cell's keys into its own rows and concatenating: values, dtypes and column order."""
    from tempo.studies.sweep import _table

    cells = [{"shape": sh, "ep": ep, "skew": s, "on": on, "reading": {"r": 1}, "ks": [1, 2]}
             for sh in ("DSv3", "Qwen3-30B") for ep in (8, 16) for s, on in ((0.0, True), (1.5, False))]
    results = [pd.DataFrame({"ms": [float(i), i + 0.5], "winner": ["M", "L"], "tie": [False, True]})
               for i in range(len(cells))]
    if case == "int_and_float":
        cells[1]["skew"] = 1
    elif case == "a_key_in_rows":
        results[2]["ep"] = [1, 2]
    elif case == "empty_cell":
        results[3] = results[3].iloc[:0]
    elif case == "numpy_scalar":
        cells[0]["skew"] = np.float64(0.25)
    want = _one_by_one(results, cells)
    got = _table([r.copy() for r in results], cells)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert list(got.columns[:4]) == ["shape", "ep", "skew", "on"] and got.to_csv() == want.to_csv()
