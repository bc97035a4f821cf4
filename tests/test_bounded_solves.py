"""Bounded solves and exact numbers: every LP/QP/MILP call
has a time limit and a fallback that is a valid dispatch and says so; counts past 2^53 are refused
naming the argument, and every solver is valid just below it."""
import numpy as np
import pytest

import tempo
from tempo.policies import REGISTRY, available_policies, fallback_of, mark_fallback


def test_mark_and_read_a_fallback():
    d = tempo.Dispatch(np.ones((1, 1)), {"policy": "x"})
    assert fallback_of(d) is None
    assert mark_fallback(d, "first") is d and fallback_of(d) == "first"
    mark_fallback(d, "second")
    assert fallback_of(d) == "first; second"
    with pytest.raises(ValueError, match="why"):
        mark_fallback(d, "")


def test_counts_past_2_53_are_refused_naming_the_argument():
    with pytest.raises(ValueError, match="counts sum to .* above 2\\^53"):
        tempo.Instance.full_replication([2**60], 20)
    with pytest.raises(ValueError, match="counts"):
        tempo.Instance([2**52, 2**52 + 1], [[0], [1]], 2)
    tempo.Instance([2**52, 2**52], [[0], [1]], 2)  # exactly 2^53 is accepted


def test_cli_refuses_counts_past_2_53_as_a_usage_error(capsys):
    from tempo import cli

    assert cli.main(["solve", "--counts", str(2**60), "--gpus", "20"]) == 2
    assert "--counts" in capsys.readouterr().err
    assert cli.main(["solve", "--counts", str(2**52), str(2**52 + 1), "--gpus", "2"]) == 2
    assert "2^53" in capsys.readouterr().err


def test_every_policy_is_valid_just_below_2_53():
    m = tempo.CostModel.named("dsv3-offline")
    mt = tempo.CostModel(a=10, b=2, c=10, beta=0.01, b2=1.0)
    rng = np.random.default_rng(5)
    w = rng.random(16)
    counts = np.floor(w / w.sum() * (2**53 - 2**40)).astype(np.int64)
    rep = np.array([[e % 4, (e + 1) % 4] for e in range(16)])
    solved = 0
    for inst in (tempo.Instance(counts, rep, 4), tempo.Instance.full_replication(counts, 4)):
        for p in available_policies():
            if p == "round_robin" and not inst.is_full_replication():
                continue
            for model in (m, mt):
                if p == "milp" and model.has_tiles:  # 1e13 tiles of an expert: refused, not guessed
                    with pytest.raises(ValueError, match="milp: .* tiles"):
                        tempo.solve(inst, model, p)
                    continue
                d = tempo.solve(inst, model if REGISTRY[p].needs_model else None, p)
                d.validate(inst)
                assert fallback_of(d) is None, (p, fallback_of(d))
                solved += 1
    assert solved >= 30


class _NoRun:
    """A HiGHS instance whose run() does nothing: no incumbent, as at a time limit."""

    def __init__(self, h):
        self._h = h

    def __getattr__(self, k):
        return getattr(self._h, k)

    def run(self):
        return None


class _HighsSpy:
    """A HiGHS instance that reports each option set (``on_option(name, value)``) and each run
    (``on_run()``) before passing it on."""

    def __init__(self, h, on_option, on_run=lambda: None):
        self._h, self._on_option, self._on_run = h, on_option, on_run

    def __getattr__(self, k):
        return getattr(self._h, k)

    def setOptionValue(self, k, v):
        self._on_option(k, v)
        return self._h.setOptionValue(k, v)

    def run(self):
        self._on_run()
        return self._h.run()


@pytest.mark.parametrize("warm", [False, True])
def test_the_milp_without_an_incumbent_returns_a_valid_marked_dispatch(monkeypatch, warm):
    from tempo.policies import milp as milp_mod

    real = milp_mod.new_highs
    monkeypatch.setattr(milp_mod, "new_highs", lambda: _NoRun(real()))
    inst = tempo.Instance([30, 20, 10, 5], [[0, 1], [1, 2], [2, 0], [0, -1]], 3)
    model = tempo.CostModel.named("dsv3-offline")
    d = tempo.solve(inst, model, "milp", time_limit=1.0, warm_start=warm)
    d.validate(inst)
    assert "no feasible solution" in fallback_of(d) and d.meta["optimal"] is False
    assert d.meta["objective"] == pytest.approx(model.makespan(inst, d))


def test_the_projection_qp_runs_under_an_iteration_limit_not_a_clock(monkeypatch):
    """The even split's HiGHS QP runs under an iteration limit (the same answer on any machine),
    never a wall-clock one."""
    from tempo.policies import exact

    seen = []
    real = exact.new_highs
    monkeypatch.setattr(exact, "new_highs", lambda: _HighsSpy(real(), lambda k, v: seen.append(k)))
    monkeypatch.setattr(exact, "_kkt_finish", lambda *a: None)
    inst = tempo.Instance([30, 20, 10, 5], [[0, 1], [1, 2], [2, 0], [0, -1]], 3)
    d = tempo.solve(inst, None, "token_lp")
    assert d.meta["method"] == "highs_qp" and "qp_iteration_limit" in seen and "time_limit" not in seen


def test_a_study_counts_its_fallbacks_and_the_ledger_flags_the_claims_that_read_it(tmp_path, monkeypatch):
    """A fallback marked while an experiment runs is counted into its .meta.json (also when the
    result is served from the cache, and from a sweep's worker processes), and the ledger's note
    of every claim reading that result carries the flag."""
    import json

    from tempo import studies
    from tempo.book import claims
    from tempo.core import paths
    from tempo.policies import exact

    monkeypatch.setattr(paths, "BUILD", tmp_path)
    monkeypatch.setattr(exact, "_kkt_finish", lambda *a: None)
    monkeypatch.setattr(exact, "_project_even_qp", lambda inst, z, iteration_limit=None: None)
    cfg = {"b": 15.0, "beta": 0.1}
    row = {r["id"]: r for r in claims.claim_rows()}["toy_token_lp"]
    studies.run("toy_dispatch", cfg, "smoke")
    meta = json.loads((tmp_path / "results" / "smoke" / "toy_dispatch.meta.json").read_text())
    e = claims.evaluate(row, "smoke")
    if meta["fallbacks"] == 0:  # the toy's token LP is fully replicated (no projection): plant one
        meta["fallbacks"] = 2
        (tmp_path / "results" / "smoke" / "toy_dispatch.meta.json").write_text(json.dumps(meta))
        e = claims.evaluate(row, "smoke")
        assert "FLAG: computed with solver fallbacks" in e["note"] and "2 in toy_dispatch.csv" in e["note"]
    else:
        assert "FLAG" in e["note"]
    assert e["fallbacks"] >= 1


def test_sweep_workers_report_their_fallbacks_to_the_parent():
    from tempo.policies._fallback import fallback_count
    from tempo.studies.sweep import run_grid

    before = fallback_count()
    df = run_grid(_one_fallback, [{"i": i} for i in range(4)], workers=2, progress=False)
    assert len(df) == 4 and fallback_count() - before == 4


def test_threaded_dask_workers_count_each_fallback_once():
    """Cells that a threaded Dask cluster runs side by side in this process: each fallback is
    counted once (the counter is per thread), also through the grid memo's reuse."""
    distributed = pytest.importorskip("dask.distributed")
    from tempo.policies._fallback import fallback_count
    from tempo.studies import readings, sweep
    from tempo.studies.sweep import run_grid

    sweep.memo_clear()
    cells = [{"i": i} for i in range(8)]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=False, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            before = fallback_count()
            df = run_grid(_one_fallback, cells, scheduler=client, progress=False)
            assert len(df) == 8 and fallback_count() - before == 8
            real = readings.solve  # the cluster's threads share this process's modules
            readings.solve = lambda inst, model, policy, **kw: mark_fallback(real(inst, model, policy, **kw), "test")
            try:
                before = fallback_count()
                run_grid(_memo_fallback, cells, scheduler=client, progress=False)  # solves, stores
                run_grid(_memo_fallback, cells, scheduler=client, progress=False)  # reuses, counts again
                assert fallback_count() - before == 16
            finally:
                readings.solve = real
    sweep.memo_clear()


def _memo_fallback(cell):
    """One memoised dispatch per cell (through dispatch_times; the test makes it a fallback)."""
    import pandas as pd

    from tempo.studies import readings

    model = tempo.CostModel.named("dsv3-offline")
    inst = tempo.Instance(np.array([10 + cell["i"], 5]), np.array([[0], [1]]), 2)
    readings.dispatch_times(inst, model, "uniform", readings.Reading.paper())
    return pd.DataFrame({"x": [cell["i"]]})


def _one_fallback(cell):
    import pandas as pd

    mark_fallback(tempo.Dispatch(np.ones((1, 1))), "test")
    return pd.DataFrame({"x": [cell["i"]]})


def test_cached_results_keep_their_fallback_count(tmp_path, monkeypatch):
    import pandas as pd

    from tempo.core import paths
    from tempo.studies import cache

    monkeypatch.setattr(paths, "BUILD", tmp_path)

    def fn(cfg):
        mark_fallback(tempo.Dispatch(np.ones((1, 1))), "test")
        return pd.DataFrame({"x": [1]})
    assert cache.cached("fb", {}, fn).attrs["fallbacks"] == 1
    assert cache.cached("fb", {}, fn).attrs["fallbacks"] == 1  # served from the entry


def test_the_even_split_does_not_depend_on_the_clock(monkeypatch):
    """The even split's answer depends on the instance only: under a clock that jumps an hour at
    every read it is bit-identical, through the dual's KKT finish and through HiGHS's QP."""
    from tempo.policies import exact

    rng = np.random.default_rng(5)
    insts = [tempo.Instance(rng.integers(1, 60, 24), rng.integers(0, 6, (24, 3)), 6) for _ in range(4)]
    insts = [i for i in insts if not i.is_full_replication()]
    kkt = exact._kkt_finish
    ref = {}
    for finish in ("kkt", "qp"):
        monkeypatch.setattr(exact, "_kkt_finish", kkt if finish == "kkt" else (lambda *a: None))
        ref[finish] = [exact.token_lp_even(i) for i in insts]
    assert {d.meta["method"] for d in ref["qp"]} == {"highs_qp"}
    t = [0.0]

    def jumpy():
        t[0] += 3600.0
        return t[0]

    monkeypatch.setattr(exact.time, "perf_counter", jumpy)
    for finish in ("kkt", "qp"):
        monkeypatch.setattr(exact, "_kkt_finish", kkt if finish == "kkt" else (lambda *a: None))
        for inst, d in zip(insts, ref[finish]):
            again = exact.token_lp_even(inst)
            assert again.meta["method"] == d.meta["method"] and np.array_equal(again.shares, d.shares)


def test_the_milp_limit_counts_the_reference_dispatch_and_nothing_runs_after_highs(monkeypatch):
    """The MILP's time limit counts from the call: the tempo dispatch it checks HiGHS's bound
    against is computed before the run (its time is taken off HiGHS's limit, as is a reserve for
    HiGHS's own overrun), and no solve runs after HiGHS stops (a clock that tempo's solve
    advances by 0.6 s)."""
    from tempo.policies import milp as milp_mod

    now = [100.0]
    calls = []

    class Clock:
        @staticmethod
        def perf_counter():
            return now[0]

    real_tempo, real_highs = milp_mod.tempo_fast, milp_mod.new_highs

    def slow_tempo(inst, model):
        calls.append("tempo")
        now[0] += 0.6
        return real_tempo(inst, model)

    def option(k, v):
        if k == "time_limit":
            calls.append(("time_limit", v))

    monkeypatch.setattr(milp_mod, "time", Clock)
    monkeypatch.setattr(milp_mod, "tempo_fast", slow_tempo)
    monkeypatch.setattr(milp_mod, "new_highs", lambda: _HighsSpy(real_highs(), option, lambda: calls.append("run")))
    inst = tempo.Instance([30, 20, 10, 5], [[0, 1], [1, 2], [2, 0], [0, -1]], 3)
    d = milp_mod.milp(inst, tempo.CostModel.named("dsv3-offline"), time_limit=2.0)
    d.validate(inst)
    # 2 s less the reference's 0.6 s and the reserve for HiGHS's overrun (10% of the limit)
    assert calls == ["tempo", ("time_limit", pytest.approx(1.2)), "run"]
