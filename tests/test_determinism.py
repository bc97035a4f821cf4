"""Verdicts do not depend on the machine: the smoke profile's MILP experiments, run once as the
chapters run them and once with every wall-clock limit of their configs divided by 1000 while two
busy loops keep the cores busy, give every claim that reads them the same status and the same
value."""
from __future__ import annotations

import pandas as pd

from tempo.book import determinism
from tempo.book.claims import evaluate, format_value
from tempo.core import paths


def _ledger(rows) -> pd.DataFrame:
    out = []
    for r in rows:
        e = evaluate(r, "smoke")
        out.append({"id": r["id"], "status": e["status"], "ours": format_value(e["ours"])})
    return pd.DataFrame(out)


def test_statuses_and_values_do_not_depend_on_the_clock_or_the_load(tmp_path, monkeypatch):
    rows = determinism.clock_claims()
    assert {"solver_phase_grid_max", "lemma1", "lemma2", "thm1_partition", "thm2_worst_ratio",
            "tempo_worst_vs_opt"} <= {r["id"] for r in rows}
    monkeypatch.setattr(paths, "BUILD", tmp_path / "idle")
    determinism.run_clock_experiments("smoke", alternatives=False)
    idle = _ledger(rows)
    monkeypatch.setattr(paths, "BUILD", tmp_path / "loaded")
    determinism.run_clock_experiments("smoke", scale=1e-3, busy=2, alternatives=False)
    loaded = _ledger(rows)
    diff = determinism.compare(idle, loaded)
    assert diff.empty, diff.to_string()
    assert (idle.status != "not run in this build").all(), idle.to_string()


def test_compare_lets_only_a_machine_figure_differ_in_value():
    a = pd.DataFrame({"id": ["t", "m", "r"], "status": ["machine figure", "deviates", "reproduced"],
                      "ours": ["3.7", "1.033", "1.0"]})
    b = a.assign(ours=["4.4", "1.033", "1.0"])
    assert determinism.compare(a, b).empty
    moved = determinism.compare(a, b.assign(status=["machine figure", "deviates", "deviates"],
                                            ours=["4.4", "1.015", "1.0"]))
    assert moved[["id", "what"]].values.tolist() == [["m", "value"], ["r", "status"]]


def test_busy_loops_stop_when_the_block_ends():
    with determinism.busy_loops(2) as procs:
        assert all(p.poll() is None for p in procs)
    assert all(p.poll() is not None for p in procs)
