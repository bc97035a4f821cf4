"""Wall-clock EP microbenchmark (paper Section 5.1, 5.2): ``python -m tempo epbench``.

One process per EP rank (``torch.distributed``: NCCL on GPUs, gloo on CPU processes).  Every
step, all ranks draw the same routed batch (same seed), every policy dispatches it, and each
policy runs back-to-back on that batch, in an order shuffled per step (seeded, the same on
every rank, recorded in the rows) so no policy always runs first: dispatch all-to-all of the
hidden states, the rank's expert FFNs for the tokens its replicas received, combine
all-to-all.  The layer time is measured around the three phases (wall clock after a barrier
and a device synchronise); the expert time around the expert FFNs alone, after the dispatch
all-to-all has completed (CUDA events with a spin kernel queued ahead of the start event on
GPU, as in :class:`tempo.calib.backends.GraphTimer`; ``perf_counter`` on CPU).  Each is the
all-reduce MAX over ranks (device tensors on NCCL); the table reports medians over the steps.

Tokens originate evenly from all ranks (each rank routes ``tokens`` tokens, top-k), so the
all-to-all sends rank i's share of every replica's tokens to the replica's rank.  Expert work
is the FFN of the chosen shape (gate/up, SiLU-and-mul, down).  ``--expert-kernel auto`` (the
default) uses DeepGEMM's fp8 masked grouped GEMM on a GPU where ``deep_gemm`` imports -- the
calibration backend's kernel and layout, one group per local physical slot with ``masked_m`` =
its tokens (activation quantisation into the layout is not timed: SGLang fuses it into the
dispatch) -- and otherwise a loop over the active local experts, bf16 on GPU and float32 on
CPU (``--expert-kernel loop``).

``--emulate`` runs the EP ranks one after another on one device (no collectives): each rank's
expert work is timed alone and the makespan is the max -- what one GPU can say about whether
the model's ranking of policies transfers to measured time (Section 5.2: pairwise ranking
agreement and gain-transfer error against the model's prediction).
"""
from __future__ import annotations

import itertools
import os
import socket
import sys
import time

import numpy as np
import pandas as pd

from ..policies import check_names

#: The policies the EP microbenchmark compares (chapter 07, Section 5.2): the paper's comparison
#: set, study design rather than "every policy" (each step runs them in a permutation of this
#: order drawn from the seed, so the order is part of the experiment).  Checked against the
#: policy registry at import; ``--policies`` takes any registered name.
DEFAULT_POLICIES = check_names(("static", "uniform", "token_lp", "metro", "tempo"), "epbench.DEFAULT_POLICIES")


def plan_steps(n_experts: int, world: int, tokens: int, top_k: int, steps: int, skew: float, replication: float,
               seed: int):
    """The placement and each step's per-expert counts (identical on every rank)."""
    from ..world.placement import eplb_placement
    from ..world.workloads import expected_loads, sample_counts, zipf_popularity

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


class ExpertWork:
    """The FFN of ``n`` tokens on each of a rank's active experts, as a loop (weights rotated
    across ``copies`` sets so consecutive calls do not hit the same cache lines).
    ``run(loads, per_slot)`` takes the tokens of each active (slot, tokens) pair."""

    kernel = "loop"

    def __init__(self, shape, max_experts: int, device: str, copies: int = 2, seed: int = 0):
        import torch

        self.torch = torch
        self.dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
        g = torch.Generator().manual_seed(seed)
        d, f = shape.d_model, shape.d_ff
        self.f = f
        self.w13 = (torch.randn(copies, max_experts, 2 * f, d, generator=g) / d ** 0.5).to(device, self.dtype)
        self.w2 = (torch.randn(copies, max_experts, d, f, generator=g) / f ** 0.5).to(device, self.dtype)
        self.copies, self.i, self.device, self.d = copies, 0, device, d

    def __call__(self, x_per_expert: list) -> None:
        torch = self.torch
        self.i = (self.i + 1) % self.copies
        for j, x in enumerate(x_per_expert):
            h = x @ self.w13[self.i, j].T
            a = torch.nn.functional.silu(h[:, :self.f]) * h[:, self.f:]
            a @ self.w2[self.i, j].T

    def prepare(self, parts: list, slots: list):
        return parts

    def run(self, prepared) -> None:
        self(prepared)


class Fp8ExpertWork:
    """DeepGEMM's fp8 masked grouped GEMM over a rank's ``max_experts`` physical slots (the
    calibration backend's capacity layout, :class:`tempo.calib.backends.DeepGemmBackend`):
    ``masked_m[slot]`` = tokens the slot received (0 for idle slots), ``expected_m`` = the
    largest of them; gate/up GEMM, SiLU-and-mul on the capacity rows, down GEMM."""

    kernel = "deep_gemm_fp8_masked"

    def __init__(self, shape, max_experts: int, max_tokens: int, device: str = "cuda", seed: int = 0,
                 deep_gemm_module=None):
        import torch

        from ..calib.backends import DeepGemmBackend

        self.torch = torch
        self.be = DeepGemmBackend(shape, max_experts, max(1, max_tokens), replays=1, seed=seed, l2_factor=0.01,
                                  device=device, deep_gemm_module=deep_gemm_module)
        self.G = max_experts
        self.device = device

    def prepare(self, parts: list, slots: list):
        """``parts``: received hidden states per active slot (only their row counts are used);
        ``slots``: the local slot index of each part."""
        import torch

        m = [0] * self.G
        for x, j in zip(parts, slots):
            m[j] = int(x.shape[0])
        if max(m) > self.be.cap:
            raise ValueError(f"a slot received {max(m)} tokens, more than the layout's capacity {self.be.cap}")
        return torch.tensor(m, dtype=torch.int32, device=self.device), max(1, max(m))

    def run(self, prepared) -> None:
        masked_m, expected = prepared
        be = self.be
        be.gemm(be.a_up, be.up[0], be.out_up, masked_m, expected)
        f = be.shape.d_ff
        h = be.out_up
        self.torch.nn.functional.silu(h[..., :f]) * h[..., f:]  # activation on the capacity rows
        be.gemm(be.a_down, be.down[0], be.out_down, masked_m, expected)


def make_expert_work(kind: str, shape, max_experts: int, max_tokens: int, device: str, seed: int = 0):
    """``kind``: ``loop``, ``fp8`` (DeepGEMM; raises naming why it cannot run) or ``auto``
    (fp8 on a GPU where deep_gemm imports, else the loop)."""
    if kind not in ("auto", "loop", "fp8"):
        raise ValueError(f"expert kernel must be auto, loop or fp8, got {kind!r}")
    if kind != "loop" and device != "cpu":
        from ..calib.backends import backend_status

        ok, why = backend_status()["deep_gemm"]
        if ok:
            return Fp8ExpertWork(shape, max_experts, max_tokens, device, seed)
        if kind == "fp8":
            raise RuntimeError(f"--expert-kernel fp8: {why}")
    elif kind == "fp8":
        raise RuntimeError("--expert-kernel fp8 needs --device cuda")
    return ExpertWork(shape, max_experts, device, seed=seed)


class ExpertTimer:
    """Device time of the expert phase alone: CUDA events with a spin kernel queued ahead (the
    host launch stays outside), ``perf_counter`` on CPU."""

    def __init__(self, device: str, spin_us: float = 30.0):
        self.device, self.spin_us = device, spin_us
        if device != "cpu":
            from ..calib.backends import CudaApi

            self.api = CudaApi()

    def __call__(self, fn) -> float:
        if self.device == "cpu":
            t0 = time.perf_counter()
            fn()
            return 1e6 * (time.perf_counter() - t0)
        api = self.api
        api.synchronize()  # the dispatch all-to-all (and anything before) is complete
        s, e = api.event(), api.event()
        api.spin(self.spin_us)
        s.record()
        fn()
        e.record()
        e.synchronize()
        return 1e3 * s.elapsed_time(e)


def policy_order(policies, seed: int, step: int) -> list:
    """The order the policies run in at ``step``: a permutation drawn from ``(seed, step)``,
    identical on every rank."""
    perm = np.random.default_rng([int(seed), int(step), 7]).permutation(len(policies))
    return [policies[i] for i in perm]


def _policies_dispatch(inst, model, policies):
    from ..policies import solve

    return {p: integer_split(solve(inst, model, p).shares) for p in policies}


def _worker(rank: int, world: int, args: dict, out_path: str) -> None:
    import torch
    import torch.distributed as dist

    from ..core.cost import CostModel
    from ..core.instance import Instance
    from ..calib.shapes import shape as get_shape

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
        work = make_expert_work(args.get("expert_kernel", "auto"), sh, per_gpu, int(counts.max()), device,
                                seed=args["seed"] + rank)
        timer = ExpertTimer(device)
        sync = (lambda: torch.cuda.synchronize()) if device != "cpu" else (lambda: None)
        d = sh.d_model
        rows = []
        for step, c in enumerate(counts):
            inst = Instance.from_placement(c, placement, world)
            plans = _policies_dispatch(inst, model, args["policies"])
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
                dist.barrier()
                sync()
                t0 = time.perf_counter()
                dist.all_to_all_single(xr, xs, recv.tolist(), send.tolist())
                mine = loads[rank]
                parts = list(torch.split(xr, mine))  # the even source split sums exactly to each rank's load
                prepared = work.prepare(parts, list(range(len(parts))))
                expert_us = timer(lambda: work.run(prepared))  # synchronises first: the a2a is not inside
                yb = torch.empty(int(send.sum()), d, dtype=xs.dtype, device=device)
                dist.all_to_all_single(yb, xr, send.tolist(), recv.tolist())
                sync()
                t1 = time.perf_counter()
                mx = torch.tensor([1e6 * (t1 - t0), expert_us], dtype=torch.float64 if device == "cpu" else torch.float32,
                                  device=device)
                dist.all_reduce(mx, op=dist.ReduceOp.MAX)
                if rank == 0 and step >= args["warmup"]:
                    rows.append({"step": step - args["warmup"], "policy": pol, "order": pos,
                                 "layer_us": float(mx[0]), "expert_us": float(mx[1]),
                                 "model_us": model.makespan(inst, sh_int.astype(float)),
                                 "kernel": work.kernel, "order_seed": args["seed"]})
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
    with tempfile.TemporaryDirectory() as tmpd:
        out = os.path.join(tmpd, "rows.csv")
        args = {**args, "init": f"tcp://127.0.0.1:{_free_port()}"}
        tmp.start_processes(_worker, args=(world, args, out), nprocs=world, start_method="spawn", join=True)
        return pd.read_csv(out)


def run_emulated(args: dict) -> pd.DataFrame:
    """Single-device mode: each rank's expert work timed alone, makespan = max over ranks."""
    import torch

    from ..core.cost import CostModel
    from ..core.instance import Instance
    from ..calib.shapes import shape as get_shape

    device = "cpu" if args["device"] == "cpu" else "cuda"
    world = int(args["world_size"])
    sh = get_shape(args["shape"])
    model = CostModel.named(args["params"])
    placement, counts = plan_steps(args["experts"] or sh.n_experts, world, args["tokens"], args["top_k"],
                                   args["steps"] + args["warmup"], args["skew"], args["replication"], args["seed"])
    work = make_expert_work(args.get("expert_kernel", "auto"), sh, placement.size // world, int(counts.max()),
                            device, seed=args["seed"])
    timer = ExpertTimer(device)
    dtype = torch.bfloat16 if device != "cpu" else torch.float32
    rows = []
    for step, c in enumerate(counts):
        inst = Instance.from_placement(c, placement, world)
        plans = _policies_dispatch(inst, model, args["policies"])
        for pos, pol in enumerate(policy_order(args["policies"], args["seed"], step)):
            loads = rank_loads(inst, plans[pol], world)
            times = []
            for r in range(world):
                xs = [torch.randn(n, sh.d_model, dtype=dtype, device=device) for n in loads[r]]
                prepared = work.prepare(xs, list(range(len(xs))))
                times.append(timer(lambda: work.run(prepared)))
            if step >= args["warmup"]:
                rows.append({"step": step - args["warmup"], "policy": pol, "order": pos, "layer_us": max(times),
                             "expert_us": max(times), "model_us": model.makespan(inst, plans[pol].astype(float)),
                             "kernel": work.kernel, "order_seed": args["seed"]})
    return pd.DataFrame(rows)


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

    from ..calib.backends import require

    require("cuda")
    n_gpu = torch.cuda.device_count()
    args.update(device="cuda", world_size=min(8, n_gpu) if n_gpu >= 2 else 8, shape="dsv3", top_k=8)
    df = run_emulated(args) if n_gpu < 2 else run_distributed(args)
    return df, (f"{args['world_size']} ranks on {torch.cuda.get_device_name(0)}"
                + (" (emulated on one GPU)" if n_gpu < 2 else ""))


def main(argv=None) -> int:
    from ..core.argtypes import (ArgumentParser, float_range, int_range, nonneg_float, nonneg_int, output_file,
                                 params_name, positive_int)

    ap = ArgumentParser(prog="python -m tempo epbench", description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--world-size", type=int_range(2), default=4)
    ap.add_argument("--shape", default="tiny", help="expert shape (tempo.calib.shapes): tiny, qwen3-30b, dsv3, ...")
    ap.add_argument("--experts", type=positive_int, help="logical experts (default: the shape's)")
    ap.add_argument("--top-k", type=positive_int, default=None)
    ap.add_argument("--tokens", type=positive_int, default=32, help="tokens routed per rank per step")
    ap.add_argument("--steps", type=positive_int, default=30)
    ap.add_argument("--warmup", type=nonneg_int, default=2)
    ap.add_argument("--skew", type=nonneg_float, default=1.0)
    ap.add_argument("--replication", type=float_range(1.0, 64.0), default=1.25)
    ap.add_argument("--params", type=params_name, default="dsv3-offline", help="cost model the policies solve with")
    ap.add_argument("--policies", default=",".join(DEFAULT_POLICIES))
    ap.add_argument("--emulate", action="store_true", help="run the ranks one after another on one device")
    ap.add_argument("--threads", type=positive_int, default=1, help="torch threads per CPU rank")
    ap.add_argument("--expert-kernel", default="auto", choices=["auto", "loop", "fp8"],
                    help="expert FFN: DeepGEMM fp8 masked grouped GEMM (fp8), a per-expert loop, or auto")
    ap.add_argument("--seed", type=nonneg_int, default=0, help="routing, weights and the per-step policy order")
    ap.add_argument("--csv", type=output_file, help="write the per-step rows here")
    a = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        ap.fail("--device", "the EP microbenchmark needs torch (pip install torch)")
    if a.device == "cuda" and not torch.cuda.is_available():
        ap.fail("--device", "cuda requested but no CUDA device is visible")
    from ..policies import available_policies
    from ..calib.shapes import shape as get_shape

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
            "seed": a.seed, "threads": a.threads, "expert_kernel": a.expert_kernel}
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
