import numpy as np

import tempo
from tempo.world.workloads import zipf_popularity
from tempo.world.placement import balanced_packing, eplb_placement, rebalance_experts, replicate_experts


def test_eplb_readme_golden():
    """DeepSeek EPLB README example (hierarchical: 4 groups, 2 nodes, 8 GPUs, 16 slots)."""
    w = np.array([[90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
                  [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27]])
    phy2log, log2phy, logcnt = rebalance_experts(w, 16, 4, 2, 8)
    assert phy2log.tolist() == [[5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1],
                                [7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1]]
    assert logcnt.sum(axis=1).tolist() == [16, 16]
    for l in range(2):
        for e in range(12):
            slots = log2phy[l, e][log2phy[l, e] >= 0]
            assert (phy2log[l, slots] == e).all()


def test_replicate_and_pack():
    p2l, rank, cnt = replicate_experts(np.array([10.0, 1.0, 4.0]), 5)
    assert cnt.tolist() == [3, 1, 1]
    pack, r = balanced_packing(np.array([5.0, 4, 3, 2]), 2)
    assert np.bincount(pack).tolist() == [2, 2]


def test_eplb_placement_instance():
    p = zipf_popularity(32, 1.0, seed=0)
    pl = eplb_placement(p, 8, 1.25)
    assert pl.size == 40
    inst = tempo.Instance.from_placement(np.ones(32, int), pl, 8)
    assert (inst.n_replicas >= 1).all() and inst.n_replicas.sum() == 40
