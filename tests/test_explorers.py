"""The book's explorers (``_static/explorers/*.js``, :mod:`tempo.book.explorers`).

The parity test draws instances from seed 0 (``TEMPO_PARITY_SEED`` to draw others; the
seed is in every failure message), runs every in-page routine under node
(``tests/js/run_explorers.js``) and compares it with the library policy it names:
the deterministic policies' makespans equal the library's to 1e-9 (and their shares too); the
page's ``tempo_paper`` (``tempo_fast.js``) equals ``tempo.solve(..., options="paper")`` in
dispatch, makespan, candidate and every stage, on thousands of instances; the page's
``optimum`` (an exact search) is never better than the MILP's proven bound and equals its
optimum, is never worse than ``tempo.solve``, and ``tempo.solve`` stays within the page's stated
tolerance above it.  The counts and the largest difference go to
``build/parity/explorers.json`` and ``build/parity/tempo_paper.json``.  The phase explorer's pure parts (B*, re-pricing at a reader's
b and beta) are checked against the library the same way; its page, in
``tests/browser/test_explorer_pages.py``."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pandas as pd
import pytest

from tempo.core import paths
from tempo.core.cost import CostModel
from tempo.core.instance import Instance
from tempo.policies import solve, spec

RUNNER = paths.ROOT / "tests" / "js" / "run_explorers.js"
DETERMINISTIC = ("static", "static_sglang", "uniform", "metro", "llep", "round_robin", "token_lp")
N_RANDOM = 500


def _node(mode: str, cases=None):
    node = shutil.which("node")
    if not node:
        pytest.fail("node is not on PATH: the explorers' parity test runs the page's JavaScript under node "
                    "(the book's build needs node/npm for MathJax as well)")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(cases or [], fh)
    try:
        res = subprocess.run([node, str(RUNNER), mode, fh.name], capture_output=True, text=True, timeout=600)
    finally:
        os.unlink(fh.name)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout)


def _instance(case) -> Instance:
    reps = case["inst"]["replicas"]
    width = max(len(r) for r in reps)
    return Instance(case["inst"]["counts"], [r + [-1] * (width - len(r)) for r in reps], case["inst"]["nGpus"])


def _model(m) -> CostModel:
    return CostModel(a=m["a"], b=m["b"], c=m["c"], beta=m["beta"], b2=m.get("b2", 0.0), tile=m.get("tile", 128),
                     c2=m.get("c2"), gamma=m.get("gamma"))


def random_cases(seed: int, n: int) -> list[dict]:
    """``n`` instances of the explorer's size (1-8 experts, 1-4 GPUs): counts small, large,
    heavy-tailed, all equal or tiny; full replication or random replica sets (slot order
    sometimes shuffled: the home replica is slot 0); a random Eq. 1 model, some with Eq. 4's
    traffic piece, some named parameter sets (tile term dropped)."""
    from tempo.book.explorers import param_sets

    rng = np.random.default_rng(seed)
    sets = [s for s in param_sets()]
    out = []
    for _ in range(n):
        E, g = int(rng.integers(1, 9)), int(rng.integers(1, 5))
        kind = int(rng.integers(0, 5))
        counts = [rng.integers(0, 60, E), rng.integers(0, 2000, E), (rng.pareto(1.0, E) * 50).astype(int),
                  np.full(E, int(rng.integers(1, 300))), rng.integers(0, 6, E)][kind]
        counts = np.minimum(counts, 10**6)
        if rng.random() < 0.5:
            reps = [list(range(g)) for _ in range(E)]
        else:
            reps = []
            for _ in range(E):
                s = sorted(int(h) for h in rng.choice(g, int(rng.integers(1, g + 1)), replace=False))
                if rng.random() < 0.3:
                    rng.shuffle(s)
                reps.append([int(h) for h in s])
        r = rng.random()
        if r < 0.25:
            s = sets[int(rng.integers(0, len(sets)))]
            model = {k: s[k] for k in ("a", "b", "c", "beta")}
            if s["c2"] is not None:
                model.update(c2=s["c2"], gamma=s["gamma"])
        else:
            model = {"a": float(rng.choice([0.0, 0.0, rng.uniform(0, 50)])), "b": float(rng.uniform(0, 20)),
                     "c": float(rng.choice([0.0, 0.0, rng.uniform(0, 50)])), "beta": float(rng.uniform(0.001, 0.3))}
            if r > 0.85:
                model.update(c2=float(rng.uniform(0, 50)), gamma=float(rng.uniform(0, 0.3)))
        out.append({"inst": {"counts": [int(c) for c in counts], "replicas": reps, "nGpus": g}, "model": model})
    return out


def known_cases() -> list[dict]:
    """The explorer's presets and the batches this test once caught tempo_fast far above the optimum on."""
    from tempo.book.explorers import INSTANCE_PRESETS, param_sets

    sets = {s["name"]: s for s in param_sets()}
    out = []
    for p in INSTANCE_PRESETS.values():
        g = p["n_gpus"]
        reps = p["replicas"] or [list(range(g)) for _ in p["counts"]]
        m = p.get("model") or {k: sets[p["params"]][k] for k in ("a", "b", "c", "beta")}
        out.append({"inst": {"counts": p["counts"], "replicas": reps, "nGpus": g}, "model": dict(m)})
    out.append({"inst": {"counts": [26, 3], "replicas": [[0, 1, 2, 3], [0, 1, 3]], "nGpus": 4},
                "model": {"a": 0.0, "b": 0.8085340180226419, "c": 0.0, "beta": 0.12971508567579096}})
    return out


def test_policy_parity_with_the_library():
    seed = int(os.environ.get("TEMPO_PARITY_SEED", "0"))  # fixed: a verdict never rests on a draw
    cases = known_cases() + random_cases(seed, N_RANDOM)
    info = _node("info")
    assert info["order"] == list(DETERMINISTIC) + ["tempo_paper", "optimum"]
    for name in info["order"]:
        spec(info["library"][name]["policy"])  # every in-page routine names a library policy
    assert info["library"]["tempo_paper"] == {"policy": "tempo", "options": {"options": "paper"}}
    assert info["library"]["optimum"]["policy"] == "milp"
    assert info["labels"]["optimum"].startswith("exact optimum (Eq. 3)") and "exhaustive search" in info["notes"]["optimum"]
    assert 'options="paper"' in info["labels"]["tempo_paper"]
    tol = info["tolerance"]
    out = _node("policies", cases)
    worst = {p: 0.0 for p in info["order"]}
    compared = {p: 0 for p in info["order"]}
    above, proven = [], 0
    for i, (case, res) in enumerate(zip(cases, out)):
        inst, model = _instance(case), _model(case["model"])
        where = f"seed {seed}, case {i}: {case}"
        for name in DETERMINISTIC:
            js = res[name]
            try:
                lib = solve(inst, model, name)
            except ValueError:
                assert name == "round_robin" and js is None, where
                continue
            assert js is not None, f"{name} returned nothing ({where})"
            ms = model.makespan(inst, lib)
            d = abs(js["makespan"] - ms)
            assert d <= 1e-9 * max(1.0, ms), f"{name}: page {js['makespan']!r} vs library {ms!r} ({where})"
            shares = np.array([r + [0.0] * (inst.n_slots - len(r)) for r in js["shares"]])
            sd = float(np.abs(shares - lib.shares).max(initial=0.0))
            assert sd <= 1e-7 * max(1, inst.counts.max(initial=1)), f"{name}: shares differ by {sd} ({where})"
            G, N, _ = model.gpu_features(inst, lib)
            assert js["G"] == G.tolist(), f"{name}: activations differ ({where})"
            worst[name] = max(worst[name], d)
            compared[name] += 1
        paper = model.makespan(inst, solve(inst, model, "tempo", options="paper"))
        assert abs(res["tempo_paper"]["makespan"] - paper) <= 1e-9 * max(1.0, paper), f"tempo_paper ({where})"
        js = res["optimum"]["makespan"]
        # the MILP's proven bound and its incumbent bracket the optimum whether or not HiGHS closed the
        # gap within its time limit (a loaded machine can stop it first); the page's search is exact
        milp = solve(inst, model, "milp", mip_rel_gap=1e-9, time_limit=60.0)
        lib = model.makespan(inst, solve(inst, model, "tempo"))
        scale = 1e-9 * max(1.0, lib, paper)
        assert js >= milp.meta["lower_bound"] - scale, f"page optimum {js} below the MILP's bound ({where})"
        assert js <= milp.meta["objective"] + scale, f"page optimum {js} above the MILP's incumbent ({where})"
        proven += bool(milp.meta["optimal"])
        assert js <= lib + scale, f"page optimum {js} above tempo.solve {lib} ({where})"
        assert lib <= paper + scale, f"tempo.solve's default {lib} above its paper preset {paper} ({where})"
        assert lib <= (1 + tol) * js + scale, f"tempo.solve {lib} more than {tol:.0%} above the optimum {js} ({where})"
        if milp.meta["optimal"]:
            worst["optimum"] = max(worst["optimum"], abs(js - milp.meta["objective"]))
        worst["tempo_paper"] = max(worst["tempo_paper"], abs(res["tempo_paper"]["makespan"] - paper))
        compared["optimum"] += 1
        compared["tempo_paper"] += 1
        above.append(lib / js - 1 if js > 0 else 0.0)
    report = {"seed": seed, "instances": len(cases), "policies": len(info["order"]), "compared": compared,
              "milp_proven_optimal": proven,
              "max_abs_difference_us": worst, "tempo_fast_above_exact": {
                  "max": max(above), "instances_above_1e-9": sum(a > 1e-9 for a in above), "stated_tolerance": tol}}
    out_dir = paths.ROOT / "build" / "parity"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "explorers.json").write_text(json.dumps(report, indent=1))
    assert compared["optimum"] == len(cases) and min(compared.values()) > len(cases) // 4


N_PORT = 3000


def port_cases(seed: int, n: int) -> list[dict]:
    """``n`` instances for the paper preset's port: the explorer's sizes (:func:`random_cases`,
    1-8 experts on 1-4 GPUs), a fifth of them with Eq. 2's tile term (b2 and a small tile, so
    experts span several tiles), and a few larger ones (up to 96 experts on 8 GPUs) that reach
    the 2-step chains' fan-out and candidate caps."""
    from tempo.book.explorers import param_sets

    rng = np.random.default_rng(seed + 1)
    out = random_cases(seed, n - n // 50)
    tiled = [s for s in param_sets() if s["b2"]]
    for c in out[::5]:
        m = c["model"]
        if rng.random() < 0.5 and tiled:
            s = tiled[int(rng.integers(0, len(tiled)))]
            m.update(b2=s["b2"], tile=int(rng.choice([8, 16, 32, 128])))
        else:
            m.update(b2=float(rng.uniform(0, 5)), tile=int(rng.choice([4, 8, 16, 64])))
    for _ in range(n // 50):
        E, g = int(rng.integers(9, 97)), int(rng.integers(2, 9))
        counts = (rng.pareto(1.2, E) * rng.choice([5, 50, 400])).astype(int)
        if rng.random() < 0.5:
            reps = [list(range(g)) for _ in range(E)]
        else:
            reps = [sorted(int(h) for h in rng.choice(g, int(rng.integers(1, g + 1)), replace=False)) for _ in range(E)]
        model = {"a": 0.0, "b": float(rng.uniform(0.5, 20)), "c": 0.0, "beta": float(rng.uniform(0.01, 0.3))}
        out.append({"inst": {"counts": [int(c) for c in counts], "replicas": reps, "nGpus": g}, "model": model})
    return out


def test_tempo_paper_port_matches_the_library():
    """tempo_fast.js against ``tempo.solve(inst, model, "tempo", options="paper")``: the same
    dispatch (the algorithm is deterministic), makespan, candidate chosen and makespan after
    every stage, on thousands of random instances; its recorded steps end at the dispatch, the
    search's steps never raise the makespan."""
    seed = int(os.environ.get("TEMPO_PARITY_SEED", "0"))  # fixed: a verdict never rests on a draw
    # a batch where the even token split wins the ensemble (rare at random: about 1 in 3,000)
    even = {"inst": {"counts": [150, 31], "replicas": [[0, 1, 2, 3]] * 2, "nGpus": 4},
            "model": {"a": 18.093699597797215, "b": 0.3893141077781628, "c": 29.415582460079147,
                      "beta": 0.11848558288323022, "b2": 3.568877274435422, "tile": 8}}
    cases = known_cases() + [even] + port_cases(seed, N_PORT)
    out = _node("tempo_paper", cases)
    chosen, worst = {}, 0.0
    for i, (case, js) in enumerate(zip(cases, out)):
        inst, model = _instance(case), _model(case["model"])
        where = f"seed {seed}, case {i}: {case}"
        d = solve(inst, model, "tempo", options="paper")
        ms = d.meta["makespan"]
        scale = 1e-9 * max(1.0, ms)
        assert abs(js["makespan"] - ms) <= scale, f"port {js['makespan']!r} vs library {ms!r} ({where})"
        assert abs(model.makespan(inst, d) - ms) <= scale
        shares = np.array([r + [0.0] * (inst.n_slots - len(r)) for r in js["shares"]])
        sd = float(np.abs(shares - d.shares).max(initial=0.0))
        assert sd <= 1e-9 * max(1, inst.counts.max(initial=1)), f"shares differ by {sd} ({where})"
        assert js["chosen"] == d.meta["chosen"], f"chosen {js['chosen']} vs {d.meta['chosen']} ({where})"
        lib_st = d.meta["stages"]
        assert set(js["stages"]) == set(lib_st), f"stages {js['stages']} vs {lib_st} ({where})"
        for k, v in lib_st.items():
            if isinstance(v, bool):
                assert js["stages"][k] is v
            else:
                assert abs(js["stages"][k] - v) <= 1e-9 * max(1.0, abs(v)), f"stage {k}: {js['stages'][k]} vs {v} ({where})"
        steps = js["steps"]
        if inst.total_tokens:
            assert steps and abs(steps[-1]["makespan"] - ms) <= scale, where
            search = [s["makespan"] for s in steps if s["stage"] in ("chains", "partial")]
            assert all(b <= a + 1e-9 * max(1.0, a) for a, b in zip(search, search[1:])), where
        chosen[d.meta["chosen"]] = chosen.get(d.meta["chosen"], 0) + 1
        worst = max(worst, abs(js["makespan"] - ms))
    # the instances reach every way out of the preset: the search's dispatch, a switch to a
    # token-LP candidate, the compute-regime shortcut (round robin is scored, but at these sizes
    # the search or a token-LP candidate is always as good)
    assert {"local_search", "token_lp_vertex", "token_lp_even"} <= set(chosen), chosen
    assert out[len(known_cases())]["chosen"] == "token_lp_even"
    assert any("shortcut" in r["stages"] for r in out) and any(r["stages"].get("ensemble_pruned") for r in out)
    moves = {(s["stage"], s["kind"]) for r in out for s in r["steps"]}
    assert {("seed", "place"), ("chains", "move"), ("chains", "chain"), ("partial", "move"),
            ("partial", "chain"), ("ensemble", "kept"), ("ensemble", "switched")} <= moves, moves
    out_dir = paths.ROOT / "build" / "parity"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "tempo_paper.json").write_text(json.dumps({"seed": seed, "instances": len(cases), "chosen": chosen,
                                                          "max_abs_difference_us": worst}, indent=1))


def test_presets_match_the_chapter():
    """The toy preset prices as chapter 01 says (105, 69, 60 us); the counterexample's METRO is
    optimal; on the last preset the paper preset stops above the optimum (20 us against 19.025:
    its partial moves leave four experts on a GPU where the optimum has three)."""
    cases = known_cases()
    out = _node("policies", cases[:4])
    toy, cx, _, above = out
    assert round(above["tempo_paper"]["makespan"], 9) == 20.0 and round(above["optimum"]["makespan"], 9) == 19.025
    assert above["tempo_paper"]["G"] == [2, 4] and above["optimum"]["G"] == [3, 3]
    assert round(toy["token_lp"]["makespan"], 9) == 105.0
    assert round(toy["metro"]["makespan"], 9) == 69.0
    assert round(toy["optimum"]["makespan"], 9) == 60.0 and round(toy["tempo_paper"]["makespan"], 9) == 60.0
    assert abs(cx["optimum"]["makespan"] - cx["metro"]["makespan"]) < 1e-9


# ---------------------------------------------------------------------------- the phase explorer
@pytest.fixture(scope="module")
def small_grid():
    from tempo.studies.phase_grid import phase_grid

    cfg = {"shapes": ["DSv2-Lite", "Qwen3-30B"], "eps": [8], "replications": [1.25], "skews": [0.0, 1.0],
           "tokens": [16, 64, 256], "batches": 2, "n_stars": [50, 400], "seed": 0, "workers": 1}
    return cfg, phase_grid(cfg)


def test_phase_grid_matches_the_phase_diagram(small_grid):
    from tempo.studies.phase_grid import phase_grid_means
    from tempo.studies.simulator import phase_cell

    cfg, grid = small_grid
    assert len(grid) == 2 * 2 * 3 * 2 * (5 + 2)
    means = phase_grid_means(grid).set_index(["shape", "ep", "replication", "skew", "B"])
    for sh, s, B in [("DSv2-Lite", 1.0, 64), ("Qwen3-30B", 0.0, 256), ("Qwen3-30B", 1.0, 16)]:
        ref = phase_cell({"shape": sh, "ep": 8, "B": B, "skew": s, "replication": 1.25, "batches": 2, "seed": 0}).iloc[0]
        row = means.loc[(sh, 8, 1.25, s, B)]
        for p in ("metro", "token_lp", "uniform", "tempo"):
            assert row[f"ms_{p}"] == ref[f"ms_{p}"]
        # the library's default preset: tempo.solve(inst, model, "tempo") on the same batches
        from tempo.paper.readings import Reading
        from tempo.studies import readings
        from tempo.studies.simulator import SHAPES

        E, K, params = SHAPES[sh]
        m = CostModel.named(params)
        insts = readings.batches(Reading.paper(), E, 8, B, s, 1.25, 2, seed=0, top_k=K)
        assert row.ms_tempo_default == pytest.approx(np.mean([m.makespan(i, solve(i, m, "tempo")) for i in insts]), rel=1e-12)
        # a tied cell ("M+L", the ties reading) is coloured by one of the tied policies
        assert row.winner == ref.winner or (ref.tie and row.winner in ref.winner.split("+"))
        assert row.gain_pct == pytest.approx(ref.gain_pct, abs=1e-12)
    # the makespan is the max of the two pieces at the busiest GPU's features (the page's re-pricing)
    model = CostModel.named("dsv2lite-offline")
    sub = grid[(grid["shape"] == "DSv2-Lite") & (grid.policy != "tempo_nstar")]
    np.testing.assert_allclose(sub.makespan_us, np.maximum(model.b * sub.max_G, model.beta * sub.max_N), rtol=1e-12)


def test_phase_grid_rejects_bad_configs():
    from tempo.studies.phase_grid import phase_grid

    with pytest.raises(ValueError, match="tokens"):
        phase_grid({"shapes": ["DSv3"], "eps": [8], "replications": [1.25], "skews": [0.0], "batches": 1, "n_stars": []})
    with pytest.raises(ValueError, match="shapes"):
        phase_grid({"shapes": ["nope"], "eps": [8], "replications": [1.25], "skews": [0.0], "tokens": [16],
                    "batches": 1, "n_stars": []})


def test_phase_explorer_data_reads_the_grid(small_grid):
    from tempo.book import explorers
    from tempo.studies.phase_grid import phase_grid_means
    from tempo.studies.simulator import boundary_table

    cfg, grid = small_grid
    data = explorers.phase_explorer_data(grid, "smoke", cfg)
    assert data["tokens"] == [16, 64, 256] and data["skews"] == [0.0, 1.0] and data["eps"] == [8]
    assert data["n_stars"] == [50.0, 400.0] and data["batches"] == 2
    assert [s["label"] for s in data["shapes"]] == ["Qwen3-30B", "DSv2-Lite"]
    assert len(data["columns"]) == 4
    # the page names the preset TEMPO ran with and labels ties with Fig. 6's tolerance
    from tempo.studies.simulator import TIE_REL

    assert data["tempo_preset"] == "paper" and data["tie_rel"] == TIE_REL
    assert [p["key"] for p in data["presets"]] == ["tempo", "tempo_default"]
    assert 'options="paper"' in data["presets"][0]["label"] and 'lp_variants=("highs",)' in data["presets"][0]["label"]
    assert data["presets"][1]["label"] == 'the library\'s default: tempo.solve(inst, model, "tempo")'
    assert data["profiles"] == []
    means = phase_grid_means(grid).set_index(["shape", "ep", "replication", "skew", "B"])
    for col in data["columns"]:
        for i, B in enumerate(data["tokens"]):
            for p in ("metro", "token_lp", "uniform", "tempo", "tempo_default"):
                ref = means.loc[(col["shape"], col["ep"], col["replication"], col["skew"], B), f"ms_{p}"]
                assert col["ms"][p][i] == pytest.approx(ref, rel=1e-11)
    # B* is the chapter's (boundary_table on the phase diagram's placement)
    fake = means.reset_index().assign(winner="M")
    bt = boundary_table(fake, "DSv2-Lite", 8).set_index("skew")
    for col in data["columns"]:
        if col["shape"] == "DSv2-Lite":
            assert col["bstar"] == pytest.approx(bt.loc[col["skew"], "B_star"], rel=1e-12)
    html = explorers.phase_explorer(grid, "smoke", cfg).html
    assert 'data-explorer="phase"' in html and "</script></div>" in html and html.count("</script>") == 1
    with pytest.raises(ValueError, match="grid"):
        explorers.phase_explorer_data(grid.drop(columns="max_G"), "smoke")


def test_phase_explorer_js_matches_python(small_grid):
    """The page's B* for any n* and its re-pricing at a reader's b and beta, against the library."""
    from tempo.book import explorers
    from tempo.studies.scenarios import zipf_placement
    from tempo.studies.simulator import SHAPES
    from tempo.theory.bounds import flip_boundary
    from tempo.world.workloads import zipf_popularity

    cfg, grid = small_grid
    data = explorers.phase_explorer_data(grid, "smoke", cfg)
    cases, refs = [], []
    for col in data["columns"]:
        E, K, _ = SHAPES[col["shape"]]
        pop = zipf_popularity(E, col["skew"], seed=0)
        # the grid ran under the paper's reading: independent draws, EPLB from their long-run pair loads
        reps = np.bincount(zipf_placement(E, col["skew"], 0, K, col["ep"], col["replication"], "independent",
                                          "long_run_pair_loads"), minlength=E)
        for ns in (37.0, 156.4, 900.0):
            cases.append({"E": E, "K": K, "skew": col["skew"], "rle": col["rle"], "n_star": ns, "ep": col["ep"]})
            refs.append(flip_boundary(pop, reps, ns, K, col["ep"]))
    for got, ref in zip(_node("bstar", cases), refs):
        np.testing.assert_allclose(got, ref, rtol=1e-9)
    # re-pricing: each policy's mean over batches of max(b G, beta N); TEMPO the best of its dispatches
    model = {"b": 7.5, "beta": 0.02}
    cases = [{"data": data, "column": col, "model": model} for col in data["columns"]]
    for col, got in zip(data["columns"], _node("times", cases)):
        sub = grid[(grid["shape"] == col["shape"]) & (grid["skew"] == col["skew"])]
        t = np.maximum(model["b"] * sub.max_G, model["beta"] * sub.max_N.round(1))
        sub = sub.assign(t=t)
        for i, B in enumerate(data["tokens"]):
            at = sub[sub.B == B]
            for p in ("metro", "token_lp", "uniform"):
                assert got[p][i] == pytest.approx(at[at.policy == p].t.mean(), rel=1e-12)
            for key in ("tempo", "tempo_default"):
                best = at[at.policy.isin([key, "tempo_nstar"])].groupby("batch").t.min().mean()
                assert got[key][i] == pytest.approx(best, rel=1e-12)
    assert _node("times", [{"data": data, "column": data["columns"][0], "model": None}])[0] == data["columns"][0]["ms"]


def test_phase_explorer_places_the_routing_profiles(small_grid):
    """The routing presets are chapter 04's table of the named profiles on the phase diagram
    (their Zipf-equivalent skew by the max/mean statistic, the grid's nearest column), for the
    profiles whose shape the grid holds."""
    from tempo.book import explorers
    from tempo.book.chapters.ch04_routing import profiles_on_phase_diagram
    from tempo.studies.phase_grid import phase_grid_means
    from tempo.world.skew import zipf_max_over_mean

    cfg, grid = small_grid
    table = profiles_on_phase_diagram(phase_grid_means(grid))
    data = explorers.phase_explorer_data(grid, "smoke", cfg, table)
    assert [p["name"] for p in data["profiles"]] == [n for n in table.index if table.loc[n, "shape"] in ("DSv2-Lite", "Qwen3-30B")]
    assert data["profiles"], "the ESFT profile is DSv2-Lite's shape"
    for p in data["profiles"]:
        row = table.loc[p["name"]]
        assert p["skew"] == pytest.approx(row["Zipf-equivalent skew"], rel=1e-3) and p["column"] in data["skews"]
        assert p["column"] == min(data["skews"], key=lambda s: abs(s - p["skew"]))
        shape = {s["label"]: s for s in data["shapes"]}[p["shape"]]
        # the skew is where a Zipf law has the profile's max/mean pair share
        assert zipf_max_over_mean(p["skew"], shape["E"], shape["K"]) == pytest.approx(p["max_mean"], rel=2e-3)
    with pytest.raises(ValueError, match="profiles"):
        explorers.phase_explorer_data(grid, "smoke", cfg, table.drop(columns="grid column"))


# ---------------------------------------------------------------------------- the instance explorer's data
def test_instance_explorer_data():
    from tempo.book import explorers
    from tempo.core.params import names

    data = explorers.instance_explorer_data()
    assert [s["name"] for s in data["params"]] == names()
    tb = {s["name"]: s for s in data["params"]}["dsv3-testbedb-tile"]
    assert tb["b2"] == 2.65 and tb["c2"] == 25.0 and tb["gamma"] == 0.1
    assert data["colors"]["tempo_paper"] == spec("tempo").color and data["colors"]["optimum"] == spec("milp").color
    assert set(data["colors"]) == set(explorers.INSTANCE_POLICIES)
    for p in explorers.INSTANCE_PRESETS.values():   # every preset is a valid instance
        g = p["n_gpus"]
        reps = p["replicas"] or [list(range(g))] * len(p["counts"])
        Instance(p["counts"], [r + [-1] * (g - len(r)) for r in reps], g)
    html = explorers.instance_explorer().html
    assert 'data-explorer="instance"' in html and html.count("</script>") == 1
    with pytest.raises(ValueError, match="default_preset"):
        explorers.instance_explorer_data("nope")


def test_explorer_html_escapes_script_ends():
    from tempo.book.explorers import _html

    out = _html("instance", {"x": "</script><script>alert(1)</script>"}, "t")
    assert out.count("</script>") == 1
    payload = out.split('class="tempo-explorer-data">')[1].rsplit("</script>", 1)[0]
    assert json.loads(payload) == {"x": "</script><script>alert(1)</script>"}


def test_chapter_configs():
    from tempo.book.chapters import ch04_simulator as ch04

    for profile in ("smoke", "full"):
        cfg = ch04.explorer_config(profile)
        assert cfg["skews"] == ch04.sizes(profile)["skews"] and cfg["shapes"] == ch04.sizes(profile)["shapes"]
        assert cfg["tokens"] == sorted(set(cfg["tokens"])) and cfg["seed"] == 0
    full = ch04.explorer_config("full")["tokens"]
    assert full[0] == 16 and full[-1] == 2048 and len(full) == 15
