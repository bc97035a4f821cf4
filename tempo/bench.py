"""`make bench`: solve time of every policy and tempo's makespan ratio to the MILP.

Grid (issue #2): EP 8/16/32/64, E = 128 and 256 experts, top-8 routing at 32/128/512/2048
tokens per GPU, Zipf skew 1.0, EPLB placement at 1.25x replication (rounded up to whole
slots per GPU), Dirichlet batch fluctuation (kappa 2000).  Times are medians over
``reps`` batches on this machine; the MILP runs with a time limit on each batch.
"""
from __future__ import annotations

import statistics
import sys
import time

import numpy as np
import pandas as pd

from . import CostModel, Instance, solve
from .placement import eplb_placement
from .workloads import sample_counts, zipf_popularity

POLICIES = ["static", "static_sglang", "uniform", "token_lp", "metro", "llep", "semi_matching", "tempo"]


def run(eps=(8, 16, 32, 64), experts=(128, 256), tokens=(32, 128, 512, 2048), skew=1.0,
        replication=1.25, reps=3, milp_limit=10.0, params="dsv3-offline", seed=0,
        progress=True) -> pd.DataFrame:
    """One row per (EP, E, tokens per GPU): median solve ms per policy, tempo/MILP ratios."""
    model = CostModel.named(params)
    cells = [(g, E, B) for g in eps for E in experts for B in tokens]
    rows = []
    bar = None
    if progress:
        try:
            from tqdm import tqdm

            bar = tqdm(total=len(cells), desc="bench", unit="cell", file=sys.stderr)
        except ImportError:
            bar = None
    for g, E, B in cells:
        pop = zipf_popularity(E, skew, seed=seed)
        placement = eplb_placement(pop, g, replication)
        batches = sample_counts(pop, B, 8, g, n_batches=reps, seed=seed + 1)
        insts = [Instance.from_placement(c, placement, g) for c in batches]
        row = {"ep": g, "experts": E, "tokens_per_gpu": B}
        for p in POLICIES:
            times = []
            for inst in insts:
                t0 = time.perf_counter()
                solve(inst, model, p)
                times.append(time.perf_counter() - t0)
            row[f"{p}_ms"] = 1e3 * statistics.median(times)
        ratios, gaps = [], []
        if milp_limit and milp_limit > 0:
            for inst in insts:
                t = model.makespan(inst, solve(inst, model, "tempo"))
                m = solve(inst, model, "milp", time_limit=milp_limit)
                ratios.append(t / m.meta["objective"])
                gaps.append(m.meta["gap"])
            row["tempo_vs_milp_mean"] = float(np.mean(ratios))
            row["tempo_vs_milp_max"] = float(np.max(ratios))
            row["milp_gap_max"] = float(np.max(gaps))
        rows.append(row)
        if bar:
            bar.update(1)
    if bar:
        bar.close()
    return pd.DataFrame(rows)


def summary(df: pd.DataFrame) -> str:
    lines = []
    ep8 = df[(df.ep == 8) & (df.tokens_per_gpu <= 256)]
    ep64 = df[df.ep == 64]
    if len(ep8):
        lines.append(f"tempo median solve, EP8 <= 256 tok/GPU: max over cells {ep8.tempo_ms.max():.2f} ms "
                     f"(target <= 1 ms; paper 1.9 ms pure Python)")
    if len(ep64):
        lines.append(f"tempo median solve, EP64: max over cells {ep64.tempo_ms.max():.2f} ms (target <= 10 ms)")
    if "tempo_vs_milp_mean" in df:
        lines.append(f"tempo / MILP makespan: mean {df.tempo_vs_milp_mean.mean():.4f}, "
                     f"max {df.tempo_vs_milp_max.max():.4f} (targets 1.005 / 1.02; paper 1.005 / 1.033); "
                     f"largest MILP gap left {df.milp_gap_max.max():.2%}")
    return "\n".join(lines)


def serving(layers: int = 94, experts: int = 128, n_gpus: int = 8, tokens: int = 32, refreshes: int = 5,
            seed: int = 0) -> str:
    """Serving runtime (issue #7): the solver round trip -- snapshot, window, solve in the
    worker process, validate, publish -- for a whole model, and the reference kernel's
    throughput (torch CPU; skipped without torch)."""
    from .serving import DispatchTable
    from .serving.refresher import Refresher

    pop = zipf_popularity(experts, 1.0, seed=seed)
    pops = [np.roll(pop, l) for l in range(layers)]  # each layer its own hot experts, placed by EPLB
    p2l = np.stack([eplb_placement(p, n_gpus, 1.25) for p in pops])
    lines = []
    for workers in (1, 2):
        table = DispatchTable.from_placement(p2l)
        cum = {"c": np.zeros((layers, experts), np.int64)}
        r = Refresher(table, lambda: cum["c"], p2l, n_gpus, deadline_s=30, workers=workers)
        times = []
        try:
            for i in range(refreshes + 1):
                cum["c"] = cum["c"] + np.stack([sample_counts(p, tokens, 8, n_gpus, seed=seed + 100 * i + l)[0]
                                                for l, p in enumerate(pops)])
                t0 = time.perf_counter()
                out = r.step()
                if out != "published":
                    raise RuntimeError(f"refresh {i}: {out} ({r.last_error})")
                if i:  # the first includes the workers' start-up
                    times.append(time.perf_counter() - t0)
        finally:
            r.stop()
        lines.append(f"serving: whole-model refresh ({layers} layers x {experts} experts, EP{n_gpus}, {tokens} tok/GPU, "
                     f"{workers} solver process{'es' if workers > 1 else ''}), snapshot to published table: median "
                     f"{1e3 * statistics.median(times):.0f} ms, max {1e3 * max(times):.0f} ms over {refreshes} "
                     f"(paper default period 200 ms)")
    try:
        import torch

        from .serving.kernels import dispatch_and_count_reference

        T, K = 4096, 8
        prob = torch.tensor(table.prob[0])
        phys = torch.tensor(table.phys[0])
        ids = torch.randint(0, experts, (T, K))
        counts = torch.zeros(experts, dtype=torch.int64)
        u = torch.rand(T * K)
        dispatch_and_count_reference(ids, prob, phys, counts, u)
        t0 = time.perf_counter()
        n = 20
        for _ in range(n):
            dispatch_and_count_reference(ids, prob, phys, counts, u)
        dt = (time.perf_counter() - t0) / n
        lines.append(f"serving: reference dispatch-and-count kernel (torch CPU), {T} x {K} routed pairs: "
                     f"{1e3 * dt:.2f} ms per call, {T * K / dt / 1e6:.1f} M pairs/s")
    except ImportError:
        lines.append("serving: torch not installed, reference kernel not timed")
    return "\n".join(lines)


def main(argv=None):
    from .cli import ArgumentParser, nonneg_float, output_file, params_name, positive_int

    ap = ArgumentParser(prog="python -m tempo bench", description=__doc__.splitlines()[0])
    ap.add_argument("--eps", type=positive_int, nargs="+", default=[8, 16, 32, 64])
    ap.add_argument("--experts", type=positive_int, nargs="+", default=[128, 256])
    ap.add_argument("--tokens", type=positive_int, nargs="+", default=[32, 128, 512, 2048])
    ap.add_argument("--reps", type=positive_int, default=3)
    ap.add_argument("--milp-limit", type=nonneg_float, default=10.0, help="seconds per MILP; 0 skips the MILP")
    ap.add_argument("--params", type=params_name, default="dsv3-offline")
    ap.add_argument("--csv", type=output_file, help="also write the table here")
    ap.add_argument("--serving-only", action="store_true", help="only the serving-runtime figures")
    args = ap.parse_args(argv)
    if args.serving_only:
        print(serving())
        return
    df = run(args.eps, args.experts, args.tokens, reps=args.reps, milp_limit=args.milp_limit, params=args.params)
    with pd.option_context("display.width", 250, "display.max_columns", 50, "display.float_format", "{:.3f}".format):
        print(df.to_string(index=False))
    print()
    print(summary(df))
    print(serving())
    if args.csv:
        df.to_csv(args.csv, index=False)
