"""Fingerprint of the solver's behaviour: solve a fixed, varied set of instances with every
policy and every tempo option variant the library and the build use, and write one line per
call with a hash of the exact bytes of the result (shares and meta makespan; tempo's chosen
candidate and stage times hashed apart, as ``meta=``) and of the cost model's prices.

A refactor of the solver must leave the output unchanged, byte for byte::

    .venv/bin/python scripts/solver_fingerprint.py -o build/fp-before.txt   # untouched tree
    .venv/bin/python scripts/solver_fingerprint.py -o build/fp-after.txt    # after a change
    .venv/bin/python scripts/solver_fingerprint.py --compare build/fp-before.txt build/fp-after.txt

Instances (seeded, about 2,400): full and restricted replication (EPLB-style placements, random
replica sets with duplicate GPUs and unused slots), E from 2 to 512, g from 1 to 64, zero counts
(some experts, every expert), huge counts (up to 1e15 tokens), two-term, three-term (traffic),
tile-aware and tile + traffic models, degenerate models (b = 0, beta = 0, a = c = 0) and the
named parameter sets.  Calls: tempo with the presets and every option variant (the ablation
and drift-16 stage switches of tempo.studies.solver, seed modes, chain depths, fanout, tau,
max_iter, lp_variants, restarts), solve_layers, exchange_pass, every other registered policy
but the MILP (time-limited, not deterministic), the token LP's vertex and even candidates, and
CostModel.gpu_times / makespan / lower_bound / time / expert_time.
"""
from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tempo.core.cost import CostModel  # noqa: E402
from tempo.core.instance import Instance  # noqa: E402
from tempo.policies import REGISTRY, solve  # noqa: E402

# tempo option variants: the studies' ablation (Table 2) and drift-16 stages (Tables 8, 9),
# the presets, and one change of every other field
VARIANTS = [
    ("default", {}),
    ("preset=paper", {"options": "paper"}),
    ("no partial", {"partial": False}),
    ("no chains", {"chains": False}),
    ("no ensemble", {"ensemble": False}),
    ("seed only whole", {"seed": "whole", "chains": False, "local_search": False, "ensemble": False}),
    ("seed only", {"chains": False, "local_search": False, "ensemble": False}),
    ("+chains", {"local_search": False, "ensemble": False}),
    ("seed+local no chains", {"chains": False, "ensemble": False}),
    ("seed=whole", {"seed": "whole"}),
    ("seed=static", {"seed": "static"}),
    ("seed=whole+no partial", {"seed": "whole", "partial": False}),
    ("no restarts", {"restarts": False}),
    ("chain_depth=0", {"chain_depth": 0}),
    ("chain_depth=1", {"chain_depth": 1}),
    ("chain_depth=2", {"chain_depth": 2}),
    ("chain_depth=3", {"chain_depth": 3}),
    ("fanout=0", {"fanout": 0}),
    ("fanout=1", {"fanout": 1}),
    ("tau=0", {"tau": 0.0}),
    ("tau=0.5", {"tau": 0.5}),
    ("max_iter=0", {"max_iter": 0}),
    ("max_iter=3", {"max_iter": 3}),
    ("lp=vertex", {"lp_variants": ("vertex",)}),
    ("lp=vertex,even", {"lp_variants": ("vertex", "even")}),
    ("lp=even", {"lp_variants": ("even",)}),
    ("no local search", {"local_search": False}),
    ("no ls, ensemble", {"local_search": False, "chains": False}),
    ("no paper candidate", {"paper_candidate": False}),  # issue 23: without the paper preset in the pool
    ("before #23", {"paper_candidate": False, "compound": False}),  # issue 23: the default as it was
    ("paper depth any", {"options": "paper", "chain_depth": None}),  # the chain_depth reading's alternative
    ("lp=highs", {"lp_variants": ("highs",)}),  # the ensemble_lp reading's paper choice
    ("paper lp=highs", {"options": "paper", "lp_variants": ("highs",)}),
    ("no balancer", {"balancer": False}),
]
# variants run on every instance (the rest on every small instance and a seeded sample of the large)
ALWAYS = {"default", "preset=paper", "no partial", "no chains", "no ensemble", "seed only whole",
          "+chains", "no restarts", "no paper candidate", "before #23", "paper depth any", "lp=highs", "paper lp=highs",
          "no balancer"}
OTHER = sorted(p for p in REGISTRY if p not in ("tempo", "milp"))


def _policy(name):
    """The registered function (the registry holds PolicySpec records since the house issue)."""
    spec = REGISTRY[name]
    return getattr(spec, "fn", spec)


def _named():
    import pandas as pd

    names = pd.read_csv(ROOT / "data" / "params" / "cost_params.csv").name.tolist()
    return [CostModel.named(n) for n in names]


def _model(rng, named):
    k = rng.random()
    if k < 0.25:
        return named[int(rng.integers(len(named)))]
    a, c = (0.0, 0.0) if rng.random() < 0.3 else (float(rng.uniform(0, 60)), float(rng.uniform(0, 60)))
    b = float(rng.uniform(0.5, 20)) if rng.random() > 0.05 else 0.0
    beta = float(rng.uniform(0.005, 0.4)) if rng.random() > 0.05 else 0.0
    kind = rng.random()
    kw = dict(a=a, b=b, c=c, beta=beta)
    if kind < 0.25:  # tile-aware (Eq. 2)
        kw.update(b2=float(b * rng.uniform(0.1, 1.5)), tile=int(rng.choice([128, 128, 64, 16])))
    if 0.15 < kind < 0.55:  # traffic piece (Eq. 4)
        kw.update(c2=float(rng.uniform(0, 80)), gamma=float(rng.uniform(0.0, 0.5)))
    return CostModel(**kw)


def _counts(rng, E, g):
    kind = rng.random()
    B = int(rng.choice([1, 4, 16, 64, 128, 256, 512, 2048]))
    if kind < 0.04:
        return np.zeros(E, np.int64)
    if kind < 0.1:  # huge counts
        return (rng.zipf(1.3, E).clip(1, 10**6) * int(rng.choice([10**3, 10**6, 10**9]))).astype(np.int64)
    if kind < 0.2:  # a single hot expert
        c = np.zeros(E, np.int64)
        c[int(rng.integers(E))] = B * g
        c[rng.random(E) < 0.1] += rng.integers(1, 40)
        return c
    s = float(rng.uniform(0.0, 1.6))
    p = np.arange(1, E + 1, dtype=float) ** -s
    p = rng.permutation(p / p.sum())
    k = int(rng.choice([1, 2, 4, 8]))
    c = rng.multinomial(B * g * k, p).astype(np.int64)
    c[rng.random(E) < float(rng.choice([0.0, 0.1, 0.4]))] = 0
    return c


def _instance(rng):
    g = int(rng.choice([1, 2, 2, 3, 4, 4, 8, 8, 8, 16, 16, 32, 64]))
    emax = 512 if g >= 8 else 64
    E = int(rng.choice([2, 3, 5, 8, 16, 32, 64, 128, 256, 512]))
    E = min(E, emax)
    if g * E > 8192:
        E = max(2, 8192 // g)
    counts = _counts(rng, E, g)
    kind = rng.random()
    if kind < 0.4:
        return Instance.full_replication(counts, g), "full"
    if kind < 0.7:  # EPLB-style placement: slots per GPU, hot experts replicated
        from tempo.world.placement import eplb_placement

        pop = (counts + 1) / (counts + 1).sum()
        ratio = float(rng.choice([1.0, 1.25, 1.5, 2.0]))
        try:
            phy = eplb_placement(pop, g, ratio)
        except Exception:  # a shape the placement refuses: fall back to a round-robin map
            phy = np.arange(((E + g - 1) // g) * g) % E
        return Instance.from_placement(counts, phy, g), f"eplb{ratio}"
    # random replica sets: 1..R slots per expert, duplicates of one GPU, unused slots (-1)
    R = int(rng.integers(1, min(g, 6) + 2))
    rep = rng.integers(0, g, size=(E, R))
    rep[rng.random((E, R)) < 0.3] = -1
    rep[:, 0] = rng.integers(0, g, size=E)
    return Instance(counts, rep, g), "random"


def _h(*parts) -> str:
    m = hashlib.sha256()
    for p in parts:
        if isinstance(p, np.ndarray):
            m.update(str(p.dtype).encode() + str(p.shape).encode())
            m.update(np.ascontiguousarray(p).tobytes())
        elif isinstance(p, float):
            m.update(np.float64(p).tobytes())
        else:
            m.update(repr(p).encode())
    return m.hexdigest()[:20]


def _meta_key(meta):
    stages = meta.get("stages", {})
    return (meta.get("chosen"), tuple(sorted((k, float(v) if not isinstance(v, bool) else v)
                                             for k, v in stages.items())))


def _call(fn):
    try:
        return fn(), None
    except Exception as exc:  # the same refusal is part of the behaviour
        return None, f"{type(exc).__name__}: {exc}"


def run(n: int, seed: int, out, progress: bool):
    from tempo.policies.exact import token_lp_even, token_lp_vertex
    from tempo.policies.tempo_fast import exchange_pass, solve_layers, tempo_fast

    named = _named()
    rng = np.random.default_rng(seed)
    n_calls = 0
    t0 = time.perf_counter()
    for k in range(n):
        inst, kind = _instance(rng)
        model = _model(rng, named)
        tag = f"{k:05d} {kind} g={inst.n_gpus} E={inst.n_experts} R={inst.n_slots} tok={inst.total_tokens} {model}"
        big = inst.n_experts * inst.n_gpus > 2048
        # the cost model's prices of a fixed dispatch
        x = _policy("uniform")(inst, model).shares
        lines = [f"{k:05d} prices {_h(model.gpu_times(inst, x), model.makespan(inst, x), model.lower_bound(inst))}",
                 f"{k:05d} time {_h(model.time([0, 1, 2, 5], [0.0, 10.0, 300.0, 5000.0]), model.time([1, 2], [3.0, 400.0], [1, 7]), model.expert_time(np.array([0.0, 1.0, 128.0, 129.0, 1e6])))}"]
        names = [v for v, _ in VARIANTS if v in ALWAYS or rng.random() < (0.3 if big else 1.0)]
        # the restricted even split is a QP (HiGHS): small instances with moderate counts only
        qp_ok = inst.is_full_replication() or (inst.n_experts * inst.n_gpus <= 512 and inst.total_tokens < 10**7)
        for name, opts in VARIANTS:
            if name not in names:
                continue
            if "even" in opts.get("lp_variants", ()) and not qp_ok:
                continue
            opts = dict(opts)
            preset = opts.pop("options", None)
            if name == "default":  # through the front door once, the rest as the studies call it
                d, err = _call(lambda: solve(inst, model, "tempo"))
            else:  # TempoOptions' own checks (chain_depth 0 and 1 are valid options there)
                d, err = _call(lambda: tempo_fast(inst, model, preset, **opts).validate(inst))
            n_calls += 1
            if err:
                lines.append(f"{k:05d} tempo[{name}] ERR {err}")
            else:
                lines.append(f"{k:05d} tempo[{name}] {_h(d.shares, float(d.meta['makespan']))} meta={_h(_meta_key(d.meta))}")
        for p in OTHER:
            if (big and rng.random() < 0.5) or (p == "token_lp" and not qp_ok):
                continue
            d, err = _call(lambda: solve(inst, model, p))
            n_calls += 1
            lines.append(f"{k:05d} {p} " + (f"ERR {err}" if err else _h(d.shares)))
        d, err = _call(lambda: token_lp_vertex(inst))
        lines.append(f"{k:05d} token_lp_vertex " + (f"ERR {err}" if err else _h(d.shares, float(d.meta["max_tokens"]))))
        if qp_ok:
            d, err = _call(lambda: token_lp_even(inst))
            lines.append(f"{k:05d} token_lp_even " + (f"ERR {err}" if err else _h(d.shares)))
        if inst.is_full_replication() and rng.random() < 0.5:
            start = _policy("round_robin")(inst, model).shares
            r, err = _call(lambda: exchange_pass(inst, model, start))
            lines.append(f"{k:05d} exchange_pass " + (f"ERR {err}" if err else _h(r[0], float(r[1]))))
        out.write(f"# {tag}\n" + "\n".join(lines) + "\n")
        if progress and (k + 1) % 100 == 0:
            print(f"  {k + 1}/{n} instances, {n_calls} solves, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    # solve_layers: stacks of layers sharing E and n_gpus
    for k in range(60):
        g = int(rng.choice([2, 4, 8, 16]))
        E = int(rng.choice([8, 32, 64, 128]))
        L = int(rng.integers(1, 5))
        counts, reps = [], []
        for _ in range(L):
            c = _counts(rng, E, g)
            if rng.random() < 0.5:
                rep = np.broadcast_to(np.arange(g), (E, g))
            else:
                rep = rng.integers(0, g, size=(E, 3))
                rep[rng.random((E, 3)) < 0.3] = -1
                rep[:, 0] = rng.integers(0, g, size=E)
            counts.append(c)
            reps.append(rep)
        R = max(r.shape[1] for r in reps)
        rep = np.full((L, E, R), -1, np.int64)
        for i, r in enumerate(reps):
            rep[i, :, :r.shape[1]] = r
        model = _model(rng, named)
        opts = [{}, {"options": "paper"}, {"partial": False}, {"restarts": False}][k % 4]
        out_, err = _call(lambda: solve_layers(np.stack(counts), rep, g, model, **opts))
        out.write(f"L{k:03d} solve_layers " + (f"ERR {err}" if err else _h(out_)) + "\n")
        n_calls += 1
    return n_calls


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--out", help="write the fingerprint here (default: stdout)")
    ap.add_argument("-n", type=int, default=2400, help="instances (default 2400)")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two fingerprint files and exit")
    args = ap.parse_args(argv)
    if args.compare:
        a = Path(args.compare[0]).read_text().splitlines()
        b = Path(args.compare[1]).read_text().splitlines()
        if len(a) != len(b):
            print(f"different lengths: {len(a)} and {len(b)} lines")
        diff, kind, per_call = [], "", {}
        for x, y in zip(a, b):
            if x.startswith("#"):
                kind = "full" if x.split()[2] == "full" else "restricted"
                continue
            if x != y:
                # the result (shares, makespan) or only tempo's meta (chosen, stages)?
                what = "meta only" if x.split(" meta=")[0] == y.split(" meta=")[0] else "result"
                diff.append((x, y))
                key = (x.split()[1], kind if x[0] != "L" else "layers", what)
                per_call[key] = per_call.get(key, 0) + 1
        n = sum(1 for x in a if not x.startswith("#"))
        if not diff and len(a) == len(b):
            print(f"identical: {n} results")
            return 0
        print(f"{len(diff)} of {n} results differ:")
        for (call, kind, what), k in sorted(per_call.items()):
            print(f"  {call} on {kind} instances ({what}): {k}")
        print("first ones:")
        for x, y in diff[:10]:
            print(f"- {x}\n+ {y}")
        return 1
    t0 = time.perf_counter()
    out = open(args.out, "w") if args.out else sys.stdout
    try:
        n_calls = run(args.n, args.seed, out, progress=bool(args.out))
    finally:
        if args.out:
            out.close()
    print(f"{args.n} instances, {n_calls} solves in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
