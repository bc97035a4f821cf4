"""TEMPO as an SGLang plugin (paper Section 4.4, Appendix D), with no patched SGLang sources.

SGLang loads general plugins from the entry-point group ``sglang.srt.plugins`` (our
``pyproject.toml`` registers :func:`register`) and applies the hooks they register with
``sglang.srt.plugins.hook_registry.HookRegistry``.  The paper's seven patch points become:

1. ``--ep-dispatch-algorithm`` accepts ``tempo`` and ``tempo_noop``: an AFTER hook on
   ``ServerArgs.add_cli_args`` widens the argument's choices.
2. Tables, counters, the refresher thread and the solver process are installed after
   ``ModelRunner.maybe_init_lplb_solvers`` (AFTER), with a dedicated gloo group for count
   aggregation (the scheduler's groups are not thread-safe against a background thread).
3. ``ExpertLocationDispatchInfo.init_new`` (AROUND) tags each layer's dispatch info with its
   layer id; ``topk_ids_logical_to_physical`` (AROUND) sends tempo layers through the fused
   dispatch-and-count kernel; ``select_experts`` and ``_biased_grouped_topk_postprocess``
   (AROUND) hand the kernel ``num_token_non_padded`` so padding rows are never counted (the
   phantom hot expert; SGLang masks padding only after the mapping).
4. The recorder gatherer accepts ``deepep_mode=auto`` (AROUND on
   ``_SinglePassGatherer.init_new``: auto resolves per batch, so we gather at select_experts,
   which sees every token in either mode).
5. Tables are rebuilt after an EPLB rebalance (AFTER on ``update_expert_location_with_recovery``).
6. Graph capture runs in relaxed (``thread_local``) stream-capture mode (AROUND on
   ``FullCudaGraphBackend.capture_one``), so the refresher's side-stream copies during capture
   do not invalidate it.
7. The expert-distribution recorder buffer is capped (BEFORE on ``_Buffer.init_new``;
   ``TEMPO_RECORDER_BUFFER_CAP``, default 1024 steps): buffer x L x P x 4 bytes lives on GPU.

Written against SGLang ``SGLANG_VERSION``; :func:`register` refuses other versions with a
clear error (``TEMPO_SGLANG_ANY_VERSION=1`` overrides, at your own risk).

Configuration (environment, read at initialisation): ``TEMPO_PARAMS`` (cost-parameter set,
default ``proxy-serving``), ``TEMPO_REFRESH_MS`` (200), ``TEMPO_DEADLINE_MS`` (150),
``TEMPO_TOPOLOGY`` (``flat`` or ``hier``), ``TEMPO_GPUS_PER_NODE``, ``TEMPO_SOLVER_WORKERS`` (1),
``TEMPO_BATCH_TOKENS`` (rescale windows to one batch; default: off), ``TEMPO_POLICY`` (``tempo``
or ``token_lp``: the exact token LP in the same worker, Section 5.12's control), ``TEMPO_IN_THREAD=1``
(solve in the refresher thread, the v1 integration: Section 5.11's GIL control).
"""
from __future__ import annotations

import contextvars
import functools
import logging
import os
from dataclasses import dataclass

import numpy as np

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
    if version != SGLANG_VERSION and os.environ.get("TEMPO_SGLANG_ANY_VERSION") != "1":
        raise SGLangVersionError(
            f"the tempo SGLang plugin is written against sglang=={SGLANG_VERSION}, found {version}. "
            f"Install sglang=={SGLANG_VERSION}, or set TEMPO_SGLANG_ANY_VERSION=1 to try anyway.")
    return version


# ---------------------------------------------------------------------------- runtime
def uniforms(n: int, device, rank_invariant: bool, layer_id: int = 0):
    """One uniform per routed pair.  Rank-invariant dispatch (no a2a backend: every EP rank
    routes the same tokens and must pick the same replica) uses a deterministic
    low-discrepancy sequence over the pair index -- identical on every rank, graph-safe,
    and evenly spread -- instead of a random draw."""
    import torch

    if rank_invariant:
        idx = torch.arange(n, device=device, dtype=torch.float64)
        return torch.frac((idx + 0.5) * 0.6180339887498949 + layer_id * 0.7548776662466927).to(torch.float32)
    return torch.rand(n, device=device)


class TempoRuntime:
    """Everything the server holds for TEMPO, independent of SGLang's classes (so it runs
    and is tested on CPU): the live tables on the device, the cumulative counters the
    kernel increments, and the refresher (``policy="noop"`` keeps the full data path but
    never solves).

    Parameters
    ----------
    physical_to_logical_map : int[L, P] (torch or numpy)
    n_gpus : int   EP size
    device : torch device of the tables and counters
    aggregate : callable ``window -> window`` summing counts over ranks (gloo), optional
    """

    def __init__(self, physical_to_logical_map, n_gpus: int, device="cpu", policy: str = "tempo",
                 params: str = "proxy-serving", interval_s: float = 0.2, deadline_s: float = 0.15,
                 topology: str = "flat", gpus_per_node: int | None = None, aggregate=None, workers: int = 1,
                 batch_tokens: int | None = None, rank_invariant: bool = False, node: int = 0, start: bool = True,
                 in_thread: bool = False):
        if policy not in ("tempo", "token_lp", "noop"):
            raise ValueError(f"policy must be 'tempo', 'token_lp' or 'noop', got {policy!r}")
        self.n_gpus, self.device, self.policy, self.params = int(n_gpus), device, policy, params
        self.interval_s, self.deadline_s = interval_s, deadline_s
        self.topology, self.gpus_per_node, self.node = topology, gpus_per_node, node
        self.aggregate, self.workers, self.batch_tokens = aggregate, workers, batch_tokens
        self.rank_invariant, self.in_thread = rank_invariant, in_thread
        self.refresher = None
        self._build(physical_to_logical_map)
        if start:
            self.start()

    def _build(self, physical_to_logical_map) -> None:
        import torch

        from .tables import DispatchTable

        p2l = physical_to_logical_map
        p2l = p2l.detach().cpu().numpy() if hasattr(p2l, "detach") else np.asarray(p2l)
        self.p2l = p2l.astype(np.int64)
        n_nodes = self.n_gpus // self.gpus_per_node if self.topology == "hier" else None
        host = DispatchTable.from_placement(self.p2l, n_nodes=n_nodes)
        self.host = host
        self.phys = torch.tensor(host.phys, device=self.device)
        self.prob = torch.tensor(host.prob, device=self.device)
        L, E, _ = host.phys.shape
        self.counts = torch.zeros((L, E), dtype=torch.int64, device=self.device)

    def _snapshot(self):
        import torch

        if self.counts.is_cuda:  # a side stream: the copy never waits behind the decode graph
            s = torch.cuda.Stream(device=self.counts.device)
            with torch.cuda.stream(s):
                host = self.counts.to("cpu", non_blocking=True)
            s.synchronize()
            return host.numpy()
        return self.counts.numpy().copy()

    def start(self) -> None:
        from .refresher import Refresher, TorchPublisher

        self.refresher = Refresher(self.host, self._snapshot, self.p2l, self.n_gpus, model=self.params,
                                   policy=self.policy, topology=self.topology, gpus_per_node=self.gpus_per_node,
                                   interval_s=self.interval_s, deadline_s=self.deadline_s, aggregate=self.aggregate,
                                   publish=TorchPublisher(self.prob), batch_tokens=self.batch_tokens,
                                   workers=self.workers, in_thread=self.in_thread)
        self.refresher.start()

    def close(self) -> None:
        if self.refresher is not None:
            self.refresher.stop()
            self.refresher = None

    def reset(self, physical_to_logical_map) -> None:
        """New placement (EPLB rebalanced): rebuild tables and counters, restart the solver."""
        self.close()
        self._build(physical_to_logical_map)
        self.start()

    def layer_table(self, layer_id: int):
        prob = self.prob[self.node] if self.prob.dim() == 4 else self.prob
        return prob[layer_id], self.phys[layer_id]

    def dispatch(self, layer_id: int, topk_ids, num_token_non_padded=None):
        """Logical ``topk_ids [T, K]`` -> physical ids, counting non-padding rows."""
        prob, phys = self.layer_table(layer_id)
        u = uniforms(topk_ids.numel(), topk_ids.device, self.rank_invariant, layer_id)
        if topk_ids.is_cuda:
            from .triton_kernels import dispatch_and_count_triton as kernel
        else:
            from .kernels import dispatch_and_count_reference as kernel
        return kernel(topk_ids, prob, phys, self.counts[layer_id], u, num_token_non_padded)


def get_runtime():
    return _RUNTIME


# ---------------------------------------------------------------------------- hooks
@dataclass
class _LayerTag:
    layer_id: int


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


def hook_logical_to_physical(original, topk_ids, info, *args, **kwargs):
    """AROUND ``topk_ids_logical_to_physical``: tempo layers go through the fused kernel."""
    layer = getattr(info, "tempo_layer_id", None) if info is not None else None
    if layer is None or _RUNTIME is None:
        return original(topk_ids, info, *args, **kwargs)
    n = _non_padded.get()
    if n is None:
        n = _forward_non_padded()
    return _RUNTIME.dispatch(layer, topk_ids, n)


def hook_biased_postprocess(original, topk_ids, info, num_token_non_padded, *args, **kwargs):
    """AROUND ``_biased_grouped_topk_postprocess`` (a torch.compile'd function in SGLang):
    tempo layers are mapped here, outside the compiled region, with the padding bound given
    to the kernel (SGLang masks padding only after mapping, so counting must mask itself),
    then the padding rows are masked as SGLang does."""
    layer = getattr(info, "tempo_layer_id", None) if info is not None else None
    if layer is None or _RUNTIME is None:
        return original(topk_ids, info, num_token_non_padded, *args, **kwargs)
    from sglang.srt.layers.moe.topk import _mask_topk_ids_padded_region

    topk_ids = _RUNTIME.dispatch(layer, topk_ids, num_token_non_padded)
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


def _gloo_aggregate():
    """Sum window counts over ranks on a dedicated gloo group (thread-safe against the
    scheduler's own collectives, which never use this group)."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return None
    group = dist.new_group(backend="gloo")

    def aggregate(window):
        t = torch.from_numpy(np.ascontiguousarray(window, dtype=np.int64))
        dist.all_reduce(t, group=group)
        return t.numpy()

    return aggregate


def hook_after_lplb_init(result, model_runner, *args, **kwargs):
    """AFTER ``ModelRunner.maybe_init_lplb_solvers``: install TEMPO's runtime."""
    global _RUNTIME
    algo = _algorithm()
    if algo not in ALGORITHMS or getattr(model_runner, "is_draft_worker", False):
        return result
    from sglang.srt.eplb.expert_location import get_global_expert_location_metadata
    from sglang.srt.runtime_context import get_exec

    meta = get_global_expert_location_metadata()
    env = os.environ
    topo = env.get("TEMPO_TOPOLOGY", "flat")
    gpn = int(env["TEMPO_GPUS_PER_NODE"]) if env.get("TEMPO_GPUS_PER_NODE") else None
    rank = getattr(model_runner, "moe_ep_rank", 0) or 0
    _RUNTIME = TempoRuntime(
        meta.physical_to_logical_map, meta.ep_size, device=meta.physical_to_logical_map.device,
        policy="noop" if algo == "tempo_noop" else env.get("TEMPO_POLICY", "tempo"),
        params=env.get("TEMPO_PARAMS", "proxy-serving"),
        interval_s=float(env.get("TEMPO_REFRESH_MS", 200)) / 1e3, deadline_s=float(env.get("TEMPO_DEADLINE_MS", 150)) / 1e3,
        topology=topo, gpus_per_node=gpn, aggregate=_gloo_aggregate(), workers=int(env.get("TEMPO_SOLVER_WORKERS", 1)),
        batch_tokens=int(env["TEMPO_BATCH_TOKENS"]) if env.get("TEMPO_BATCH_TOKENS") else None,
        rank_invariant=get_exec().moe.moe_a2a_backend == "none", node=(rank // gpn) if (topo == "hier" and gpn) else 0,
        in_thread=env.get("TEMPO_IN_THREAD") == "1")
    log.info("tempo: %s dispatch installed (%d layers, %d logical experts)", algo, *_RUNTIME.counts.shape)
    return result


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
    """AFTER ``update_expert_location_with_recovery``: rebuild tables for the new placement."""
    meta = kwargs.get("new_expert_location_metadata")
    if _RUNTIME is not None and meta is not None:
        _RUNTIME.reset(meta.physical_to_logical_map)
        log.info("tempo: tables rebuilt after EPLB rebalance")
    return result


def hook_capture_one(original, *args, **kwargs):
    """AROUND ``FullCudaGraphBackend.capture_one``: relaxed (thread_local) capture mode."""
    if _RUNTIME is None:
        return original(*args, **kwargs)
    import torch

    graph = torch.cuda.graph
    torch.cuda.graph = functools.partial(graph, capture_error_mode="thread_local")
    try:
        return original(*args, **kwargs)
    finally:
        torch.cuda.graph = graph


def recorder_buffer_cap() -> int:
    return int(os.environ.get("TEMPO_RECORDER_BUFFER_CAP", 1024))


def hook_buffer_init_new(item_shape, buffer_size, *args, **kwargs):
    """BEFORE ``_Buffer.init_new``: cap the recorder buffer (negative = unbounded growth)."""
    cap = recorder_buffer_cap()
    if buffer_size < 0 or buffer_size > cap:
        log.info("tempo: expert-distribution recorder buffer capped at %d steps (asked %d)", cap, buffer_size)
        buffer_size = cap
    return (item_shape, buffer_size, *args), kwargs


HOOKS = [
    ("sglang.srt.server_args.ServerArgs.add_cli_args", hook_add_cli_args, "AFTER"),
    ("sglang.srt.model_executor.model_runner.ModelRunner.maybe_init_lplb_solvers", hook_after_lplb_init, "AFTER"),
    ("sglang.srt.eplb.expert_location_dispatch.ExpertLocationDispatchInfo.init_new", hook_init_new, "AROUND"),
    ("sglang.srt.eplb.expert_location_dispatch.topk_ids_logical_to_physical", hook_logical_to_physical, "AROUND"),
    ("sglang.srt.layers.moe.topk._biased_grouped_topk_postprocess", hook_biased_postprocess, "AROUND"),
    ("sglang.srt.layers.moe.topk.select_experts", hook_select_experts, "AROUND"),
    ("sglang.srt.eplb.expert_distribution._SinglePassGatherer.init_new", hook_gatherer_init_new, "AROUND"),
    ("sglang.srt.eplb.eplb_manager.update_expert_location_with_recovery", hook_after_rebalance, "AFTER"),
    ("sglang.srt.model_executor.runner_backend.full_cuda_graph_backend.FullCudaGraphBackend.capture_one",
     hook_capture_one, "AROUND"),
    ("sglang.srt.eplb.expert_distribution._Buffer.init_new", hook_buffer_init_new, "BEFORE"),
]


def register() -> None:
    """Entry point of the ``sglang.srt.plugins`` group: check the version, register hooks."""
    check_sglang_version()
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    for target, fn, kind in HOOKS:
        HookRegistry.register(target, fn, getattr(HookType, kind))
    log.info("tempo: registered %d SGLang hooks (sglang %s)", len(HOOKS), SGLANG_VERSION)
