"""scripts/compare_builds.py: the clock columns and the MILP's time-limited cells of an experiment
are left out in every run of it (tagged, under another reading), and a real difference is shown."""
import importlib.util

import pandas as pd

from tempo.core import paths

spec = importlib.util.spec_from_file_location("compare_builds", paths.ROOT / "scripts" / "compare_builds.py")
cb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cb)


def _write(d, name, df):
    d.mkdir(parents=True, exist_ok=True)
    df.to_csv(d / name, index=False)


def test_clock_and_time_limited_cells_of_every_run_are_left_out(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    svm = pd.DataFrame({"ratio": [1.0, 1.01], "tempo_ms": [0.3, 0.4], "milp_s": [0.1, 10.0], "milp_lb": [5.0, 4.0],
                        "ratio_to_lb": [1.0, 1.1], "milp_optimal": [True, True]})
    slower = svm.assign(tempo_ms=[0.9, 0.2], milp_s=[0.2, 10.0], milp_lb=[5.0, 3.9], ratio_to_lb=[1.0, 1.2],
                        milp_optimal=[True, False])  # the second MILP stopped at its limit in this run
    sens = pd.DataFrame({"id": ["solver_time_small_b", "x"], "reading": ["r", "r"], "choice": ["c", "c"],
                         "ours": ["3.8", "1"], "note": ["", ""]})
    for d, frame, ms in ((a, svm, [0.1, 0.2]), (b, slower, [0.3, 0.4])):
        _write(d, "solver_vs_milp-eplb_ties=index_order.csv", frame)
        _write(d, "solver_runtime-tempo_preset=default.csv", pd.DataFrame({"cpu_ms": ms, "wall_ms": ms, "B": [16, 32]}))
        _write(d, "claims_sensitivity.csv", sens.assign(ours=["3.8" if d == a else "3.1", "1"]))
    assert cb.study_file("solver_vs_milp-scale.eplb_ties=index_order.csv") == "solver_vs_milp.csv"
    assert cb.compare(a, b) == []
    _write(b, "claims_sensitivity.csv", sens.assign(ours=["3.1", "2"]))
    _write(b, "solver_vs_milp-eplb_ties=index_order.csv", slower.assign(ratio=[1.0, 1.02]))
    out = cb.compare(a, b)
    assert len(out) == 2 and "claims_sensitivity.csv: column 'ours'" in out[0] and "column 'ratio'" in out[1]
