import importlib.util

import numpy as np
import pytest

try:
    from hypothesis import settings
except ImportError:  # tests that need hypothesis say so with @pytest.mark.needs("hypothesis")
    settings = None
else:
    settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True)
    settings.load_profile("ci")


# ---------------------------------------------------------------------------- optional dependencies
# Each test declares what it needs beyond numpy/scipy/pandas/highspy with
# ``@pytest.mark.needs("torch", ...)``; a test without the marker runs everywhere, so a missing
# optional package never hides a numpy-only test (no module-level importorskip).
def _missing(modules) -> list[str]:
    out = []
    for m in modules:
        try:
            if importlib.util.find_spec(m) is None:
                out.append(m)
        except (ImportError, ValueError):
            out.append(m)
    return out


def pytest_configure(config):
    config.addinivalue_line("markers", "needs(*modules): skip unless these optional modules can be imported")


def pytest_runtest_setup(item):
    for mark in item.iter_markers("needs"):
        missing = _missing(mark.args)
        if missing:
            pytest.skip(f"needs {', '.join(missing)}")


class _Absent:
    """Stand-in for an optional module that is not installed: touching it skips the test."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        if attr.startswith("__"):  # collection probes (__test__, ...) must not skip a whole module
            raise AttributeError(attr)
        pytest.skip(f"needs {self._name}")


def optional_module(name: str):
    """``name`` imported, or a stand-in whose first use skips the calling test."""
    if _missing([name]):
        return _Absent(name)
    return importlib.import_module(name)


@pytest.fixture(autouse=True)
def _fresh_grid_memo():
    """No test sees grid-memo entries (tempo.studies.sweep) that an earlier test left."""
    import sys

    yield
    sweep = sys.modules.get("tempo.studies.sweep")
    if sweep is not None:
        sweep.memo_clear()


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
