"""The SGLang-independent half of the plugin (runs in CI without sglang): the runtime's
tables, counting and reset, rank-invariant uniforms, the version check and the hook bodies
on stand-in objects."""
import argparse
import types

import numpy as np
import pytest

from conftest import optional_module
from tempo.serving import sglang_plugin as sp

torch = optional_module("torch")

P2L = np.array([[0, 1, 2, 3, 0, 1], [3, 2, 1, 0, 0, 3]])  # L=2, P=6 (3 per GPU on 2 GPUs)


def test_version_check(monkeypatch):
    assert sp.check_sglang_version(sp.SGLANG_VERSION) == sp.SGLANG_VERSION
    with pytest.raises(sp.SGLangVersionError, match="0.5.23"):
        sp.check_sglang_version("0.4.9")
    monkeypatch.setenv("TEMPO_SGLANG_ANY_VERSION", "1")
    assert sp.check_sglang_version("0.4.9") == "0.4.9"


@pytest.mark.needs("torch")
def test_runtime_dispatch_counts_and_padding():
    rt = sp.TempoRuntime(P2L, 2, start=False)
    assert tuple(rt.phys.shape) == (2, 4, 2) and tuple(rt.counts.shape) == (2, 4)
    ids = torch.tensor([[0, 1], [2, 3], [0, 0]])
    out = rt.dispatch(1, ids, torch.tensor(2))
    assert rt.counts[1].tolist() == [1, 1, 1, 1] and rt.counts[0].sum() == 0
    holders = {e: set(np.flatnonzero(P2L[1] == e).tolist()) for e in range(4)}
    for t in range(2):
        for k in range(2):
            assert out[t, k].item() in holders[ids[t, k].item()]


@pytest.mark.needs("torch")
def test_runtime_refreshes_and_resets():
    rt = sp.TempoRuntime(P2L, 2, interval_s=0.05, deadline_s=20)
    try:
        import time

        end = time.monotonic() + 30
        while not rt.refresher.stats["published"] and time.monotonic() < end:
            rt.dispatch(0, torch.zeros(64, 2, dtype=torch.int64))  # a hot expert 0
            time.sleep(0.02)
        assert rt.refresher.stats["published"] >= 1
        assert torch.allclose(rt.prob[0].sum(-1), torch.ones(4))
        new = np.array([[0, 1, 2, 3, 2, 3], [0, 1, 2, 3, 1, 1]])
        rt.reset(new)
        assert rt.counts.sum() == 0 and rt.phys[1, 1].tolist() == [1, 4, 5]
        assert rt.refresher is not None and rt.refresher.solver.alive()
    finally:
        rt.close()


@pytest.mark.needs("torch")
def test_noop_runtime_keeps_uniform_table():
    rt = sp.TempoRuntime(P2L, 2, policy="noop", interval_s=0.05)
    try:
        rt.dispatch(0, torch.zeros(64, 2, dtype=torch.int64))
        assert rt.refresher.step() == "noop" and rt.refresher.solver is None
        assert torch.allclose(rt.prob[0, 0], torch.tensor([0.5, 0.5]))
    finally:
        rt.close()


@pytest.mark.needs("torch")
def test_rank_invariant_uniforms_are_deterministic_and_spread():
    a = sp.uniforms(10000, "cpu", True, layer_id=3)
    b = sp.uniforms(10000, "cpu", True, layer_id=3)
    assert torch.equal(a, b) and a.min() >= 0 and a.max() < 1
    hist = torch.histc(a, bins=10, min=0, max=1)
    assert (hist - 1000).abs().max() <= 2  # low-discrepancy: near-perfect strata
    assert not torch.equal(sp.uniforms(10, "cpu", False), sp.uniforms(10, "cpu", False))


@pytest.mark.needs("torch")
def test_hook_bodies_on_stand_ins(monkeypatch):
    p = argparse.ArgumentParser()
    p.add_argument("--ep-dispatch-algorithm", choices=["static", "dynamic"])
    sp.hook_add_cli_args(None, p)
    assert p.parse_args(["--ep-dispatch-algorithm", "tempo_noop"]).ep_dispatch_algorithm == "tempo_noop"
    args, kwargs = sp.hook_buffer_init_new((2, 3), 5000, dtype="i4")
    assert args == ((2, 3), 1024) and kwargs == {"dtype": "i4"}
    monkeypatch.setenv("TEMPO_RECORDER_BUFFER_CAP", "8")
    assert sp.hook_buffer_init_new((2,), -1)[0][1] == 8
    assert sp.hook_buffer_init_new((2,), 4)[0][1] == 4
    # untagged dispatch info falls through to SGLang's own mapping
    called = {}
    out = sp.hook_logical_to_physical(lambda ids, info: called.setdefault("x", ids), "ids", types.SimpleNamespace())
    assert out == "ids" and called
    # tagged info goes through the runtime
    monkeypatch.setattr(sp, "_RUNTIME", sp.TempoRuntime(P2L, 2, start=False))
    info = types.SimpleNamespace(tempo_layer_id=0)
    ids = torch.tensor([[3, 3]])
    res = sp.hook_logical_to_physical(lambda *a: pytest.fail("must not fall through"), ids, info)
    assert set(res.flatten().tolist()) <= {3, 5} and sp._RUNTIME.counts[0, 3] == 2
