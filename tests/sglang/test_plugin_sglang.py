"""The SGLang plugin against the real sglang 0.5.23 package (CPU).  Runs in the optional
environment of ``make sglang-test``; skipped where sglang is not importable."""
import argparse

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sglang.srt.plugins.hook_registry")

from tempo.serving import sglang_plugin as sp  # noqa: E402


@pytest.fixture(scope="module")
def hooked():
    from sglang.srt.plugins.hook_registry import HookRegistry

    HookRegistry.reset()
    sp.register()
    HookRegistry.apply_hooks()
    yield HookRegistry
    sp._RUNTIME = None


def test_version_pinned():
    assert sp.check_sglang_version() == sp.SGLANG_VERSION


def test_every_hook_target_resolves_and_is_patched(hooked):
    targets = {t for t, _, _ in sp.HOOKS}
    assert targets <= hooked._patched, targets - hooked._patched


def test_tempo_parses_as_a_dispatch_algorithm(hooked):
    from sglang.srt.server_args import ServerArgs

    p = argparse.ArgumentParser()
    ServerArgs.add_cli_args(p)
    for algo in ("tempo", "tempo_noop", "static"):
        assert p.parse_args(["--model-path", "m", "--ep-dispatch-algorithm", algo]).ep_dispatch_algorithm == algo
    with pytest.raises(SystemExit):
        p.parse_args(["--model-path", "m", "--ep-dispatch-algorithm", "nonsense"])


def _runtime_and_info(layer=1, **kw):
    from sglang.srt.eplb.expert_location_dispatch import ExpertLocationDispatchInfo

    E, L, g = 8, 2, 4
    p2l = np.array([[0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 0]] * L)  # 12 physical slots, 3 per GPU
    rt = sp.TempoRuntime(p2l, g, start=False, **kw)
    sp._RUNTIME = rt
    info = ExpertLocationDispatchInfo(
        ep_dispatch_algorithm="tempo", partial_logical_to_rank_dispatch_physical_map=None,
        partial_logical_to_all_physical_map=torch.zeros(E, 3, dtype=torch.int64),
        partial_logical_to_all_physical_map_num_valid=torch.ones(E, dtype=torch.int64), num_physical_experts=12)
    info.tempo_layer_id = layer
    return rt, info, p2l


def test_select_experts_cpu_path_routes_through_tempo(hooked):
    from sglang.srt.layers.moe import topk as T

    rt, info, p2l = _runtime_and_info()
    rt.prob[0, 1, 0] = 0.0
    rt.prob[0, 1, 0, 2] = 1.0  # expert 0: all tokens to its third replica (slot 11)
    torch.manual_seed(0)
    h, logits = torch.randn(6, 16), torch.randn(6, 8)
    logits[:, 0] = 10.0  # every token routes expert 0 first
    out = T.select_experts(h, logits, T.TopKConfig(top_k=2, renormalize=True, torch_native=True), layer_id=1,
                           num_token_non_padded=torch.tensor(4), expert_location_dispatch_info=info)
    ids = out.topk_ids
    assert ids[4:].eq(-1).all()  # SGLang masks the padding rows after mapping
    for t in range(4):
        for pid in ids[t].tolist():
            assert pid >= 0
    assert (ids[:4, 0] == 11).all()
    assert rt.counts[1].sum().item() == 8 and rt.counts[1, 0].item() == 4  # padding never counted
    assert rt.counts[0].sum().item() == 0
    logical = torch.tensor(p2l[1])[ids[:4]]
    assert logical[:, 0].eq(0).all()


def test_biased_postprocess_masks_padding_in_counts(hooked):
    from sglang.srt.layers.moe import topk as T

    rt, info, _ = _runtime_and_info(layer=0)
    ids = torch.tensor([[0, 1], [2, 3], [0, 0]])
    out = T._biased_grouped_topk_postprocess(ids.clone(), info, torch.tensor(2))
    assert rt.counts[0].sum().item() == 4 and rt.counts[0, 0].item() == 1
    assert out[2].eq(-1).all()


def test_non_tempo_layers_fall_through(hooked):
    from sglang.srt.eplb.expert_location_dispatch import ExpertLocationDispatchInfo, topk_ids_logical_to_physical

    info = ExpertLocationDispatchInfo(
        ep_dispatch_algorithm="static", partial_logical_to_rank_dispatch_physical_map=torch.tensor([3, 2, 1, 0]),
        partial_logical_to_all_physical_map=torch.zeros(4, 1, dtype=torch.int64),
        partial_logical_to_all_physical_map_num_valid=torch.ones(4, dtype=torch.int64), num_physical_experts=4)
    assert topk_ids_logical_to_physical(torch.tensor([[0, 1]]), info).tolist() == [[3, 2]]


def test_recorder_buffer_capped_in_tempo_runs_only(hooked, monkeypatch):
    from sglang.srt.eplb import expert_distribution as ed

    monkeypatch.setenv("TEMPO_RECORDER_BUFFER_CAP", "16")
    monkeypatch.setattr(sp, "_algorithm", lambda: "tempo")
    buf = ed._Buffer.init_new(item_shape=(2, 4), buffer_size=1000, dtype=torch.int32, device="cpu")
    assert len(buf._buffer) == 16
    monkeypatch.setattr(sp, "_algorithm", lambda: "static")  # a baseline run keeps SGLang's size
    buf = ed._Buffer.init_new(item_shape=(2, 4), buffer_size=1000, dtype=torch.int32, device="cpu")
    assert len(buf._buffer) == 1000


def test_sglang_names_the_runtime_reads():
    """Issue 15 item 4 and the rebalance hook, against the real 0.5.23 code: the rank comes from
    ``get_parallel().moe_ep_rank`` (ModelRunner has no such attribute), the rebalance passes
    ``update_layer_ids`` per chunk, the metadata knows its logical expert count, and the graph
    capture methods the guard wraps exist."""
    import inspect

    from sglang.srt import runtime_context as rc
    from sglang.srt.eplb.eplb_manager import update_expert_location_with_recovery
    from sglang.srt.eplb.expert_location import ExpertLocationMetadata
    from sglang.srt.model_executor.model_runner import ModelRunner

    assert {"moe_ep_rank", "pp_size", "attn_dp_size"} <= set(rc._parallel_fields())
    assert "moe_ep_rank" not in {n for n, _ in inspect.getmembers(ModelRunner)}
    assert "update_layer_ids" in inspect.signature(update_expert_location_with_recovery).parameters
    assert isinstance(inspect.getattr_static(ExpertLocationMetadata, "num_logical_experts"), property)
    for name in ("forward", "init_cuda_graphs", "init_decode_cuda_graph", "init_prefill_cuda_graph"):
        assert callable(getattr(ModelRunner, name))


def test_dp_gathered_padding_against_sglang(hooked):
    """Attention DP with a2a none (issue 15 item 6), against the real 0.5.23 code: the names
    the plugin reads exist and mean what it assumes, and through SGLang's own
    ``set_dp_buffer_len`` and the hooked ``topk_ids_logical_to_physical`` the padding rows of
    a MAX_LEN gathered buffer are not counted."""
    import dataclasses
    import inspect

    from sglang.srt.eplb.expert_location_dispatch import topk_ids_logical_to_physical
    from sglang.srt.layers import dp_attention as dpa
    from sglang.srt.model_executor.forward_batch_info import ForwardBatch
    from sglang.srt.model_executor.model_runner import ModelRunner

    fields = {f.name for f in dataclasses.fields(ForwardBatch)}
    assert {"global_num_tokens_cpu", "global_num_tokens_padded_cpu", "dp_padding_mode"} <= fields
    # SGLang gives no prefix bound for the DP-gathered buffer ...
    assert "attn_dp_size != 1" in inspect.getsource(ForwardBatch.moe_num_token_non_padded)
    # ... and pads global_num_tokens_cpu inside ModelRunner.forward, after the BEFORE hook reads it
    prep = inspect.getsource(ForwardBatch.prepare_mlp_sync_batch)
    assert "self.global_num_tokens_padded_cpu = global_num_tokens" in prep
    assert "self.global_num_tokens_cpu = global_num_tokens" in prep
    assert "prepare_mlp_sync_batch" in inspect.getsource(ModelRunner._prepare_eager_forward_batch)
    assert list(inspect.signature(ModelRunner.forward).parameters)[:2] == ["self", "forward_batch"]
    # the slot widths the plugin reads are what set_dp_buffer_len publishes (MAX_LEN, 3 DP ranks of 4 rows)
    dpa.set_dp_buffer_len(12, 4, True, [4, 4, 4])
    try:
        assert sp._dp_gather_widths() == [4, 4, 4]
        rt, info, _ = _runtime_and_info(layer=0, dp_size=3, rank_invariant=True)
        fb = ForwardBatch.__new__(ForwardBatch)  # only the two attributes the hook reads
        fb.global_num_tokens_cpu, fb.global_num_tokens_padded_cpu = [2, 0, 3], None
        sp.hook_before_forward(type("R", (), {"is_draft_worker": False})(), fb)
        ids = torch.zeros((12, 2), dtype=torch.int64)  # padding rows: expert 0
        ids[[0, 1, 8, 9, 10]] = torch.tensor([[1, 2], [3, 3], [3, 1], [2, 3], [1, 1]])
        topk_ids_logical_to_physical(ids, info)
        assert rt.counts[0].tolist() == [0, 4, 2, 4, 0, 0, 0, 0]
    finally:
        dpa.set_dp_buffer_len(0, 0, False, None)


def test_two_node_flags_parse_in_sglang():
    """serve-bench's two-node server command (Section 5.15) parses with sglang 0.5.23's own
    argument parser into the fields SGLang reads (nnodes, node_rank, dist_init_addr)."""
    from sglang.srt.server_args import ServerArgs

    from tempo.benchmarks import servebench as sb

    p = argparse.ArgumentParser()
    ServerArgs.add_cli_args(p)
    spec = sb.ServerSpec(model="m", tp=16, ep=16, nnodes=2, dist_init_addr="10.0.0.1:5000")
    for rank in (0, 1):
        ns = p.parse_args(spec.for_node(rank).args("tempo", 30001)[3:])
        assert (ns.nnodes, ns.node_rank, ns.dist_init_addr) == (2, rank, "10.0.0.1:5000")
        assert (ns.tp_size, ns.ep_size, ns.host) == (16, 16, "0.0.0.0")


class _Lock:
    """A stand-in for the runtime's device lock that records how deep it is held."""

    def __init__(self):
        self.depth, self.entered = 0, 0

    def acquire(self, *a, **k):
        self.depth += 1
        self.entered += 1
        return True

    def release(self):
        assert self.depth > 0, "released more often than taken"
        self.depth -= 1

    __enter__ = acquire

    def __exit__(self, *exc):
        self.release()


class _Probe:
    """A stand-in ``self`` for a capture method: any attribute use records whether the lock is
    held at that moment, then stops the method."""

    def __init__(self, lock, seen):
        object.__setattr__(self, "_lock", lock)
        object.__setattr__(self, "_seen", seen)

    def _stop(self):
        self._seen.append(self._lock.depth)
        raise RuntimeError("probe: stop here")

    def __getattr__(self, name):
        self._stop()

    def __setattr__(self, name, value):
        self._stop()


def test_capture_guard_covers_every_capture_of_sglang_0_5_23(hooked, monkeypatch):
    """Issue 25 item 4 (review N6), on sglang 0.5.23's own code: (1) every capture entry point
    the plugin names -- decode, prefill, their recapture, elastic recapture, and the EAGLE v2,
    base and frozen-KV MTP draft workers -- exists there, is hooked, and runs its body under the
    runtime's lock (released again when it fails); (2) every CUDA-graph capture in
    ``sglang/srt`` goes through ``torch.cuda.CUDAGraph.capture_begin``, which is hooked too, so
    a capture started anywhere else (piecewise, breakable, metadata glue, a future draft
    worker) holds the lock as well."""
    import inspect
    import pathlib
    import pkgutil
    import re

    import sglang

    rt, _, _ = _runtime_and_info()
    lock = _Lock()
    monkeypatch.setattr(rt, "device_lock", lock)
    # (1) the named entry points of 0.5.23
    names = {t.rsplit(".", 2)[-2] + "." + t.rsplit(".", 1)[-1] for t in sp.CAPTURE_ENTRY_POINTS}
    assert {"EagleDraftWorker._capture_cuda_graphs", "EagleDraftWorkerBase.init_cuda_graphs",
            "FrozenKVMTPDraftWorker._capture_cuda_graphs", "ModelRunner._recapture_elastic_cuda_graphs",
            "ModelRunner.init_decode_cuda_graph", "ModelRunner.init_prefill_cuda_graph"} <= names
    reached = 0
    for target in sp.CAPTURE_ENTRY_POINTS:
        assert target in hooked._patched, target
        owner, name = target.rsplit(".", 1)
        cls = pkgutil.resolve_name(owner)
        assert name in vars(cls), f"{target}: defined on a base class, not here"
        seen = []
        before = lock.entered
        try:
            getattr(cls, name)(_Probe(lock, seen))
        except Exception:
            pass
        assert lock.entered > before, f"{target} ran without the capture guard"
        assert lock.depth == 0, f"{target} left the lock held"
        assert all(d > 0 for d in seen), f"{target}'s body touched self outside the lock"
        reached += bool(seen)
    assert reached >= 5  # most bodies got as far as touching self (under the lock); the rest failed earlier
    # (2) one graph at a time: torch's CUDAGraph.capture_begin / capture_end are hooked ...
    import torch

    assert "torch.cuda.graphs.CUDAGraph.capture_begin" in hooked._patched
    assert "torch.cuda.graphs.CUDAGraph.capture_end" in hooked._patched
    assert "capture_begin" in inspect.getsource(torch.cuda.graph.__enter__)
    assert "capture_end" in inspect.getsource(torch.cuda.graph.__exit__)
    before = lock.entered
    with pytest.raises(Exception):
        torch.cuda.CUDAGraph.capture_begin(object())  # the original fails on CPU; the lock comes back
    assert lock.entered == before + 1 and lock.depth == 0
    # ... and every capture in sglang/srt starts there: torch.cuda.graph(...) or capture_begin on a
    # torch.cuda.CUDAGraph (nothing calls torch._C._CUDAGraph or the CUDA stream-capture API itself)
    root = pathlib.Path(sglang.__file__).parent / "srt"
    starts = re.compile(r"torch\.cuda\.graph\(|\.capture_begin\(|_CUDAGraph\b|cudaStreamBeginCapture|BeginCapture")
    capturing = {}
    for f in root.rglob("*.py"):
        text = f.read_text(errors="replace")
        hits = starts.findall(text)
        if hits:
            capturing[str(f.relative_to(root))] = hits
    assert not [f for f, h in capturing.items() if any("_CUDAGraph" in x or "BeginCapture" in x for x in h)]
    for f, hits in capturing.items():
        if "capture_begin(" in "".join(hits):  # a capture_begin of its own: on a torch.cuda.CUDAGraph
            text = (root / f).read_text()
            assert "torch.cuda.CUDAGraph" in text, f
    # the capture sites of 0.5.23 (a new one in another release shows up here)
    assert set(capturing) >= {"model_executor/runner_backend_utils/breakable_cuda_graph/breakable_cuda_graph.py",
                              "compilation/cuda_piecewise_backend.py",
                              "model_executor/runner/metadata_glue_graph.py"}
    # the decode and prefill runners capture through graph_capture + the backends above
    full = (root / "model_executor/runner_backend/full_cuda_graph_backend.py").read_text()
    assert "torch.cuda.CUDAGraph()" in full


def test_routing_layout_on_sglang_0_5_23(monkeypatch):
    """Issue 25 item 4 (review N10, sglang #9): which tokens a rank routes comes from SGLang's
    own ``is_moe_input_scattered_across_dp_ranks`` (a2a backends, and a2a none with the FP4
    all-gather or dwdp: per-rank shards, summed windows); the two gathered layouts SGLang gives
    no padding bound for are refused at start-up, naming the layout."""
    import inspect
    import types

    from sglang.srt.layers.moe import utils as moe_utils
    from sglang.srt.model_executor.forward_batch_info import ForwardBatch
    from sglang.srt.utils import common

    src = inspect.getsource(moe_utils.is_moe_input_scattered_across_dp_ranks)
    assert "should_use_flashinfer_cutlass_moe_fp4_allgather" in src and "dwdp_size" in src
    bound = inspect.getsource(ForwardBatch.moe_num_token_non_padded)
    assert "attn_tp_sequence_sharded" in bound and "_moe_input_gathered_across_cp" in bound
    par = types.SimpleNamespace(attn_cp_size=1, attn_dp_size=1)
    monkeypatch.setattr(moe_utils, "is_moe_input_scattered_across_dp_ranks", lambda: True)
    assert sp._routing_layout(par) == (False, 1)  # FP4 all-gather / dwdp / a2a: per-rank shards
    monkeypatch.setattr(moe_utils, "is_moe_input_scattered_across_dp_ranks", lambda: False)
    monkeypatch.setattr(common, "require_gathered_buffer", lambda: False)
    assert sp._routing_layout(par) == (True, 1)
    assert sp._routing_layout(types.SimpleNamespace(attn_cp_size=1, attn_dp_size=4)) == (True, 4)
    with pytest.raises(RuntimeError, match="attention context parallelism"):
        sp._routing_layout(types.SimpleNamespace(attn_cp_size=2, attn_dp_size=1))
    monkeypatch.setattr(common, "require_gathered_buffer", lambda: True)
    with pytest.raises(RuntimeError, match="attention-TP sequence sharding"):
        sp._routing_layout(par)
