"""One fused kernel per MoE layer (paper Section 4.4: zero extra kernels relative to static
dispatch), counted with a TorchDispatchMode around ``TempoRuntime.dispatch`` for each routing
layout, and the table realised at batch size 1 (the forward step mixed into the draw), with the
same picks on every rank when ranks route the same tokens."""
import importlib.util

import numpy as np
import pytest

from conftest import optional_module

torch = optional_module("torch")
from tempo.serving.runtime import TempoRuntime  # noqa: E402

P2L = np.array([[0, 1, 2, 3, 0, 1, 2, 3]] * 3)  # every expert held twice: tables of 0.5 / 0.5


def _ops(fn):
    """(aten ops other than views, in call order, result) of ``fn()``."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not func.is_view:
                seen.append(str(func.overloadpacket.__name__) + "." + func._overloadname)
            return func(*args, **(kwargs or {}))

    with Count():
        out = fn()
    return seen, out


LAYOUTS = {
    # name: runtime keywords, dispatch keywords, forward keywords
    "DeepEP (ranks route their own tokens)": (dict(rank_invariant=False, rank=3), dict(pad=5), {}),
    "no all-to-all (every rank routes the same tokens)": (dict(rank_invariant=True), {}, {}),
    "attention DP 4 (DP-gathered input)": (dict(rank_invariant=True, dp_size=4),
                                           dict(dp_widths=[16, 16, 16, 16]), dict(dp_tokens=[16, 3, 0, 9])),
    "DSv3 fused shared expert (a strided slice of the ids)": (dict(rank_invariant=False), dict(strided=True), {}),
}


@pytest.mark.needs("torch")
@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_one_kernel_per_layer(monkeypatch, layout):
    from tempo.serving import triton_kernels

    launches = []
    monkeypatch.setattr(triton_kernels, "_launch", lambda grid, *a, **kw: launches.append((grid, a, kw)))
    rt_kw, d_kw, f_kw = LAYOUTS[layout]
    rt = TempoRuntime(P2L, 2, start=False, kernel="triton", **rt_kw)
    try:
        rt.on_forward(**f_kw)
        T, K = 64, 8
        wide = torch.randint(0, 4, (T, K + 1), dtype=torch.int32)
        ids = wide[:, :K] if d_kw.get("strided") else wide[:, :K].contiguous()
        nv = torch.tensor(T - d_kw["pad"]) if "pad" in d_kw else None
        ops, out = _ops(lambda: rt.dispatch(1, ids, nv, d_kw.get("dp_widths")))
        # SGLang's static dispatch: one gather through its [E] map
        static_map = torch.arange(4, dtype=torch.int32)
        static_ops, _ = _ops(lambda: static_map[ids])
    finally:
        rt.close()
    assert ops == ["empty.memory_format"], ops  # the output's allocation, no kernel
    assert len(launches) == 1
    assert static_ops == ["index.Tensor"]  # one kernel, which allocates its output itself
    assert out.dtype == ids.dtype and tuple(out.shape) == (T, K)
    _, args, meta = launches[0]
    assert args[0] is ids  # read through its strides, no copy
    assert meta["U"] == (1 if rt_kw["rank_invariant"] else 2)
    assert meta["ROW_MASK"] == (1 if "dp_widths" in d_kw else 0)
    assert meta["NVALID_FROM_PTR"] == ("pad" in d_kw)


def _picks(rt, ids, steps=200):
    out = []
    for _ in range(steps):
        rt.on_forward()
        out.append(rt.dispatch(0, ids).clone())
    return torch.stack(out)  # [steps, T, K]


@pytest.mark.needs("torch")
@pytest.mark.parametrize("rank_invariant", [True, False])
def test_table_realised_at_batch_size_one(rank_invariant):
    """Expert 0 on physical slots 0 and 4 with a 0.5 / 0.5 table; one token a step."""
    rts = [TempoRuntime(P2L, 2, start=False, rank_invariant=rank_invariant, rank=r) for r in range(2)]
    try:
        picks = [_picks(rt, torch.tensor([[0]])) for rt in rts]
    finally:
        for rt in rts:
            rt.close()
    for p in picks:
        assert set(p.unique().tolist()) == {0, 4}
        share = float((p == 0).float().mean())
        assert abs(share - 0.5) <= (0.05 if rank_invariant else 0.1), share
    if rank_invariant:  # every rank picks the same replica at every step
        assert torch.equal(picks[0], picks[1])
    else:  # ranks draw independently
        assert not torch.equal(picks[0], picks[1])


@pytest.mark.needs("torch")
def test_each_row_moves_between_steps():
    """At T = 4 every row of the batch, not only the pooled batch, realises the table."""
    rt = TempoRuntime(P2L, 2, start=False, rank_invariant=True)
    try:
        p = _picks(rt, torch.zeros(4, 1, dtype=torch.int64))
    finally:
        rt.close()
    shares = (p[:, :, 0] == 0).float().mean(0)
    assert (shares - 0.5).abs().max() <= 0.05, shares


@pytest.mark.needs("torch")
def test_unequal_dp_slots_use_a_row_mask():
    """SUM_LEN (eager, unequal slot widths): the mask is built on the host side and given to
    the same kernel; padding rows are not counted."""
    rt = TempoRuntime(P2L, 2, start=False, rank_invariant=True, dp_size=2)
    try:
        rt.on_forward(dp_tokens=[2, 1])
        rt.dispatch(0, torch.zeros(7, 1, dtype=torch.int64), None, [3, 4])
        assert int(rt.counts[0, 0]) == 3
    finally:
        rt.close()
