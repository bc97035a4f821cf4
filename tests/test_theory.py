import numpy as np
import pytest

import tempo
from tempo.theory import bounds as theory
from tempo.world.placement import drift_corrupt


@pytest.mark.parametrize("seed", range(4))
def test_partition_reduction_yes_instances_reach_T_without_splitting(seed):
    w = theory.random_partition_instance(6, True, seed=seed)
    assert theory.has_balanced_partition(w)
    inst, model, T = theory.partition_reduction(w)
    d = tempo.solve(inst, model, "milp", time_limit=20)
    assert d.meta["optimal"]
    assert d.meta["objective"] == pytest.approx(T)
    assert ((d.shares > 1e-9).sum(axis=1) == 1).all()           # no expert split
    half = inst.counts[d.shares[:, 0] > 0]
    assert half.size == 3 and half.sum() == w.sum() // 2        # the dispatch is a balanced partition


@pytest.mark.parametrize("seed", range(4))
def test_partition_reduction_no_instances_exceed_T(seed):
    w = theory.random_partition_instance(6, False, seed=seed)
    assert not theory.has_balanced_partition(w)
    inst, model, T = theory.partition_reduction(w)
    d = tempo.solve(inst, model, "milp", time_limit=20)
    assert d.meta["optimal"] and d.meta["lower_bound"] > T * (1 + 1e-7)


def test_balanced_partition_dp_known_answers():
    assert theory.has_balanced_partition([1, 2, 3, 4])          # {1,4} vs {2,3}
    assert not theory.has_balanced_partition([1, 1, 1, 5])      # sums even but no half of size 2
    assert not theory.has_balanced_partition([1, 2, 3])         # odd count
    with pytest.raises(ValueError):
        theory.partition_reduction([1, 2, 4])
    with pytest.raises(ValueError):
        theory.partition_reduction([1, 2, 3, 5])                # odd total


def test_probe_suite_generator():
    items = list(theory.probe_suite(40, seed=1, max_experts=64, max_gpus=8))
    assert len(items) == 40
    kinds = {k for k, *_ in items}
    assert kinds == {"zipf", "uniform", "giant", "giant_plus_dust"}
    for kind, name, inst, model in items:
        assert inst.is_full_replication() and inst.n_gpus <= 8 and inst.n_experts <= 64
        if kind.startswith("giant"):
            assert inst.counts[0] == inst.counts.max()
        # Theorem 2 holds against the lower bound (which is at most OPT)
        rr = model.makespan(inst, tempo.solve(inst, model, "round_robin"))
        assert rr <= model.lower_bound(inst) + theory.additive_term(model, inst.counts.max()) + 1e-6
    again = list(theory.probe_suite(40, seed=1, max_experts=64, max_gpus=8))
    assert all((a[2].counts == b[2].counts).all() for a, b in zip(items, again))


def test_lower_bound_is_below_milp():
    rng = np.random.default_rng(5)
    for _ in range(5):
        inst = tempo.Instance.full_replication(rng.integers(0, 400, size=6), 3)
        model = tempo.CostModel(a=2, b=8, c=1, beta=0.05, b2=3)
        opt = tempo.solve(inst, model, "milp")
        assert model.lower_bound(inst) <= opt.meta["objective"] + 1e-9


def test_drift_corrupt_swaps_hot_with_cold():
    w = np.arange(20, dtype=float)[::-1]          # expert 0 hottest
    c = drift_corrupt(w, 4, seed=0)
    assert sorted(c) == sorted(w)
    assert set(np.flatnonzero(c != w)) >= {0, 1, 2, 3}
    assert c[:4].max() < w[3]                      # the top-4 now carry cold statistics
    with pytest.raises(ValueError):
        drift_corrupt(w, 11)


def test_one_table_of_model_shapes():
    """theory.SHAPES, calib.shapes.SHAPES and simulator.SHAPES are views of tempo.core.models, and
    both roofline functions agree (DSv3 fp8 at 3.35 TB/s: 44.04 MB -> 13.15 us, Section 2.2)."""
    from tempo.core import models
    from tempo.theory import bounds as theory
    from tempo.calib import shapes
    from tempo.studies import simulator

    for label, (d_model, d_ff) in theory.SHAPES.items():
        m = models.model_shape(label)
        assert (m.d_model, m.d_ff) == (d_model, d_ff) and shapes.SHAPES[m.name] is m
    for label, (E, K, params) in simulator.SHAPES.items():
        m = models.model_shape(label)
        assert (m.n_experts, m.top_k, m.params) == (E, K, params)
    assert theory.roofline_floor_us("DSv3", 3.35e12) == pytest.approx(13.15, abs=0.01)
    assert shapes.roofline_us("dsv3", 3.35) == pytest.approx(theory.roofline_floor_us("DSv3", 3.35e12), rel=1e-12)
    with pytest.raises(ValueError, match="unknown model"):
        models.model_shape("nope")


def test_probe_instance_is_the_suites_ith():
    items = list(theory.probe_suite(6, max_experts=8, max_gpus=4))
    kind, name, inst, _ = theory.probe_instance(5, n=6, max_experts=8, max_gpus=4)
    assert (kind, name) == items[5][:2] and (inst.counts == items[5][2].counts).all()
