import math

import numpy as np
import pytest

import tempo
from tempo import CostModel


def test_eq1_max_affine():
    m = CostModel(a=2, b=10, c=1, beta=0.5)
    # G=3, N=10 -> max(32, 6) = 32 ; G=1, N=200 -> max(12, 101) = 101
    assert m.time([3, 1], [10, 200]).tolist() == [32.0, 101.0]


def test_eq2_tiles_and_eq4_traffic():
    m = CostModel(a=0, b=8, c=0, beta=0.01, b2=3, c2=5, gamma=0.05)
    inst = tempo.Instance([300, 100], [[0, 1], [0, -1]], 2)
    d = tempo.Dispatch([[300, 0], [100, 0]])
    G, N, T = m.gpu_features(inst, d)
    assert G.tolist() == [2, 0] and N.tolist() == [400, 0] and T.tolist() == [4, 0]  # 3 + 1 tiles
    # flat = 0 + 8*2 + 3*(4-2) = 22 ; linear = 4 ; traffic = 5 + 20 = 25
    assert m.gpu_times(inst, d).tolist() == [25.0, 5.0]
    assert m.makespan(inst, d) == 25.0


def test_expert_time_staircase():
    m = CostModel(a=0, b=8.32, c=0, beta=0.0, b2=2.65)
    t = m.expert_time([1, 128, 129, 256, 257])
    assert np.allclose(t, [8.32, 8.32, 10.97, 10.97, 13.62])


@pytest.mark.parametrize("name, n_star", [("dsv3-offline", 156), ("qwen3-30b-offline", 161),
                                          ("dsv2lite-offline", 168), ("dsv3-bf16-offline", 331)])
def test_named_table6_inflection(name, n_star):
    m = CostModel.named(name)
    assert abs(m.n_star - n_star) <= 1.0  # Table 6 reports the rounded inflection


def test_named_table7_rows():
    m = CostModel.named("dsv3-testbedb-tile")
    assert (m.a, m.b, m.b2, m.c, m.beta, m.c2, m.gamma) == (37.1, 8.32, 2.65, 23.4, 0.0336, 25.0, 0.10)
    assert CostModel.named("proxy-serving").has_traffic
    with pytest.raises(ValueError, match="unknown parameter set"):
        CostModel.named("nope")


@pytest.mark.parametrize("kw, word", [
    (dict(a=-1, b=1, c=0, beta=1), "a must"),
    (dict(a=0, b=float("nan"), c=0, beta=1), "b must"),
    (dict(a=0, b=1, c=0, beta=-0.1), "beta must"),
    (dict(a=0, b=1, c=0, beta=1, c2=1.0), "c2 and gamma"),
    (dict(a=0, b=1, c=0, beta=1, tile=0), "tile"),
])
def test_cost_validation(kw, word):
    with pytest.raises(ValueError, match=word):
        CostModel(**kw)


def test_without_terms():
    m = CostModel.named("proxy-serving")
    assert m.without("traffic").c2 is None
    f = m.without("floor")
    assert (f.a, f.b) == (0.0, 0.0)
