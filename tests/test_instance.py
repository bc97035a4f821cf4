import numpy as np
import pytest

import tempo


def test_full_replication_layout():
    inst = tempo.Instance.full_replication([3, 0, 5], 4)
    assert inst.replica_gpu.shape == (3, 4)
    assert inst.replica_gpu[2].tolist() == [0, 1, 2, 3]
    assert inst.is_full_replication()
    assert inst.total_tokens == 8


@pytest.mark.parametrize("kwargs, word", [
    (dict(counts=[1, -2], replica_gpu=[[0], [1]], n_gpus=2), "counts"),
    (dict(counts=[1, 2], replica_gpu=[[0], [-1]], n_gpus=2), "no replica"),
    (dict(counts=[1, 2], replica_gpu=[[0], [2]], n_gpus=2), "outside"),
    (dict(counts=[1, 2, 3], replica_gpu=[[0], [1]], n_gpus=2), "rows"),
    (dict(counts=[1.5, 2], replica_gpu=[[0], [1]], n_gpus=2), "integers"),
    (dict(counts=[1, 2], replica_gpu=[[0], [1]], n_gpus=0), "n_gpus"),
    (dict(counts=[1, 2], replica_gpu=[[0], [1]], n_gpus=2, gpus_per_node=3), "gpus_per_node"),
])
def test_instance_validation(kwargs, word):
    with pytest.raises(ValueError, match=word):
        tempo.Instance(**kwargs)


def test_idle_expert_without_replica_is_allowed():
    inst = tempo.Instance([0, 4], [[-1], [1]], 2)
    assert inst.live.tolist() == [False, True]


def test_from_placement_maps_slots_gpu_major():
    # 2 GPUs x 3 slots: GPU0 holds experts 0,1,2; GPU1 holds 2,3,0
    inst = tempo.Instance.from_placement([5, 1, 7, 2], [0, 1, 2, 2, 3, 0], 2)
    assert inst.replica_gpu.tolist() == [[0, 1], [0, -1], [0, 1], [1, -1]]
    assert inst.n_replicas.tolist() == [2, 1, 2, 1]
    assert not inst.is_full_replication()


def test_dispatch_validation_and_probabilities():
    inst = tempo.Instance([4, 0], [[0, 1], [1, -1]], 2)
    d = tempo.Dispatch([[1.0, 3.0], [0.0, 0.0]]).validate(inst)
    p = d.probabilities(inst)
    assert p.tolist() == [[0.25, 0.75], [1.0, 0.0]]  # idle expert: uniform over its replicas
    with pytest.raises(ValueError, match="sum"):
        tempo.Dispatch([[1.0, 2.0], [0.0, 0.0]]).validate(inst)
    with pytest.raises(ValueError, match="unused"):
        tempo.Dispatch([[4.0, 0.0], [0.0, 1.0]]).validate(tempo.Instance([4, 1], [[0, 1], [1, -1]], 2))
    with pytest.raises(ValueError, match="non-negative"):
        tempo.Dispatch([[5.0, -1.0], [0.0, 0.0]]).validate(inst)
    with pytest.raises(ValueError, match="shape"):
        tempo.Dispatch([[4.0], [0.0]]).validate(inst)
