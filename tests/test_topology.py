import numpy as np
import pytest

import tempo
from tempo.core.topology import same_node_first


def _inst(seed=0):
    rng = np.random.default_rng(seed)
    E, g = 12, 8
    rep = np.full((E, 3), -1)
    for e in range(E):
        k = int(rng.integers(1, 4))
        rep[e, :k] = rng.choice(g, size=k, replace=False)
    return tempo.Instance(rng.integers(0, 500, size=E), rep, g, gpus_per_node=4)


@pytest.mark.parametrize("seed", range(5))
def test_same_node_first_keeps_loads_and_minimises_crossing(seed):
    inst = _inst(seed)
    model = tempo.CostModel.named("proxy-serving")
    d = tempo.solve(inst, model, "tempo")
    t = same_node_first(inst, d)
    assert np.allclose(t.shares.sum(axis=0), d.shares)                # per-replica shares unchanged
    assert np.allclose(t.shares.sum(axis=2), np.repeat((inst.counts / 2)[None, :], 2, axis=0).reshape(2, -1))
    assert (t.shares >= -1e-12).all() and np.all(t.shares[:, ~inst.valid] == 0)
    assert t.inter_node_tokens <= t.flat_inter_node_tokens + 1e-9
    # per-GPU loads, hence the makespan, are identical to the flat solution
    assert model.makespan(inst, tempo.Dispatch(t.shares.sum(axis=0))) == pytest.approx(model.makespan(inst, d))
    p = t.probabilities(inst)
    assert np.allclose(p.sum(axis=2)[:, inst.n_replicas > 0], 1.0)


def test_local_replicas_absorb_everything():
    # expert 0 has a replica on each node: nothing needs to cross
    inst = tempo.Instance([800, 0], [[0, 4], [1, -1]], 8, gpus_per_node=4)
    t = same_node_first(inst, tempo.Dispatch([[400.0, 400.0], [0.0, 0.0]]))
    assert t.inter_node_tokens == 0 and t.flat_inter_node_tokens == pytest.approx(400)
    assert t.shares[0, 0].tolist() == [400.0, 0.0] and t.shares[1, 0].tolist() == [0.0, 400.0]


def test_needs_gpus_per_node():
    inst = tempo.Instance([5], [[0]], 2)
    with pytest.raises(ValueError, match="gpus_per_node"):
        same_node_first(inst, tempo.Dispatch([[5.0]]))
