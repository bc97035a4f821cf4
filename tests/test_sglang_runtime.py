"""The SGLang-independent half of the plugin (runs in CI without sglang): the runtime's
tables, counting and reset, rank-invariant uniforms, the version check and the hook bodies
on stand-in objects."""
import argparse
import dataclasses
import threading
import types

import numpy as np
import pytest

from conftest import optional_module
from tempo.serving import sglang_plugin as sp

torch = optional_module("torch")
from tempo.serving.runtime import TempoRuntime, padded_replica_map  # noqa: E402
from tempo.serving.settings import ServingSettings  # noqa: E402

FAST = ServingSettings(refresh_ms=50, deadline_ms=20000)

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
    assert rt.width == 6 - 4 + 1  # P - E + 1: room for any later placement
    assert tuple(rt.phys.shape) == (2, 4, 3) and tuple(rt.counts.shape) == (2, 4)
    ids = torch.tensor([[0, 1], [2, 3], [0, 0]])
    out = rt.dispatch(1, ids, torch.tensor(2))
    assert rt.counts[1].tolist() == [1, 1, 1, 1] and rt.counts[0].sum() == 0
    holders = {e: set(np.flatnonzero(P2L[1] == e).tolist()) for e in range(4)}
    for t in range(2):
        for k in range(2):
            assert out[t, k].item() in holders[ids[t, k].item()]


def _wait_published(rt, n=1, layer=0, timeout=60):
    import time

    end = time.monotonic() + timeout
    while rt.refresher.stats["published"] < n and time.monotonic() < end:
        rt.dispatch(layer, torch.tensor([[0, 2]] * 64))  # experts 0 and 2 hot; 2 lives on GPU 0 only
        time.sleep(0.02)
    assert rt.refresher.stats["published"] >= n


@pytest.mark.needs("torch")
def test_rebalance_updates_every_kernel_tensor_in_place_chunk_by_chunk():
    """A rebalance keeps every tensor the kernel reads or writes (phys, prob,
    counts) at the same address with the new contents, one chunk of layers at a time."""
    rt = TempoRuntime(P2L, 2, settings=FAST)
    try:
        ptrs = {n: getattr(rt, n).data_ptr() for n in ("phys", "prob", "counts")}
        publisher = rt._publisher
        _wait_published(rt)
        assert torch.allclose(rt.prob[0, 0].sum(-1), torch.ones(4))
        assert rt.prob[0, 0, 0, 0] != 0.5  # a solved table, not the uniform split
        old_phys, old_prob, counts = rt.phys.clone(), rt.prob.clone(), rt.counts.clone()
        new = np.array([[0, 1, 2, 3, 2, 3], [0, 1, 2, 3, 1, 1]])
        rt.update_layers(new, [1])  # first chunk: layer 1 only
        assert {n: getattr(rt, n).data_ptr() for n in ptrs} == ptrs and rt._publisher is publisher
        want = padded_replica_map(new, 4, 3)
        assert rt.phys[1].tolist() == want[1].tolist() and rt.phys[1, 1].tolist() == [1, 4, 5]
        assert torch.equal(rt.phys[0], old_phys[0]) and torch.equal(rt.prob[0, 0], old_prob[0, 0])  # not moved yet
        assert rt.prob[0, 1, 1].tolist() == pytest.approx([1 / 3] * 3) and rt.prob[0, 1, 0].tolist() == [1, 0, 0]
        assert torch.equal(rt.counts, counts)  # the counters keep running (new baseline, no reset)
        out = rt.dispatch(1, torch.tensor([[1, 2]] * 300))  # the kernel reads the new rows
        assert set(out[:, 0].tolist()) == {1, 4, 5} and set(out[:, 1].tolist()) == {2}
        rt.update_layers(new, [0])  # second chunk
        assert {n: getattr(rt, n).data_ptr() for n in ptrs} == ptrs
        assert rt.phys.tolist() == want.tolist() and rt.p2l.tolist() == new.tolist()
        assert rt.refresher is not None and rt.refresher.solver.alive() and rt.refresher.solver.restarts == 0
        before = rt.refresher.stats["published"]
        _wait_published(rt, before + 1)  # the same refresher, same worker, solves the new placement
        assert rt.refresher.stats["placements"] >= 1 and rt.stats["rebalance_chunks"] == 2
        assert set(np.flatnonzero(rt.prob[0, 0, 2].numpy() > 0)) <= {0, 1}  # expert 2 has two replicas now
        with pytest.raises(ValueError, match="no physical replica"):  # rejected before anything changes
            rt.update_layers(np.array([[0, 0, 0, 0, 1, 2], [0, 1, 2, 3, 1, 1]]), [0])
        assert rt.phys.tolist() == want.tolist()
        with pytest.raises(ValueError, match="layer_ids"):
            rt.update_layers(new, [2])
    finally:
        rt.close()


@pytest.mark.needs("torch")
def test_window_priced_per_forward_step(monkeypatch):
    """The refresher divides a window by the forward steps it spans."""
    from tempo.serving.solver import TableSolver

    seen = []
    rt = TempoRuntime(P2L, 2, settings=ServingSettings(solver="thread", deadline_ms=60000), start=False)
    rt.start()
    rt.refresher.stop()  # drive it by hand
    rt.refresher.on_publish = lambda new, window: seen.append((new.copy(), window.copy()))
    for _ in range(4):
        rt.on_forward()
        rt.dispatch(0, torch.tensor([[0, 1]] * 2 + [[2, 3]]))  # a small decode batch per step
        rt.dispatch(1, torch.tensor([[3, 0]] * 2))
    assert rt.refresher.step() == "published"
    new, window = seen[0]
    assert window[0].tolist() == [8, 8, 4, 4]
    solver = TableSolver(rt.p2l, 2, "proxy-serving")
    per_step = solver.solve(window, steps=4)
    assert np.allclose(new[..., :per_step.shape[-1]], per_step)
    assert np.allclose(per_step, solver.solve(window // 4))
    # per step, experts 0 and 1 are cheaper on one GPU each (weight-bound); the 4-step window
    # priced as one batch would split them evenly (token-bound)
    assert np.allclose(per_step[0, 0, :2], [[0, 1], [1, 0]]) and np.allclose(solver.solve(window)[0, 0, :2], 0.5)


def test_settings_parse_once_and_name_the_variable():
    s = ServingSettings.from_env({"TEMPO_REFRESH_MS": "100", "TEMPO_TOPOLOGY": "hier", "TEMPO_GPUS_PER_NODE": "2",
                                  "TEMPO_SOLVER": "thread"})
    assert (s.interval_s, s.topology, s.gpus_per_node, s.solver, s.pricing) == (0.1, "hier", 2, "thread", "step")
    with pytest.raises(Exception):
        s.refresh_ms = 5  # frozen
    with pytest.raises(ValueError, match="TEMPO_GPUS_PER_NODE"):
        ServingSettings.from_env({"TEMPO_TOPOLOGY": "hier"})
    with pytest.raises(ValueError, match="TEMPO_REFRESH_MS"):
        ServingSettings.from_env({"TEMPO_REFRESH_MS": "fast"})
    with pytest.raises(ValueError, match="TEMPO_DEADLINE_MS"):
        ServingSettings.from_env({"TEMPO_DEADLINE_MS": "nan"})
    with pytest.raises(ValueError, match="TEMPO_POLICY"):
        ServingSettings.from_env({"TEMPO_POLICY": "milp"})
    with pytest.raises(ValueError, match="TEMPO_BATCH_TOKENS"):
        ServingSettings.from_env({"TEMPO_BATCH_TOKENS": "4096"})  # only with TEMPO_PRICING=fixed
    with pytest.raises(ValueError, match="TEMPO_SGLANG_ANY_VERSION"):
        ServingSettings.from_env({"TEMPO_SGLANG_ANY_VERSION": "yes"})
    with pytest.raises(ValueError, match="does not divide"):
        ServingSettings(topology="hier", gpus_per_node=3).n_nodes(8)
    assert ServingSettings(topology="hier", gpus_per_node=4).n_nodes(8) == 2


@pytest.mark.needs("torch")
def test_noop_runtime_keeps_uniform_table():
    rt = sp.TempoRuntime(P2L, 2, settings=dataclasses.replace(FAST, solver="noop"))
    try:
        rt.dispatch(0, torch.zeros(64, 2, dtype=torch.int64))
        assert rt.refresher.step() == "noop" and rt.refresher.kind == "noop"
        assert torch.allclose(rt.prob[0, 0, 0], torch.tensor([0.5, 0.5, 0.0]))
    finally:
        rt.close()


@pytest.mark.needs("torch")
def test_rank_invariant_uniforms_are_deterministic_and_spread():
    a = sp.uniforms(10000, "cpu", True, layer_id=3)
    b = sp.uniforms(10000, "cpu", True, layer_id=3)
    assert torch.equal(a, b) and a.min() >= 0 and a.max() < 1
    hist = torch.histc(a, bins=10, min=0, max=1)
    assert (hist - 1000).abs().max() <= 2  # low-discrepancy: near-perfect strata
    # the step moves every value; ranks that route their own tokens draw differently
    assert not torch.equal(sp.uniforms(10, "cpu", True, 3, step=1), sp.uniforms(10, "cpu", True, 3, step=2))
    assert not torch.equal(sp.uniforms(10, "cpu", False, rank=0), sp.uniforms(10, "cpu", False, rank=1))
    h = sp.uniforms(10000, "cpu", False, layer_id=2, step=5, rank=3)
    assert h.min() >= 0 and h.max() < 1 and (torch.histc(h, bins=10, min=0, max=1) - 1000).abs().max() < 150


@pytest.mark.needs("torch")
def test_hook_bodies_on_stand_ins(monkeypatch):
    p = argparse.ArgumentParser()
    p.add_argument("--ep-dispatch-algorithm", choices=["static", "dynamic"])
    sp.hook_add_cli_args(None, p)
    assert p.parse_args(["--ep-dispatch-algorithm", "tempo_noop"]).ep_dispatch_algorithm == "tempo_noop"
    # the recorder cap: off unless set, never on baselines, never turns -1 (unbounded) into a cap
    monkeypatch.setattr(sp, "_algorithm", lambda: "tempo")
    assert sp.hook_buffer_init_new((2, 3), 5000, dtype="i4") is None
    monkeypatch.setenv("TEMPO_RECORDER_BUFFER_CAP", "8")
    args, kwargs = sp.hook_buffer_init_new((2, 3), 5000, dtype="i4")
    assert args == ((2, 3), 8) and kwargs == {"dtype": "i4"}
    assert sp.hook_buffer_init_new((2,), -1) is None and sp.hook_buffer_init_new((2,), 4) is None
    monkeypatch.setattr(sp, "_algorithm", lambda: "static")
    assert sp.hook_buffer_init_new((2, 3), 5000) is None
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


@pytest.mark.needs("torch")
def test_forward_rebalance_and_capture_hooks_on_stand_ins(monkeypatch):
    rt = TempoRuntime(P2L, 2, start=False)
    monkeypatch.setattr(sp, "_RUNTIME", rt)
    runner = types.SimpleNamespace(is_draft_worker=False)
    assert sp.hook_before_forward(runner, "batch") is None and rt.steps == 1
    sp.hook_before_forward(types.SimpleNamespace(is_draft_worker=True), "batch")
    assert rt.steps == 1  # draft passes are not the model's forward steps
    meta = types.SimpleNamespace(physical_to_logical_map=torch.tensor([[0, 1, 2, 3, 2, 3], [0, 1, 2, 3, 1, 1]]))
    ptr = rt.phys.data_ptr()
    sp.hook_after_rebalance(None, new_expert_location_metadata=meta, update_layer_ids=[1])
    assert rt.phys.data_ptr() == ptr and rt.phys[1, 1].tolist() == [1, 4, 5] and rt.phys[0, 2].tolist() == [2, -1, -1]
    order = []
    # the guard holds the lock every refresher snapshot and publication takes
    out = sp.hook_capture_guard(lambda: order.append(rt.device_lock._is_owned()) or "captured")
    assert out == "captured" and order == [True]


@pytest.mark.needs("torch")
def test_dp_padding_mask_layouts():
    """Attention DP with a2a none: the MoE input is one slot per DP rank, real rows first
    (SGLang 0.5.23 dp_attention.dp_gather).  MAX_LEN: equal slots; SUM_LEN: slot r at
    sum(widths[:r]); a row count that is not the widths' sum gets no mask."""
    from tempo.serving.runtime import DpPadding

    d = DpPadding(3)
    d.set_real([2, 0, 3])
    assert d.row_mask(12, [4, 4, 4]).tolist() == [1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0]  # MAX_LEN, max_len 4
    assert d.row_mask(8, [4, 0, 4]).tolist() == [1, 1, 0, 0, 1, 1, 1, 0]  # SUM_LEN, widths aligned to attn_tp 4
    assert d.row_mask(6, [2, 1, 3]).tolist() == [1, 1, 0, 1, 1, 1]  # SUM_LEN, the idle rank's 1-row slot is padding
    assert d.row_mask(11, [4, 4, 4]) is None and d.row_mask(8, [4, 4]) is None and d.row_mask(8, None) is None
    d.set_real(None)  # unknown this step: every row counts
    assert d.row_mask(12, [4, 4, 4]).all()
    with pytest.raises(ValueError, match="3 non-negative"):
        d.set_real([1, 2])
    with pytest.raises(ValueError, match="n_dp"):
        DpPadding(0)


@pytest.mark.needs("torch")
def test_dp_gathered_padding_rows_are_not_counted(monkeypatch):
    """Padding with attention DP and a2a none: a stubbed forward batch of 3
    attention-DP ranks with 2, 0 and 3 real tokens, gathered MAX_LEN into slots of 4 rows.  The
    padding rows route to expert 0 (the degenerate routing of a zero hidden state); the
    counters see only the 5 real tokens (the real-SGLang paths are in tests/sglang)."""
    rt = TempoRuntime(P2L, 2, start=False, dp_size=3, rank_invariant=True)
    monkeypatch.setattr(sp, "_RUNTIME", rt)
    widths = {"w": [4, 4, 4]}
    monkeypatch.setattr(sp, "_dp_gather_widths", lambda: widths["w"])
    runner = types.SimpleNamespace(is_draft_worker=False)
    fb = types.SimpleNamespace(global_num_tokens_cpu=[2, 0, 3], global_num_tokens_padded_cpu=None)
    sp.hook_before_forward(runner, fb)
    assert rt.dp_padding.real.tolist() == [2, 0, 3]
    real = {0: [1, 2], 1: [3, 3], 8: [3, 1], 9: [2, 3], 10: [1, 1]}  # gathered row -> its real experts
    ids = torch.zeros((12, 2), dtype=torch.int64)  # padding rows: expert 0
    for row, e in real.items():
        ids[row] = torch.tensor(e)
    info = types.SimpleNamespace(tempo_layer_id=1)
    out = sp.hook_logical_to_physical(lambda *a: pytest.fail("must not fall through"), ids, info)
    want = np.bincount(np.array(list(real.values())).ravel(), minlength=4)
    assert rt.counts[1].tolist() == want.tolist() == [0, 4, 2, 4]  # before the fix: expert 0 counted 14 times
    holders = {e: set(np.flatnonzero(P2L[1] == e).tolist()) for e in range(4)}
    assert all(int(out[t, k]) in holders[int(ids[t, k])] for t in range(12) for k in range(2))  # padding still mapped
    # SUM_LEN (widths aligned, unequal): the same real rows at other offsets
    rt.counts.zero_()
    widths["w"] = [2, 0, 4]
    ids2 = torch.cat([ids[0:2], ids[8:12]])
    sp.hook_logical_to_physical(lambda *a: pytest.fail("must not fall through"), ids2, info)
    assert rt.counts[1].tolist() == [0, 4, 2, 4]
    # a batch SGLang already padded (global_num_tokens_padded_cpu set): unknown, every row counts
    rt.counts.zero_()
    sp.hook_before_forward(runner, types.SimpleNamespace(global_num_tokens_cpu=[4, 4, 4],
                                                         global_num_tokens_padded_cpu=[4, 4, 4]))
    widths["w"] = [4, 4, 4]
    sp.hook_logical_to_physical(lambda *a: None, ids, info)
    assert rt.counts[1].sum() == 24
    # a prefix bound from SGLang (select_experts' num_token_non_padded) is used as given
    rt.counts.zero_()
    sp.hook_select_experts(lambda **kw: sp.hook_logical_to_physical(None, ids, info), num_token_non_padded=torch.tensor(1))
    assert rt.counts[1].tolist() == [0, 1, 1, 0]


@pytest.mark.needs("torch")
def test_tempo_params_takes_a_calibration_fit(tmp_path, monkeypatch):
    """TEMPO_PARAMS names a paper set or a fit.json of `python -m tempo
    calibrate` (file or recording folder, optional #form); a bad path or file fails at start-up
    naming TEMPO_PARAMS."""
    import json

    from tempo import CostModel
    from tempo.core import paths
    from tempo.serving.settings import load_fit

    rec = paths.ROOT / "data" / "measured" / "nvidia-h200" / "2026-11-30-deep_gemm-dsv3"
    fits = json.loads((rec / "fit.json").read_text())
    tt = fits["three_term"]["params"]
    m = ServingSettings.from_env({"TEMPO_PARAMS": str(rec / "fit.json")}).cost_model()
    assert (m.a, m.b, m.c, m.beta, m.c2, m.gamma) == (tt["a"], tt["b"], tt["c"], tt["beta"], tt["c2"], tt["gamma"])
    assert m.name == "2026-11-30-deep_gemm-dsv3#three_term"
    assert ServingSettings(params=str(rec)).cost_model() == m  # the recording folder
    tile = ServingSettings(params=f"{rec}#tile").cost_model()
    assert tile.b2 == fits["tile"]["params"]["b2"] > 0 and tile.c2 is None
    assert load_fit(f"{rec}#max_affine").b2 == 0
    assert ServingSettings().cost_model() == CostModel.named("proxy-serving")
    (tmp_path / "junk.json").write_text("{not json")
    (tmp_path / "other.json").write_text(json.dumps({"samples": 3}))
    (tmp_path / "neg").mkdir()
    (tmp_path / "neg" / "fit.json").write_text(json.dumps({"max_affine": {"params": {"a": 1, "b": -2, "c": 0,
                                                                                     "beta": 0.1}}}))
    for bad, msg in ((str(tmp_path / "missing" / "fit.json"), "does not exist"), (str(tmp_path / "junk.json"), "JSON"),
                     (str(tmp_path / "other.json"), "not a calibration fit.json"),
                     (f"{rec}#cubic", "no fitted form 'cubic'"), (str(tmp_path / "neg"), "unusable parameters"),
                     ("dsv9-offline", "unknown parameter set")):
        with pytest.raises(ValueError, match="TEMPO_PARAMS") as exc:
            ServingSettings.from_env({"TEMPO_PARAMS": bad})
        assert msg in str(exc.value)
    # the runtime hands the fitted model to its refresher (and so to the solver process)
    got = {}

    class Recorder:
        def __init__(self, *a, **k):
            got.update(settings=a[4])

        def start(self):
            pass

    monkeypatch.setattr("tempo.serving.refresher.Refresher", Recorder)
    TempoRuntime(P2L, 2, settings=ServingSettings(params=str(rec)))
    assert got["settings"].cost_model() == m


@pytest.mark.needs("torch")
def test_graph_capture_hooks_hold_the_lock_from_begin_to_end(monkeypatch):
    """The torch-level capture hooks (every CUDAGraph capture, whatever SGLang
    code starts it) hold the runtime's device lock from capture_begin to capture_end, release
    it when capture_begin fails and when capture_end fails, and do nothing without a runtime."""
    rt = TempoRuntime(P2L, 2, start=False)
    graph = types.SimpleNamespace()
    held = []
    monkeypatch.setattr(sp, "_RUNTIME", None)
    sp.hook_graph_capture_begin(lambda g, **k: held.append(rt.device_lock._is_owned()), graph)
    assert held == [False] and not hasattr(graph, "_tempo_guard")
    monkeypatch.setattr(sp, "_RUNTIME", rt)
    sp.hook_graph_capture_begin(lambda g, **k: held.append(rt.device_lock._is_owned()), graph,
                                capture_error_mode="global")
    assert held[-1] and rt.device_lock._is_owned()
    other = threading.Thread(target=lambda: held.append(rt.device_lock.acquire(timeout=0.2)))
    other.start()
    other.join()
    assert held[-1] is False  # the refresher cannot snapshot or publish mid-capture
    sp.hook_graph_capture_end(lambda g: held.append(rt.device_lock._is_owned()), graph)
    assert held[-1] and not rt.device_lock._is_owned()  # held through the original, released after
    with pytest.raises(RuntimeError):
        sp.hook_graph_capture_begin(lambda g: (_ for _ in ()).throw(RuntimeError("capture failed")), graph)
    assert not rt.device_lock._is_owned()
    sp.hook_graph_capture_begin(lambda g: None, graph)
    with pytest.raises(RuntimeError):
        sp.hook_graph_capture_end(lambda g: (_ for _ in ()).throw(RuntimeError("invalidated")), graph)
    assert not rt.device_lock._is_owned()


@pytest.mark.needs("torch")
def test_invalid_pairs_are_counted_logged_and_reported(caplog):
    """The runtime always passes the invalid-pair counter; a logical
    id >= E routes as a masked slot (-1), is not counted, never raises in the forward pass, and
    the snapshot reads the counter into the stats with a log line."""
    import logging

    rt = TempoRuntime(P2L, 2, start=False)
    out = rt.dispatch(0, torch.tensor([[0, 4], [7, 1], [2, 3]]), torch.tensor(2))  # row 2 is padding
    assert out[0, 1] == -1 and out[1, 0] == -1 and rt.invalid.tolist() == [2]
    assert rt.counts[0].tolist() == [1, 1, 0, 0]
    with caplog.at_level(logging.WARNING, logger="tempo.serving"):
        rt._snapshot()
        rt._snapshot()  # unchanged: no second line
    assert rt.stats["invalid_pairs"] == 2 and caplog.text.count("logical id >= E") == 1


@pytest.mark.needs("torch")
def test_update_layers_keeps_the_refresher_and_refuses_stale_tables():
    """A rebalance chunk neither stops the refresher thread nor restarts
    its solver; a table published for the old placement afterwards is refused; the stats count
    the chunks and the placements."""
    rt = TempoRuntime(P2L, 2, settings=ServingSettings(solver="thread", refresh_ms=20, deadline_ms=20000))
    try:
        thread, solver = rt.refresher._thread, rt.refresher.solver
        new = np.array([[0, 1, 2, 3, 2, 3], [0, 1, 2, 3, 1, 1]])
        table = np.full(tuple(rt.prob.shape), 0.0, np.float32)
        table[..., 0] = 1.0
        rt.update_layers(new, [0])
        assert rt.epoch == 1 and rt._publish(table, epoch=0) is False  # solved before the rebalance
        rt.update_layers(new, [1])
        assert rt.refresher._thread is thread and thread.is_alive() and rt.refresher.solver is solver
        assert rt._publish(table, epoch=2) is True and float(rt.prob[0, 0, 0, 0]) == 1.0
        _wait_published(rt)
        st = rt.stats
        assert st["rebalance_chunks"] == 2 and st["placements"] >= 1 and st["refresher_running"] == 1
        assert st["published"] >= 1 and st["solver_restarts"] == 0
    finally:
        rt.close()
    assert rt.stats["refresher_published"] >= 1 and rt.stats["refresher_running"] == 0


def test_solver_kind_settings():
    """The solver backend is one setting, TEMPO_SOLVER (one spelling per backend)."""
    assert ServingSettings().solver == "process"
    assert ServingSettings.from_env({"TEMPO_SOLVER": "noop"}).solver == "noop"
    assert ServingSettings.from_env({"TEMPO_SOLVER": "thread"}).solver == "thread"
    with pytest.raises(ValueError, match="TEMPO_SOLVER"):
        ServingSettings.from_env({"TEMPO_SOLVER": "gpu"})
    assert ServingSettings.from_env({"TEMPO_STALE_WINDOWS": "5"}).stale_windows == 5
    with pytest.raises(ValueError, match="TEMPO_STALE_WINDOWS"):
        ServingSettings.from_env({"TEMPO_STALE_WINDOWS": "0"})
    with pytest.raises(TypeError, match="ServingSettings"):
        TempoRuntime(P2L, 2, settings={"solver": "noop"}, start=False)


def test_a_runner_that_bypasses_the_dispatch_is_named_once(caplog):
    """A MoE runner whose top-k format skips SGLang's logical-to-physical map (so tempo's) is
    logged once per process with the reason; the usual runners say nothing."""
    sp._WARNED.clear()
    mr = types.SimpleNamespace(server_args=types.SimpleNamespace(moe_runner_backend="triton_kernel"))
    with caplog.at_level("WARNING", logger="tempo.serving"):
        why = sp._warn_bypassing_runner(mr)
        assert "triton_kernel" in why and "skipped" in why
        assert sp._warn_bypassing_runner(mr) == why
    assert sum("triton_kernel" in r.message for r in caplog.records) == 1
    for ok in ("auto", "triton", "deep_gemm", None):
        mr.server_args.moe_runner_backend = ok
        assert sp._warn_bypassing_runner(mr) is None


@pytest.mark.needs("torch")
def test_update_layers_time_is_counted():
    rt = sp.TempoRuntime(P2L, 2, start=False)
    try:
        rt.update_layers(P2L[::-1].copy(), [0])
        rt.update_layers(P2L, [1])
        s = rt.stats
        assert s["rebalance_chunks"] == 2 and 0 < s["update_layers_max_us"] <= s["update_layers_us"]
    finally:
        rt.close()
