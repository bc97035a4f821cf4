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
