"""Wall-clock EP microbenchmark (paper Sections 5.1, 5.2): ``python -m tempo epbench``.

One process per EP rank (``torch.distributed``: NCCL on GPUs, gloo on CPU).  Each step every rank
draws the same routed batch (``tokens`` per rank, top-k, seeded) and every policy runs on it, in
an order shuffled per step (seeded, recorded): dispatch all-to-all, the rank's expert region,
combine all-to-all.  Rows (one per step and policy): ``layer_us`` (wall clock of the three
phases after a barrier and a synchronise), ``expert_us`` (the expert region timed alone:
``--timing graph`` a CUDA graph behind a spin between events, ``--timing eager --spin-us S``
eagerly, ``perf_counter`` on CPU), ``model_us``; each the all-reduce MAX over ranks.

The expert region is a calibration backend's (:mod:`tempo.calib.backends`; ``--expert-kernel
auto``: DeepGEMM fp8 masked, one group per local slot, ``expected_m`` as SGLang sets it,
:func:`sglang_expected_m`; else a loop over active experts).  ``--emulate`` runs the ranks one
after another on one device, each on its own weight copy, the makespan their max (no
collectives).  :func:`compare_with_fit` sets the expert time beside a calibrated fit's prediction.
"""
from __future__ import annotations

import itertools
import json
import os
import socket
import sys
import time

import numpy as np
import pandas as pd

from ..calib.backends import backend_class, backend_names, backend_status, make_backend, require
from ..calib.shapes import shape as get_shape
from ..core.argtypes import ArgumentParser, float_range, int_range, nonneg_float, output_file, params_name
from ..core.cost import CostModel
from ..core.instance import Instance
from ..policies import available_policies, check_names, solve
from ..world.placement import eplb_placement
from ..world.workloads import expected_loads, sample_counts, zipf_popularity

#: The policies the EP microbenchmark compares (chapter 07, Section 5.2): the paper's comparison
#: set, study design rather than "every policy" (each step runs them in a permutation of this
#: order drawn from the seed, so the order is part of the experiment).  Checked against the
#: policy registry at import; ``--policies`` takes any registered name.
DEFAULT_POLICIES = check_names(("static", "uniform", "token_lp", "metro", "tempo"), "epbench.DEFAULT_POLICIES")


def plan_steps(n_experts: int, world: int, tokens: int, top_k: int, steps: int, skew: float, replication: float,
               seed: int):
    """The placement and each step's per-expert counts (identical on every rank)."""

    pop = zipf_popularity(n_experts, skew, seed=seed)
    placement = eplb_placement(expected_loads(pop, top_k), world, replication)  # from long-run pair loads
    counts = sample_counts(pop, tokens, top_k, world, n_batches=steps, seed=seed + 1)
    return placement, counts


def integer_split(shares: np.ndarray) -> np.ndarray:
    """Round a dispatch's shares to whole tokens per replica, keeping each expert's total."""
    fl = np.floor(shares + 1e-9)
    rem = np.rint(shares.sum(axis=1) - fl.sum(axis=1)).astype(int)
    frac = shares - fl
    out = fl.copy()
    for e in np.flatnonzero(rem > 0):
        out[e, np.argsort(-frac[e], kind="stable")[:rem[e]]] += 1
    return out.astype(np.int64)


def rank_loads(inst, shares_int: np.ndarray, world: int) -> list[list[int]]:
    """Per rank: token counts of its active (expert, replica) pairs."""
    loads = [[] for _ in range(world)]
    for e, r in zip(*np.nonzero(shares_int > 0)):
        loads[int(inst.replica_gpu[e, r])].append(int(shares_int[e, r]))
    return loads


#: ``--expert-kernel`` names beside the registered backends: ``auto`` (the best backend that
#: runs on the device), ``loop`` (the per-expert loop: ``torch_bf16`` on a GPU, ``cpu`` on CPU),
#: ``fp8`` (DeepGEMM: ``deep_gemm``)
KERNEL_ALIASES = ("auto", "loop", "fp8")


def expert_backend_name(kind: str, device: str) -> str:
    """The calibration backend (:mod:`tempo.calib.backends`) that runs ``--expert-kernel kind``
    on ``device``; raises naming why it cannot run there."""

    names = backend_names()
    if kind not in KERNEL_ALIASES and kind not in names:
        raise ValueError(f"expert kernel must be auto, loop or fp8 (or a backend: {', '.join(names)}), got {kind!r}")
    gpu = device != "cpu"
    if kind == "loop":
        return "torch_bf16" if gpu else "cpu"
    if kind == "fp8":
        kind = "deep_gemm"
    if kind == "auto":
        if not gpu:
            return "cpu"
        st = backend_status()
        runs = [n for n in names if backend_class(n).gpu and st[n][0]]  # best first
        return runs[0] if runs else "torch_bf16"
    cls = backend_class(kind)
    if cls.gpu != gpu:
        raise RuntimeError(f"--expert-kernel {kind} needs --device {'cuda' if cls.gpu else 'cpu'}")
    ok, why = backend_status()[kind]
    if not ok:
        raise RuntimeError(f"--expert-kernel {kind}: {why}")
    return kind


def make_expert_backend(kind: str, shape, max_experts: int, max_tokens: int, device: str, seed: int = 0,
                        copies: int | None = None):
    """The backend that times a rank's expert region: ``max_experts`` slots (one group per
    local physical slot, ``masked_m`` = its tokens, idle slots 0), up to ``max_tokens`` tokens
    each, at least ``copies`` weight copies (one per emulated rank)."""

    if kind in ("fp8", "deep_gemm") and device == "cpu":
        raise RuntimeError(f"--expert-kernel {kind} needs --device cuda")
    name = expert_backend_name(kind, device)
    kw = {"seed": seed}
    if copies:
        kw["copies"] = int(copies)
    return make_backend(name, shape, max(1, int(max_experts)), max(1, int(max_tokens)), **kw)


def sglang_expected_m(tokens: int, world: int, top_k: int, n_physical: int) -> int:
    """DeepGEMM's ``expected_m`` as SGLang 0.5.23 sets it for DeepEP's low-latency dispatch
    (``token_dispatcher/deepep.py``, ``dispatch_a``): ``(tokens * group_size * top_k +
    num_experts) // num_experts`` -- the mean tokens per expert slot, fixed by the batch size,
    whatever the routing."""
    return max(1, (int(tokens) * int(world) * int(top_k) + int(n_physical)) // int(n_physical))


def slot_loads(loads_r: list, per_gpu: int) -> list:
    """A rank's active pair loads laid out over its ``per_gpu`` slots (idle slots 0)."""
    if len(loads_r) > per_gpu:
        raise ValueError(f"a rank has {len(loads_r)} active pairs, more than its {per_gpu} slots")
    return list(loads_r) + [0] * (per_gpu - len(loads_r))


def policy_order(policies, seed: int, step: int) -> list:
    """The order the policies run in at ``step``: a permutation drawn from ``(seed, step)``,
    identical on every rank."""
    perm = np.random.default_rng([int(seed), int(step), 7]).permutation(len(policies))
    return [policies[i] for i in perm]


def _policies_dispatch(inst, model, policies):
    return {p: integer_split(solve(inst, model, p).shares) for p in policies}


def _plans_for(args: dict) -> list:
    """Each step's integer dispatch per policy (``_policies_dispatch``), for the batches
    :func:`plan_steps` draws from ``args``: what every rank of :func:`_worker` would compute."""

    world = int(args["world_size"])
    sh = get_shape(args["shape"])
    model = CostModel.named(args["params"])
    placement, counts = plan_steps(args["experts"] or sh.n_experts, world, args["tokens"], args["top_k"],
                                   args["steps"] + args["warmup"], args["skew"], args["replication"], args["seed"])
    return [_policies_dispatch(Instance.from_placement(c, placement, world), model, args["policies"]) for c in counts]


def _worker(rank: int, world: int, args: dict, out_path: str) -> None:
    import torch
    import torch.distributed as dist

    device = "cpu" if args["device"] == "cpu" else f"cuda:{rank}"
    if device != "cpu":
        torch.cuda.set_device(rank)
    torch.set_num_threads(max(1, args.get("threads", 1)))
    # NCCL collectives take device tensors only: every tensor below lives on ``device``
    dist.init_process_group("gloo" if device == "cpu" else "nccl", init_method=args["init"], rank=rank,
                            world_size=world)
    try:
        sh = get_shape(args["shape"])
        model = CostModel.named(args["params"])
        placement, counts = plan_steps(args["experts"] or sh.n_experts, world, args["tokens"], args["top_k"],
                                       args["steps"] + args["warmup"], args["skew"], args["replication"], args["seed"])
        per_gpu = placement.size // world
        be = make_expert_backend(args.get("expert_kernel", "auto"), sh, per_gpu, int(counts.max()),
                                 "cpu" if device == "cpu" else "cuda", seed=args["seed"] + rank)
        em = sglang_expected_m(args["tokens"], world, args["top_k"], placement.size)
        mode, spin = args.get("timing", "graph"), args.get("spin_us")
        sync = (lambda: torch.cuda.synchronize()) if device != "cpu" else (lambda: None)
        d = sh.d_model
        rows = []
        sample = 0
        all_plans = args.get("plans")  # solved once by the parent (run_distributed); rank-invariant
        for step, c in enumerate(counts):
            inst = Instance.from_placement(c, placement, world)
            plans = all_plans[step] if all_plans is not None else _policies_dispatch(inst, model, args["policies"])
            for pos, pol in enumerate(policy_order(args["policies"], args["seed"], step)):
                sh_int = plans[pol]
                loads = rank_loads(inst, sh_int, world)
                # tokens this rank sends to every rank: an even share of each destination's load
                dest_tot = np.array([sum(l) for l in loads])
                send = np.array([(dest_tot[j] + (world - 1 - rank)) // world for j in range(world)])  # remainder spread
                recv_t = torch.tensor(send, dtype=torch.int64, device=device)
                gathered = [torch.zeros(world, dtype=torch.int64, device=device) for _ in range(world)]
                dist.all_gather(gathered, recv_t)
                recv = np.array([int(gathered[i][rank]) for i in range(world)])
                xs = torch.randn(int(send.sum()), d, dtype=torch.bfloat16 if device != "cpu" else torch.float32,
                                 device=device)
                xr = torch.empty(int(recv.sum()), d, dtype=xs.dtype, device=device)
                yb = torch.empty(int(send.sum()), d, dtype=xs.dtype, device=device)
                # the even source split sums exactly to this rank's load; the region reads the loads
                # (graphs captured once per weight copy, masked_m uploaded here, outside both timings).
                # The layer pass and the timed region use different weight copies, so neither finds
                # the other's weights in L2.
                slots = slot_loads(loads[rank], per_gpu)
                run = be.prepare(slots, copy=2 * sample, expected_m=em, mode=mode)
                timed = be.prepare(slots, copy=2 * sample + 1, expected_m=em, mode=mode)
                sample += 1
                dist.barrier()
                sync()
                t0 = time.perf_counter()  # the layer: dispatch a2a, the region, combine a2a; no spin, no events
                dist.all_to_all_single(xr, xs, recv.tolist(), send.tolist())
                run()
                dist.all_to_all_single(yb, xr, send.tolist(), recv.tolist())
                sync()
                t1 = time.perf_counter()
                expert_us = be.time_prepared(timed, spin)  # the region alone: device time behind the spin
                mx = torch.tensor([1e6 * (t1 - t0), expert_us], dtype=torch.float64 if device == "cpu" else torch.float32,
                                  device=device)
                dist.all_reduce(mx, op=dist.ReduceOp.MAX)
                if rank == 0 and step >= args["warmup"]:
                    rows.append({"step": step - args["warmup"], "policy": pol, "order": pos,
                                 "layer_us": float(mx[0]), "expert_us": float(mx[1]),
                                 "model_us": model.makespan(inst, sh_int.astype(float)),
                                 "kernel": be.kernel, "backend": be.name, "timing": mode, "expected_m": em,
                                 "order_seed": args["seed"], "loads": json.dumps(loads)})
        if rank == 0:
            pd.DataFrame(rows).to_csv(out_path, index=False)
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_distributed(args: dict) -> pd.DataFrame:
    """Spawn ``world_size`` rank processes (torch.multiprocessing) and collect rank 0's rows."""
    import tempfile

    import torch.multiprocessing as tmp

    world = int(args["world_size"])
    if args["device"] != "cpu":
        import torch

        if torch.cuda.device_count() < world:
            raise RuntimeError(f"--world-size {world} needs {world} GPUs, found {torch.cuda.device_count()}; "
                               "use --emulate to run the ranks one after another on one GPU")
    # Every rank dispatches the same batches the same way, so the parent solves them once and
    # hands the plans to the ranks: one solver compile and one solve per batch instead of one per
    # rank (on a cold numba cache, 4 gloo ranks each compiling the solver took 220 s on 2 cores).
    plans = _plans_for(args)
    with tempfile.TemporaryDirectory() as tmpd:
        out = os.path.join(tmpd, "rows.csv")
        args = {**args, "init": f"tcp://127.0.0.1:{_free_port()}", "plans": plans}
        tmp.start_processes(_worker, args=(world, args, out), nprocs=world, start_method="spawn", join=True)
        return pd.read_csv(out)


def run_emulated(args: dict, backend=None) -> pd.DataFrame:
    """Single-device mode: each rank's expert region timed alone (its own weight copy, so no rank
    finds another's weights in L2), makespan = max over ranks.  ``args["timing"]``: ``graph``
    (default: the region captured once per rank and replayed, device time only) or ``eager``
    (host launches behind a spin of ``args["spin_us"]``); ``backend``: a prepared
    :class:`~tempo.calib.backends.ExpertBackend` (gpu-check reuses one; tests pass a fake).
    Rows: step, policy, order, layer_us = expert_us (the makespan), rank_us (per rank), model_us,
    kernel, backend, timing, expected_m, order_seed, loads (per rank, JSON)."""

    device = "cpu" if args["device"] == "cpu" else "cuda"
    world = int(args["world_size"])
    sh = get_shape(args["shape"])
    model = CostModel.named(args["params"])
    placement, counts = plan_steps(args["experts"] or sh.n_experts, world, args["tokens"], args["top_k"],
                                   args["steps"] + args["warmup"], args["skew"], args["replication"], args["seed"])
    per_gpu = placement.size // world
    be = backend if backend is not None else make_expert_backend(
        args.get("expert_kernel", "auto"), sh, per_gpu, int(counts.max()), device, seed=args["seed"], copies=world)
    em = sglang_expected_m(args["tokens"], world, args["top_k"], placement.size)
    mode, spin = args.get("timing", "graph"), args.get("spin_us")
    rows = []
    for step, c in enumerate(counts):
        inst = Instance.from_placement(c, placement, world)
        plans = _policies_dispatch(inst, model, args["policies"])
        for pos, pol in enumerate(policy_order(args["policies"], args["seed"], step)):
            loads = rank_loads(inst, plans[pol], world)
            times = [be.time_loads(slot_loads(loads[r], per_gpu), copy=r, expected_m=em, mode=mode, spin_us=spin)
                     for r in range(world)]
            if step >= args["warmup"]:
                rows.append({"step": step - args["warmup"], "policy": pol, "order": pos, "layer_us": max(times),
                             "expert_us": max(times), "rank_us": json.dumps([round(t, 3) for t in times]),
                             "model_us": model.makespan(inst, plans[pol].astype(float)),
                             "kernel": be.kernel, "backend": be.name, "timing": mode, "expected_m": em,
                             "order_seed": args["seed"], "loads": json.dumps(loads)})
    return pd.DataFrame(rows)


def rank_features(loads_r: list, tile: int = 128) -> tuple[int, int, int]:
    """``(G, N, T)`` of one rank's active pair loads: activated pairs, tokens, 128-row tiles."""
    live = [int(x) for x in loads_r if int(x) > 0]
    return len(live), sum(live), sum(-(-x // tile) for x in live)


def fit_prediction(loads: list, model) -> list:
    """The fitted cost model's time (us) of each rank's loads (:func:`rank_features`)."""
    return [float(model.time(*rank_features(l, model.tile))) for l in loads]


def compare_with_fit(df: pd.DataFrame, model, tol: float = 0.15) -> dict:
    """epbench's measured expert time beside a calibrated fit's prediction for the same loads.

    ``df``: rows of :func:`run_emulated` (columns ``loads``, ``expert_us`` and, when present,
    ``rank_us``); ``model``: the :class:`~tempo.core.cost.CostModel` fitted to the same
    backend and shape (gpu-check: its own grid section).  Returns the median measured and
    predicted makespans, the median and 10-90% range of the per-row ratio measured/predicted,
    the per-rank median ratio and correlation (with ``rank_us``), and ``disagree`` -- the median
    makespan ratio more than ``tol`` away from 1."""
    if not 0 < tol < 1:
        raise ValueError(f"tol must lie in (0, 1), got {tol}")
    if df.empty or "loads" not in df:
        raise ValueError("df must hold epbench rows with a 'loads' column (run_emulated)")
    per_rank_fit = [fit_prediction(json.loads(s), model) for s in df["loads"]]
    fit = np.array([max(p) for p in per_rank_fit])
    meas = df["expert_us"].to_numpy(dtype=float)
    ratio = meas / fit
    out = {"rows": int(len(df)), "expert_us_median": float(np.median(meas)), "fit_us_median": float(np.median(fit)),
           "ratio_median": float(np.median(ratio)), "ratio_p10": float(np.quantile(ratio, 0.1)),
           "ratio_p90": float(np.quantile(ratio, 0.9)), "tol": tol}
    if "rank_us" in df:
        rm = np.concatenate([json.loads(s) for s in df["rank_us"]]).astype(float)
        rf = np.concatenate(per_rank_fit)
        live = rf > 0
        out["rank_ratio_median"] = float(np.median(rm[live] / rf[live])) if live.any() else float("nan")
        out["rank_corr"] = float(np.corrcoef(rm, rf)[0, 1]) if len(rm) > 2 and rm.std() > 0 and rf.std() > 0 \
            else float("nan")
    out["disagree"] = bool(abs(out["ratio_median"] - 1) > tol)
    return out


def time_three_ways(be, loads_rows: list, expected_m: int, spins=(30.0, 2000.0)) -> pd.DataFrame:
    """The same expert regions timed three ways: eagerly behind a
    30 us spin (the host's launches fall inside the events), eagerly behind a
    2 ms spin (longer than any launch sequence), and as a captured graph.  ``loads_rows``: per
    row, the per-rank loads (``json.loads`` of a ``loads`` cell); each rank on its own weight
    copy.  One row per (row, way): the makespan over ranks."""
    out = []
    for i, loads in enumerate(loads_rows):
        slots = [slot_loads(l, be.max_G) for l in loads]
        ways = [(f"eager, spin {s:g} us", "eager", s) for s in spins] + [("graph", "graph", None)]
        for label, mode, spin in ways:
            t = [be.time_loads(sl, copy=r, expected_m=expected_m, mode=mode, spin_us=spin) for r, sl in enumerate(slots)]
            out.append({"row": i, "way": label, "expert_us": max(t), "rank_us": json.dumps([round(x, 3) for x in t]),
                        "loads": json.dumps(loads)})
    return pd.DataFrame(out)


def summarize(df: pd.DataFrame, reference: str = "static") -> pd.DataFrame:
    """Per policy: median measured layer and expert time, median modeled makespan, and
    each relative to ``reference`` on the same steps (medians of per-step ratios)."""
    piv = {q: df.pivot(index="step", columns="policy", values=q) for q in ("layer_us", "expert_us", "model_us")}
    out = pd.DataFrame({"layer_us": piv["layer_us"].median(), "expert_us": piv["expert_us"].median(),
                        "model_us": piv["model_us"].median()})
    if reference in piv["layer_us"]:
        out["measured_vs_" + reference] = piv["expert_us"].div(piv["expert_us"][reference], axis=0).median()
        out["model_vs_" + reference] = piv["model_us"].div(piv["model_us"][reference], axis=0).median()
    return out


def transfer(df: pd.DataFrame, reference: str = "static", noise: float = 0.03) -> dict:
    """Section 5.2: does the model's ranking of policies transfer to measured time?
    Pairwise ranking agreement over policy pairs whose measured medians differ by more than
    ``noise`` (relative), and the mean |measured gain - modeled gain| vs ``reference`` in points."""
    s = summarize(df, reference)
    pairs = agree = 0
    for a, b in itertools.combinations(s.index, 2):
        ma, mb = s.loc[a, "expert_us"], s.loc[b, "expert_us"]
        if abs(ma - mb) / max(ma, mb) <= noise:
            continue
        pairs += 1
        agree += (ma < mb) == (s.loc[a, "model_us"] < s.loc[b, "model_us"])
    gains = s.drop(index=reference, errors="ignore")
    err = (100 * ((1 - gains["measured_vs_" + reference]) - (1 - gains["model_vs_" + reference]))).abs()
    return {"pairs": pairs, "agreement": agree / pairs if pairs else float("nan"),
            "gain_transfer_error_p": float(err.mean()) if len(err) else float("nan")}


def run_here(world_size: int = 4, tokens: int = 32, steps: int = 20, gpu: bool = False) -> tuple[pd.DataFrame, str]:
    """The microbenchmark on this machine, as the serving chapter runs it: per-step rows
    (:func:`run_distributed` / :func:`run_emulated`) and where they ran.

    On the CPU (``gpu`` False): ``world_size`` gloo ranks of the tiny expert shape, top-4,
    float32.  With ``gpu``: the DSv3 shape, top-8, on the GPUs here: NCCL over ``min(8, GPUs)``
    ranks with two or more GPUs, else 8 ranks emulated one after another on the one GPU; a
    RuntimeError names what is missing when torch sees no GPU.  ``tokens`` per rank and
    ``steps`` timed steps (one warm-up step), Zipf(1.0) routing, EPLB 1.25x, the policies of
    :data:`DEFAULT_POLICIES` solving the dsv3-offline model, seed 0."""
    args = {"device": "cpu", "world_size": world_size, "shape": "tiny", "experts": None, "top_k": 4,
            "tokens": tokens, "steps": steps, "warmup": 1, "skew": 1.0, "replication": 1.25,
            "params": "dsv3-offline", "policies": list(DEFAULT_POLICIES), "seed": 0, "threads": 1}
    if not gpu:
        return run_distributed(args), f"{args['world_size']} gloo ranks on this CPU"
    import torch


    require("cuda")
    n_gpu = torch.cuda.device_count()
    args.update(device="cuda", world_size=min(8, n_gpu) if n_gpu >= 2 else 8, shape="dsv3", top_k=8)
    df = run_emulated(args) if n_gpu < 2 else run_distributed(args)
    return df, (f"{args['world_size']} ranks on {torch.cuda.get_device_name(0)}"
                + (" (emulated on one GPU)" if n_gpu < 2 else ""))


def main(argv=None) -> int:
    ap = ArgumentParser(prog="python -m tempo epbench", description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--world-size", type=int_range(2, 1024), default=4)
    ap.add_argument("--shape", default="tiny", help="expert shape (tempo.calib.shapes): tiny, qwen3-30b, dsv3, ...")
    ap.add_argument("--experts", type=int_range(1, 4096), help="logical experts (default: the shape's)")
    ap.add_argument("--top-k", type=int_range(1, 4096), default=None)
    ap.add_argument("--tokens", type=int_range(1, 2**16), default=32, help="tokens routed per rank per step")
    ap.add_argument("--steps", type=int_range(1, 100000), default=30)
    ap.add_argument("--warmup", type=int_range(0, 10000), default=2)
    ap.add_argument("--skew", type=float_range(0.0, 100.0), default=1.0)
    ap.add_argument("--replication", type=float_range(1.0, 64.0), default=1.25)
    ap.add_argument("--params", type=params_name, default="dsv3-offline", help="cost model the policies solve with")
    ap.add_argument("--policies", default=",".join(DEFAULT_POLICIES))
    ap.add_argument("--emulate", action="store_true", help="run the ranks one after another on one device")
    ap.add_argument("--threads", type=int_range(1, 1024), default=1, help="torch threads per CPU rank")
    ap.add_argument("--expert-kernel", default="auto",
                    help="expert region: auto, fp8 (DeepGEMM's masked grouped GEMM), loop (a per-expert loop), or a "
                         "calibration backend's name")
    ap.add_argument("--timing", default="graph", choices=["graph", "eager"],
                    help="expert time: the region as a replayed CUDA graph (default) or launched eagerly behind --spin-us")
    ap.add_argument("--spin-us", type=nonneg_float, default=None,
                    help="spin kernel ahead of the start event, us (default: the calibration timer's 50)")
    ap.add_argument("--seed", type=int_range(0, 2**32 - 1), default=0, help="routing, weights and the per-step policy order")
    ap.add_argument("--csv", type=output_file, help="write the per-step rows here")
    a = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        ap.fail("--device", "the EP microbenchmark needs torch (pip install torch)")
    if a.device == "cuda" and not torch.cuda.is_available():
        ap.fail("--device", "cuda requested but no CUDA device is visible")

    try:
        sh = get_shape(a.shape)
    except ValueError as exc:
        ap.error(f"--shape: {exc}")
    pols = [p for p in a.policies.split(",") if p]
    bad = [p for p in pols if p not in available_policies()]
    if bad or not pols:
        ap.error(f"--policies: unknown {bad or 'empty list'}; available: {', '.join(available_policies())}")
    n_exp = a.experts or sh.n_experts
    if (a.top_k or sh.top_k) > n_exp:
        ap.fail("--top-k", f"must be <= the {n_exp} experts, got {a.top_k or sh.top_k}")
    args = {"device": a.device, "world_size": a.world_size, "shape": a.shape, "experts": a.experts,
            "top_k": a.top_k or sh.top_k, "tokens": a.tokens, "steps": a.steps, "warmup": a.warmup, "skew": a.skew,
            "replication": a.replication, "params": a.params, "policies": pols,
            "seed": a.seed, "threads": a.threads, "expert_kernel": a.expert_kernel, "timing": a.timing,
            "spin_us": a.spin_us}
    try:
        expert_backend_name(a.expert_kernel, a.device)
    except ValueError as exc:
        ap.fail("--expert-kernel", str(exc))
    except RuntimeError as exc:
        ap.fail("--expert-kernel", str(exc))
    t0 = time.time()
    df = run_emulated(args) if a.emulate else run_distributed(args)
    s = summarize(df)
    mode = "emulated on one device" if a.emulate else f"{a.world_size} ranks ({'gloo' if a.device == 'cpu' else 'nccl'})"
    print(f"EP microbenchmark: {mode}, shape {a.shape}, {a.tokens} tokens/rank, top-{args['top_k']}, "
          f"{a.steps} steps, skew {a.skew}, expert kernel {df['kernel'].iloc[0] if len(df) else '-'}, "
          f"policy order shuffled per step (seed {a.seed}); medians ({time.time() - t0:.0f} s)")
    with pd.option_context("display.width", 200, "display.float_format", "{:.3f}".format):
        print(s.to_string())
    tr = transfer(df)
    print(f"model -> measured (expert time): pairwise ranking agreement {tr['agreement']:.0%} over {tr['pairs']} "
          f"pairs outside 3% noise; mean gain-transfer error {tr['gain_transfer_error_p']:.1f} p")
    if a.csv:
        df.to_csv(a.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
