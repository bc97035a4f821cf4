"""TEMPO as an SGLang plugin (paper Section 4.4, Appendix D), with no patched SGLang sources.

:func:`register` (entry point of the ``sglang.srt.plugins`` group) refuses any SGLang but
``SGLANG_VERSION`` (``TEMPO_SGLANG_ANY_VERSION=1`` overrides) and registers :data:`HOOKS`, the
paper's seven patch points (each hook's docstring says what it does):

1. ``--ep-dispatch-algorithm`` accepts ``tempo`` / ``tempo_noop`` (:func:`hook_add_cli_args`).
2. The runtime (tables, counters, refresher, solver) is installed before weight loading and
   graph capture (:func:`hook_after_lplb_init`); :func:`hook_before_forward` counts steps.
3. Tempo layers' logical-to-physical map goes through the dispatch-and-count kernel, with a
   padding bound where SGLang gives one (:func:`hook_logical_to_physical` and neighbours).
4. The recorder gathers with ``deepep_mode=auto`` (:func:`hook_gatherer_init_new`).
5. After an EPLB rebalance the moved layers' rows are rewritten in place (:func:`hook_after_rebalance`).
6. Every CUDA-graph capture holds the runtime's device lock (:data:`CAPTURE_ENTRY_POINTS`).
7. ``TEMPO_RECORDER_BUFFER_CAP`` caps the recorder buffer (:func:`hook_buffer_init_new`).

Configuration: :class:`tempo.serving.settings.ServingSettings`.  Raises RuntimeError at install
for layouts whose padding the kernel cannot tell from tokens (:func:`_routing_layout`) and under
``SGLANG_OPT_DEEPGEMM_MEGA_GATE=1`` (SGLang's mega gate would pick replicas itself).
"""
from __future__ import annotations

import contextvars
import logging
import os

from .runtime import TempoRuntime, uniforms  # noqa: F401  (re-exported: the plugin's runtime)

__all__ = ["TempoRuntime", "uniforms", "register", "HOOKS", "SGLANG_VERSION", "check_sglang_version", "get_runtime"]
from .settings import ServingSettings

log = logging.getLogger("tempo.serving")

SGLANG_VERSION = "0.5.23"
ALGORITHMS = ("tempo", "tempo_noop")
_non_padded: contextvars.ContextVar = contextvars.ContextVar("tempo_num_token_non_padded", default=None)
_RUNTIME = None


class SGLangVersionError(RuntimeError):
    pass


def check_sglang_version(version: str | None = None) -> str:
    """Raise :class:`SGLangVersionError` unless SGLang is the version the hooks were written
    against (their targets are private functions that move between releases)."""
    if version is None:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as _v

        try:
            version = _v("sglang")
        except PackageNotFoundError:
            import sglang

            version = getattr(sglang, "__version__", "unknown")
    if version != SGLANG_VERSION and not ServingSettings.from_env().any_version:
        raise SGLangVersionError(
            f"the tempo SGLang plugin is written against sglang=={SGLANG_VERSION}, found {version}. "
            f"Install sglang=={SGLANG_VERSION}, or set TEMPO_SGLANG_ANY_VERSION=1 to try anyway.")
    return version


# ---------------------------------------------------------------------------- runtime
def get_runtime():
    return _RUNTIME


# ---------------------------------------------------------------------------- hooks
def _algorithm() -> str | None:
    from sglang.srt.runtime_context import get_exec

    return get_exec().moe.ep_dispatch_algorithm


def hook_add_cli_args(result, parser, *args, **kwargs):
    """AFTER ``ServerArgs.add_cli_args``: accept tempo / tempo_noop."""
    for action in parser._actions:
        if action.dest == "ep_dispatch_algorithm" and action.choices is not None:
            action.choices = list(action.choices) + [a for a in ALGORITHMS if a not in action.choices]
    return result


def hook_init_new(original, cls, layer_id, *args, **kwargs):
    """AROUND ``ExpertLocationDispatchInfo.init_new``: remember the layer id of tempo layers."""
    info = original(cls, layer_id, *args, **kwargs)
    if info is not None and info.ep_dispatch_algorithm in ALGORITHMS:
        info.tempo_layer_id = int(layer_id)  # a plain attribute: the dataclass is not frozen
    return info


def _forward_non_padded():
    try:
        from sglang.srt.model_executor.forward_context import get_forward_context, has_forward_context
    except ImportError:
        return None
    if not has_forward_context():
        return None
    get = get_forward_context().moe_num_token_non_padded
    return get() if callable(get) else None


def _dp_gather_widths():
    """The DP gather's slot widths for this forward (SGLang 0.5.23: the per-rank token
    counts as padded for the gather, set by ``set_dp_buffer_len`` in eager, capture and replay
    paths), or None."""
    try:
        from sglang.srt.layers.dp_attention import get_dp_global_num_tokens
    except ImportError:
        return None
    return get_dp_global_num_tokens()


def _dispatch(layer, topk_ids, n):
    """The runtime's kernel with the padding bound ``n``; with no bound and a DP-gathered
    input (attention DP, a2a none), the per-DP-slot padding mask."""
    widths = _dp_gather_widths() if n is None and _RUNTIME.dp_padding is not None else None
    return _RUNTIME.dispatch(layer, topk_ids, n, widths)


def dp_real_tokens(forward_batch):
    """Real tokens per attention-DP rank of a forward batch as ``ModelRunner.forward`` receives
    it: ``global_num_tokens_cpu`` (SGLang 0.5.23 overwrites it with the padded counts in
    ``prepare_mlp_sync_batch``, inside ``forward``; a batch already padded, recognisable by
    ``global_num_tokens_padded_cpu``, gives None: unknown, every row counts)."""
    if forward_batch is None or getattr(forward_batch, "global_num_tokens_padded_cpu", None) is not None:
        return None
    g = getattr(forward_batch, "global_num_tokens_cpu", None)
    return None if g is None else [int(x) for x in g]


def hook_logical_to_physical(original, topk_ids, info, *args, **kwargs):
    """AROUND ``topk_ids_logical_to_physical``: tempo layers go through the dispatch-and-count kernel."""
    layer = getattr(info, "tempo_layer_id", None) if info is not None else None
    if layer is None or _RUNTIME is None:
        return original(topk_ids, info, *args, **kwargs)
    n = _non_padded.get()
    if n is None:
        n = _forward_non_padded()
    return _dispatch(layer, topk_ids, n)


def hook_biased_postprocess(original, topk_ids, info, num_token_non_padded, *args, **kwargs):
    """AROUND ``_biased_grouped_topk_postprocess`` (a torch.compile'd function in SGLang):
    tempo layers are mapped here, outside the compiled region, with the padding bound given
    to the kernel (SGLang masks padding only after mapping, so counting must mask itself),
    then the padding rows are masked as SGLang does."""
    layer = getattr(info, "tempo_layer_id", None) if info is not None else None
    if layer is None or _RUNTIME is None:
        return original(topk_ids, info, num_token_non_padded, *args, **kwargs)
    from sglang.srt.layers.moe.topk import _mask_topk_ids_padded_region

    topk_ids = _dispatch(layer, topk_ids, num_token_non_padded)
    _mask_topk_ids_padded_region(topk_ids, num_token_non_padded)
    return topk_ids


def hook_select_experts(original, *args, **kwargs):
    """AROUND ``select_experts``: the same for the plain select_experts path (its padding
    bound is a keyword argument)."""
    n = kwargs.get("num_token_non_padded")
    if n is None:
        return original(*args, **kwargs)
    token = _non_padded.set(n)
    try:
        return original(*args, **kwargs)
    finally:
        _non_padded.reset(token)


def _par(par, name: str, default):
    """A width of SGLang's parallel state (it raises RuntimeError, not AttributeError, for a
    width not published in this process)."""
    try:
        return getattr(par, name)
    except (AttributeError, RuntimeError, ValueError):
        return default


def _routing_layout(par) -> tuple[bool, int]:
    """(rank_invariant, dp_size) of this server's MoE input (SGLang 0.5.23).

    Raises RuntimeError for the gathered layouts whose padding rows the kernel cannot tell
    from tokens: attention context parallelism and attention-TP sequence sharding.
    """
    # Scattered input (SGLang's is_moe_input_scattered_across_dp_ranks): each rank routes its own
    # shard, window counts are summed over ranks, no cross-rank agreement is needed.  Otherwise
    # every rank routes the same gathered buffer and dispatch must be rank-invariant (TableSync).
    from sglang.srt.layers.moe.utils import is_moe_input_scattered_across_dp_ranks

    if is_moe_input_scattered_across_dp_ranks():
        # a2a dispatch, or a2a none with the FP4 all-gather or dwdp: each rank routes its local shard
        return False, 1
    if int(_par(par, "attn_cp_size", 1)) > 1:
        raise RuntimeError("--ep-dispatch-algorithm tempo does not support attention context parallelism with "
                           "--moe-a2a-backend none: the MoE input is gathered across CP ranks with the real rows "
                           "zigzag-permuted and SGLang gives no padding bound, so padding would be counted as "
                           "tokens. Use an a2a backend (e.g. --moe-a2a-backend deepep) or no attention CP.")
    dp_size = int(_par(par, "attn_dp_size", 1))
    if dp_size == 1:
        from sglang.srt.utils.common import require_gathered_buffer

        if require_gathered_buffer():
            raise RuntimeError("--ep-dispatch-algorithm tempo does not support attention-TP sequence sharding with "
                               "--moe-a2a-backend none (set by --moe-dense-tp-size): under CUDA-graph replay SGLang "
                               "gives no padding bound for the gathered MoE input, so padding would be counted as "
                               "tokens. Use an a2a backend, attention DP (--enable-dp-attention), or drop "
                               "--moe-dense-tp-size.")
    return True, dp_size


#: MoE runner backends whose top-k output bypasses SGLang's logical-to-physical map when no
#: remapping is configured (SGLang 0.5.23, layers/moe/topk.py: ``triton_kernel`` routes inside
#: its own ``routing()``, flashinfer trtllm's BYPASSED format leaves the map unset): tempo layers
#: never reach the dispatch hook there
BYPASSING_RUNNERS = ("triton_kernel", "flashinfer_trtllm")


def _warn_bypassing_runner(model_runner) -> str | None:
    """Log once (per process) when the MoE runner's top-k format skips tempo's dispatch; the
    reason, or None."""
    backend = getattr(getattr(model_runner, "server_args", None), "moe_runner_backend", None)
    backend = getattr(backend, "value", backend)
    if backend not in BYPASSING_RUNNERS:
        return None
    why = (f"--moe-runner-backend {backend} computes its top-k in a format that does not go through SGLang's "
           f"logical-to-physical map, so tempo's dispatch is skipped: counters stay 0, the refresher idles and "
           f"every replica choice is SGLang's own. Use --moe-runner-backend auto, triton or deep_gemm for tempo.")
    if why not in _WARNED:
        _WARNED.add(why)
        log.warning("tempo: %s", why)
    return why


_WARNED: set = set()


def _install(model_runner, algo: str):
    """Build the runtime for this scheduler process (see :func:`hook_after_lplb_init`)."""
    import dataclasses

    import torch.distributed as dist
    from sglang.srt.eplb.expert_location import get_global_expert_location_metadata
    from sglang.srt.runtime_context import get_parallel

    from .runtime import GlooAggregator, TableSync

    settings = ServingSettings.from_env()  # every TEMPO_* variable, validated once, named in errors
    _warn_bypassing_runner(model_runner)
    if algo == "tempo_noop":
        settings = dataclasses.replace(settings, solver="noop")
    if os.environ.get("SGLANG_OPT_DEEPGEMM_MEGA_GATE", "").lower() in ("1", "true", "yes"):
        # SGLang's mega gate picks replicas itself for every algorithm but lp/fake: tempo would be bypassed
        raise RuntimeError("--ep-dispatch-algorithm tempo cannot run with SGLANG_OPT_DEEPGEMM_MEGA_GATE=1: "
                           "the mega gate picks replicas itself and would bypass tempo silently")
    meta = get_global_expert_location_metadata()
    par = get_parallel()
    ep_size, rank = int(meta.ep_size), int(par.moe_ep_rank)  # SGLang's own parallel state (0.5.23)
    n_nodes = settings.n_nodes(ep_size)  # clear error for a hier setting that does not fit
    node = rank // settings.gpus_per_node if n_nodes is not None else 0
    rank_invariant, dp_size = _routing_layout(par)
    distributed = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
    aggregate = sync = None
    noop = settings.solver == "noop"
    if distributed and rank_invariant and not noop and _par(par, "pp_size", 1) != 1:
        # the agreed switch needs every rank to run the same forward passes
        raise RuntimeError("--ep-dispatch-algorithm tempo with --moe-a2a-backend none does not support pipeline "
                           "parallelism (pp_size > 1): ranks would not agree on the forward step of a table switch")
    if distributed and rank_invariant and not noop:
        # every rank routes the same tokens: one table for all, applied at the same step.
        # both groups are created by every rank, in this order, at this point (symmetric).
        world = dist.get_world_size()
        bcast, agree = dist.new_group(backend="gloo"), dist.new_group(backend="gloo")
        L, P = meta.physical_to_logical_map.shape
        E = int(meta.num_logical_experts)
        shape = (n_nodes or 1, L, E, P - E + 1)  # TempoRuntime's tables: [N, L, E, R], default width
        sync = TableSync(dist.get_rank(), world, shape, bcast, agree, settings.agree_every)
    elif distributed and not rank_invariant:
        aggregate = GlooAggregator(dist.new_group(backend="gloo"), dist.get_world_size())  # disjoint shards
    return TempoRuntime(meta.physical_to_logical_map, ep_size, device=meta.physical_to_logical_map.device,
                        settings=settings, n_logical=int(meta.num_logical_experts),
                        node=node, rank_invariant=rank_invariant, aggregate=aggregate, sync=sync,
                        dp_size=dp_size if dp_size > 1 else None, rank=rank)


def hook_after_lplb_init(result, model_runner, *args, **kwargs):
    """AFTER ``ModelRunner.maybe_init_lplb_solvers``: install TEMPO's runtime (before weight
    loading and graph capture)."""
    global _RUNTIME
    algo = _algorithm()
    if algo not in ALGORITHMS or getattr(model_runner, "is_draft_worker", False):
        return result
    _RUNTIME = _install(model_runner, algo)
    log.info("tempo: %s dispatch installed (%d layers, %d logical experts, table width %d, %s solver, %s)", algo,
             *_RUNTIME.counts.shape, _RUNTIME.width, _RUNTIME.settings.solver,
             "rank-invariant" if _RUNTIME.rank_invariant else "per-rank tokens")
    return result


def hook_before_forward(model_runner, *args, **kwargs):
    """BEFORE ``ModelRunner.forward(forward_batch, ...)`` (once per forward pass, graph replay
    or not): count the step, record the real tokens per DP rank (attention DP, a2a none); with
    rank-invariant dispatch, apply the table every rank agreed on for this step."""
    if _RUNTIME is not None and not getattr(model_runner, "is_draft_worker", False):
        fb = args[0] if args else kwargs.get("forward_batch")
        _RUNTIME.on_forward(dp_real_tokens(fb) if _RUNTIME.dp_padding is not None else None)
    return None


def hook_capture_guard(original, *args, **kwargs):
    """AROUND a capture entry point (:data:`CAPTURE_ENTRY_POINTS`): while SGLang captures graphs
    (decode, prefill, speculative drafts, elastic recapture; global or relaxed capture mode),
    the refresher makes no CUDA call (it waits on the runtime's lock)."""
    if _RUNTIME is None:
        return original(*args, **kwargs)
    with _RUNTIME.capture_guard():
        return original(*args, **kwargs)


def hook_graph_capture_begin(original, graph, *args, **kwargs):
    """AROUND ``torch.cuda.graphs.CUDAGraph.capture_begin``: take the runtime's device lock
    for this capture (released by :func:`hook_graph_capture_end`, or here if the capture
    does not begin).  Every capture, whatever SGLang code starts it, goes through here."""
    rt = _RUNTIME
    if rt is None:
        return original(graph, *args, **kwargs)
    rt.device_lock.acquire()
    try:
        out = original(graph, *args, **kwargs)
    except BaseException:
        rt.device_lock.release()
        raise
    try:
        graph._tempo_guard = rt  # the lock to release at capture_end (the same thread, an RLock)
    except AttributeError:
        pass
    return out


def hook_graph_capture_end(original, graph, *args, **kwargs):
    """AROUND ``torch.cuda.graphs.CUDAGraph.capture_end``: release the lock the capture took,
    whether or not the capture ends well."""
    rt = getattr(graph, "_tempo_guard", None)
    try:
        return original(graph, *args, **kwargs)
    finally:
        if rt is not None:
            graph._tempo_guard = None
            rt.device_lock.release()


def hook_gatherer_init_new(original, *args, **kwargs):
    """AROUND ``_SinglePassGatherer.init_new``: ``deepep_mode=auto`` gathers at
    select_experts instead of raising NotImplementedError."""
    try:
        return original(*args, **kwargs)
    except NotImplementedError:
        from sglang.srt.eplb import expert_distribution as ed
        from sglang.srt.runtime_context import get_exec

        if get_exec().moe.deepep_mode != "auto":
            raise
        return ed._SelectExpertsSinglePassGatherer(*args, **kwargs)


def hook_after_rebalance(result, *args, **kwargs):
    """AFTER ``update_expert_location_with_recovery`` (once per rebalance chunk): rewrite the
    rows of the chunk's layers (``update_layer_ids``) in place; later chunks' layers keep
    theirs until their own chunk moves their weights."""
    meta = kwargs.get("new_expert_location_metadata")
    if _RUNTIME is not None and meta is not None:
        layers = kwargs.get("update_layer_ids")
        _RUNTIME.update_layers(meta.physical_to_logical_map, layers)
        log.info("tempo: tables of %s layers updated in place after an EPLB rebalance",
                 "all" if layers is None else len(layers))
    return result


def hook_buffer_init_new(item_shape, buffer_size, *args, **kwargs):
    """BEFORE ``_Buffer.init_new``: in tempo runs only, and only when
    ``TEMPO_RECORDER_BUFFER_CAP`` is set, cap a finite recorder buffer (buffer x L x P x 4
    bytes on GPU).  Baseline runs and an unbounded buffer (-1) are left alone."""
    cap = ServingSettings.from_env().recorder_buffer_cap
    if cap is None or buffer_size < 0 or buffer_size <= cap:
        return None
    try:
        if _algorithm() not in ALGORITHMS:
            return None
    except Exception:  # no runtime context (not a server process): leave SGLang's size
        return None
    log.info("tempo: expert-distribution recorder buffer capped at %d steps (asked %d)", cap, buffer_size)
    return (item_shape, cap, *args), kwargs


_MR = "sglang.srt.model_executor.model_runner.ModelRunner"
_SPEC = "sglang.srt.speculative"
#: SGLang 0.5.23's methods that capture CUDA graphs (each a whole capture sequence): the
#: target model's decode and prefill graphs, their recapture (PD role switch, elastic EP),
#: and the speculative draft workers' graphs.  Captures reached any other way are still
#: guarded, one graph at a time, by the CUDAGraph.capture_begin / capture_end hooks.
CAPTURE_ENTRY_POINTS = (
    f"{_MR}.init_cuda_graphs", f"{_MR}.init_decode_cuda_graph", f"{_MR}.init_prefill_cuda_graph",
    f"{_MR}.recapture_decode_cuda_graph", f"{_MR}._recapture_elastic_cuda_graphs",
    f"{_SPEC}.base_spec_worker.EagleDraftWorkerBase.init_cuda_graphs",
    f"{_SPEC}.eagle_worker_v2.EagleDraftWorker.init_cuda_graphs",
    f"{_SPEC}.eagle_worker_v2.EagleDraftWorker._capture_cuda_graphs",
    f"{_SPEC}.frozen_kv_mtp_worker_v2.FrozenKVMTPDraftWorker.init_cuda_graphs",
    f"{_SPEC}.frozen_kv_mtp_worker_v2.FrozenKVMTPDraftWorker._capture_cuda_graphs",
)
HOOKS = [
    ("sglang.srt.server_args.ServerArgs.add_cli_args", hook_add_cli_args, "AFTER"),
    (f"{_MR}.maybe_init_lplb_solvers", hook_after_lplb_init, "AFTER"),
    (f"{_MR}.forward", hook_before_forward, "BEFORE"),
    *[(target, hook_capture_guard, "AROUND") for target in CAPTURE_ENTRY_POINTS],
    ("torch.cuda.graphs.CUDAGraph.capture_begin", hook_graph_capture_begin, "AROUND"),
    ("torch.cuda.graphs.CUDAGraph.capture_end", hook_graph_capture_end, "AROUND"),
    ("sglang.srt.eplb.expert_location_dispatch.ExpertLocationDispatchInfo.init_new", hook_init_new, "AROUND"),
    ("sglang.srt.eplb.expert_location_dispatch.topk_ids_logical_to_physical", hook_logical_to_physical, "AROUND"),
    ("sglang.srt.layers.moe.topk._biased_grouped_topk_postprocess", hook_biased_postprocess, "AROUND"),
    ("sglang.srt.layers.moe.topk.select_experts", hook_select_experts, "AROUND"),
    ("sglang.srt.eplb.expert_distribution._SinglePassGatherer.init_new", hook_gatherer_init_new, "AROUND"),
    ("sglang.srt.eplb.eplb_manager.update_expert_location_with_recovery", hook_after_rebalance, "AFTER"),
    ("sglang.srt.eplb.expert_distribution._Buffer.init_new", hook_buffer_init_new, "BEFORE"),
]


def register() -> None:
    """Entry point of the ``sglang.srt.plugins`` group: check the version, register hooks."""
    check_sglang_version()
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    for target, fn, kind in HOOKS:
        HookRegistry.register(target, fn, getattr(HookType, kind))
    log.info("tempo: registered %d SGLang hooks (sglang %s)", len(HOOKS), SGLANG_VERSION)
