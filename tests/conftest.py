import numpy as np
import pytest
from hypothesis import settings

settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True)
settings.load_profile("ci")


@pytest.fixture
def toy():
    """Paper Fig. 1b: one hot expert (600 tokens), six cold (30), 2 GPUs, full replication,
    a = c = 0, b = 15 us, beta = 0.1 us/token."""
    import tempo

    inst = tempo.Instance.full_replication([600, 30, 30, 30, 30, 30, 30], n_gpus=2)
    model = tempo.CostModel(a=0, b=15, c=0, beta=0.1)
    return inst, model


def random_instance(rng, full=None, max_gpus=4, max_experts=9, max_slots=3):
    import tempo

    g = int(rng.integers(2, max_gpus + 1))
    E = int(rng.integers(3, max_experts + 1))
    counts = (rng.zipf(1.5, E) * rng.integers(5, 80)).clip(0, 2000)
    counts[rng.random(E) < 0.2] = 0
    if full is None:
        full = rng.random() < 0.5
    if full:
        return tempo.Instance.full_replication(counts, g)
    rep = np.full((E, max_slots), -1)
    for e in range(E):
        k = int(rng.integers(1, min(max_slots, g) + 1))
        rep[e, :k] = rng.choice(g, size=k, replace=False)
    return tempo.Instance(counts, rep, g)


def random_model(rng, tiles=False):
    import tempo

    return tempo.CostModel(a=float(rng.uniform(0, 20)), b=float(rng.uniform(0.5, 20)),
                           c=float(rng.uniform(0, 20)), beta=float(rng.uniform(0.01, 0.3)),
                           b2=float(rng.uniform(1, 5)) if tiles else 0.0)
