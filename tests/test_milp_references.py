"""The MILP references stored once in data/milp/: a stored answer is re-verified by re-pricing,
a store that disagrees with its manifest or its batch is refused, and a MILP solved at build time
runs under a node limit (the same answer on any machine)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tempo.core.cost import CostModel
from tempo.core.instance import Instance
from tempo.policies import solve
from tempo.studies import milp_references as refs


def _batches(n=2):
    rng = np.random.default_rng(3)
    model = CostModel.named("dsv3-offline")
    return [(f"b{i}", Instance.full_replication(rng.integers(1, 40, size=8), 2), model) for i in range(n)]


def test_a_stored_reference_is_re_priced_and_reads_like_the_milp(tmp_path):
    store = tmp_path / "milp" / "references.npz"
    batches = _batches()
    got = refs.generate(batches, time_limit=30.0, store=store, command="test", progress=False)
    assert len(got) == 2 and all(r["optimal"] for r in got.values())
    man = json.loads((store.parent / "manifest.json").read_text())
    assert man["command"] == "test" and man["batches"] == 2 and man["files"]["references.npz"]
    for _, inst, model in batches:
        d = refs.reference(inst, model, store)
        fresh = solve(inst, model, "milp", time_limit=30.0)
        assert d.meta["source"] == "stored" and d.meta["optimal"] and d.meta["limit"] == "30 s"
        assert d.meta["objective"] == pytest.approx(fresh.meta["objective"], rel=1e-9)
        assert model.makespan(inst, d) == pytest.approx(d.meta["objective"], rel=1e-12)
    other = Instance.full_replication(np.arange(1, 9), 2)
    assert refs.reference(other, batches[0][2], store) is None


def test_a_store_that_does_not_re_price_or_match_its_manifest_is_refused(tmp_path):
    store = tmp_path / "references.npz"
    batches = _batches(1)
    got = refs.generate(batches, time_limit=30.0, store=store, command="test", progress=False)
    (k, rec), = got.items()
    refs.save({k: {**rec, "objective": rec["objective"] * 1.01}}, "test", store)   # a wrong objective
    with pytest.raises(ValueError, match="re-prices"):
        refs.reference(batches[0][1], batches[0][2], store)
    refs.save({k: {**rec, "value": rec["value"] * 2}}, "test", store)             # shares off the counts
    with pytest.raises(ValueError, match="not a dispatch"):
        refs.reference(batches[0][1], batches[0][2], store)
    refs.save(got, "test", store)
    store.write_bytes(store.read_bytes() + b"\0")                                  # bytes the manifest does not know
    with pytest.raises(ValueError, match="sha256"):
        refs.load(store)


def test_a_build_time_milp_runs_under_a_node_limit_with_the_same_answer_each_time():
    _, inst, model = _batches(1)[0]
    a, b = refs.solve_fixed(inst, model, node_limit=50), refs.solve_fixed(inst, model, node_limit=50)
    assert a.meta["source"] == "computed" and a.meta["limit"] == "50 nodes"
    assert (a.meta["objective"], a.meta["lower_bound"], a.meta["optimal"]) == \
           (b.meta["objective"], b.meta["lower_bound"], b.meta["optimal"])
    assert np.array_equal(a.shares, b.shares)
    with pytest.raises(ValueError, match="limit"):
        solve(inst, model, "milp", time_limit=None)
    with pytest.raises(ValueError, match="node_limit"):
        solve(inst, model, "milp", time_limit=None, node_limit=0)


def test_the_shipped_store_re_prices_on_the_smoke_grid():
    from tempo.book.milp_store import grid_batches

    if not refs.STORE.is_file():
        pytest.skip("no data/milp/references.npz in this checkout")
    batches = grid_batches(("smoke",), alternatives=False)
    found = [refs.reference(inst, model) for _, inst, model in batches]
    assert all(d is not None for d in found), "every smoke batch of the paper's reading has a stored reference"
