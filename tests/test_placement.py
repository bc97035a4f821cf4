import numpy as np
import pytest

import tempo
from tempo.world.workloads import zipf_popularity
from tempo.world.placement import balanced_packing, eplb_placement, packing_order, rebalance_experts, replicate_experts


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


def _colocated(placement, n_gpus):
    gpu = np.arange(placement.size) // (placement.size // n_gpus)
    return sum(np.unique(gpu[placement == e]).size == 1 for e in np.flatnonzero(np.bincount(placement) > 1))


def test_equal_loads_are_packed_in_an_uninformative_order_not_index_order():
    """The eplb_ties reading: DeepSeek's eplb.py sorts with torch's unstable sort, so on uniform
    loads (256 experts, 1.25x on 32 GPUs) it puts both replicas of 1 of the 64 replicated
    experts on one GPU (torch 2.13, CPU); a stable sort (index order) puts all 64 there."""
    w = np.ones(256)
    assert _colocated(eplb_placement(w, 32, 1.25, ties="index_order"), 32) == 64
    unordered = eplb_placement(w, 32, 1.25)
    assert _colocated(unordered, 32) <= 4
    assert (unordered == eplb_placement(w, 32, 1.25, ties="unordered", seed=0)).all()  # deterministic
    assert not (unordered == eplb_placement(w, 32, 1.25, seed=1)).all()  # the seed draws the order
    # loads without ties are packed the same either way
    p = np.random.default_rng(3).random(64)
    assert (eplb_placement(p, 8, 1.25) == eplb_placement(p, 8, 1.25, ties="index_order")).all()
    # Zipf(1.0) ties across experts (rank 1 over 6 replicas = rank 6 over 1, exactly): index order
    # walks the tied replicas expert by expert and stacks some on one GPU, the random order fewer
    z = zipf_popularity(64, 1.0, seed=3)
    assert _colocated(eplb_placement(z, 8, 1.25, ties="index_order"), 8) > _colocated(eplb_placement(z, 8, 1.25), 8)
    with pytest.raises(ValueError, match="ties must be one of unordered, index_order"):
        balanced_packing(w, 4, ties="stable")
    from tempo.studies.scenarios import zipf_placement

    with pytest.raises(ValueError, match="eplb_ties must be one of unordered, index_order, got 'stable'"):
        zipf_placement(64, 0.0, 0, 8, 8, 1.25, eplb_ties="stable")


def test_packing_order_breaks_only_ties():
    w = np.array([3.0, 1.0, 3.0, 2.0, 1.0, 3.0])
    order = packing_order(w, "unordered", seed=5)
    assert w[order].tolist() == sorted(w.tolist(), reverse=True)
    assert packing_order(w, "index_order").tolist() == [0, 2, 5, 3, 1, 4]

