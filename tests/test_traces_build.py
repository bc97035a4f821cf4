"""A trace-backed build: given a recorded routing trace, the
scenario experiments draw their batches from it, their results name it, and the claims the paper
computes on recorded routing get a verdict with the trace as provenance; without one, nothing
changes."""
import json

import numpy as np
import pandas as pd
import pytest

from tempo.book import claims
from tempo import studies as experiments
from tempo.core import paths
from tempo.studies import scenarios, simulator
from tempo.studies.scenarios import TraceRouting
from tempo.world.traces import TraceWarning, file_sha256, trace_config, with_trace, write_trace
from tempo.world.workloads import synthetic_trace


@pytest.fixture
def build(tmp_path, monkeypatch):
    """An empty build/ (results and cache) for one test, no active trace before or after."""
    monkeypatch.setattr(paths, "BUILD", tmp_path / "build")
    from tempo.measured import store

    monkeypatch.setattr(store, "ROOT", tmp_path / "measured")
    experiments.use_trace(None)
    yield tmp_path
    experiments.use_trace(None)


def _trace(path, source="test recording", steps=10, layers=3, experts=64, seed=5, **meta):
    """A small trace: synthetic counts written under a recording's source (the tests' stand-in
    for `python -m tempo import-trace`)."""
    counts, _ = synthetic_trace(steps, layers, experts, 32, top_k=8, n_gpus=8, skew=0.6, seed=seed)
    write_trace(path, counts, source=source, model="test-model", top_k=8, **meta)
    return counts


# ------------------------------------------------------------------ the synthetic path is unchanged
SMALL = {"proxy_mispricing": {"concurrency": [128], "batches": 2, "skew": 1.0,
                              "reading": {"token_lp_face": "even_spread"}},
         "staleness": {"scales": {"1x": 256}, "batches": 3, "skew": 1.0},
         "thm2_epsilon": {"scales": [1], "tokens": [32], "batches": 2}}


def test_synthetic_results_are_the_previous_code_paths_values():
    # values computed by the code before the trace source existed (commit 16d3097), same configs;
    # proxy_mispricing's static and metro and the staleness ratio recomputed once when synthetic
    # EPLB placements moved from the router weights to the long-run pair loads
    # (tempo.world.workloads.expected_loads; were 1.305240, 1.067831 and 0.862957); eps unchanged by it.
    # The proxy studies at an explicit Zipf(1.0) and token-LP's even spread, the code's earlier fixed choices
    t1 = simulator.proxy_mispricing(experiments.registry.with_reading("proxy_mispricing", SMALL["proxy_mispricing"]))
    assert t1.static.iloc[0] == pytest.approx(1.295228, abs=1e-6)
    assert t1.metro.iloc[0] == pytest.approx(1.000000, abs=1e-6)
    assert list(t1.columns) == ["B", "batch", "skew", "static", "uniform", "token_lp", "metro", "spread", "first_replica"]
    assert (t1["skew"] == 1.0).all()
    st = simulator.staleness(SMALL["staleness"])
    assert st[st.regime == "exact"].ratio_to_static.iloc[0] == pytest.approx(0.844095, abs=1e-6)
    eps = experiments.EXPERIMENTS["thm2_epsilon"](SMALL["thm2_epsilon"])
    assert eps.eps.iloc[0] == pytest.approx(0.065050, abs=1e-6)
    mixed = simulator.mixed_regime({"shape": "DSv3", "skew": 1.2, "tokens": [512], "batches": 2})
    assert "routing" not in mixed


def test_without_a_trace_configs_and_cache_keys_are_unchanged(build):
    from tempo.studies import cache

    cfg = dict(SMALL["thm2_epsilon"])
    assert with_trace(cfg, None) is cfg and with_trace(cfg, "") is cfg
    assert experiments.use_trace(None) == {}
    experiments.run("thm2_epsilon", cfg, "smoke")
    meta = json.loads((paths.results_dir("smoke") / "thm2_epsilon.meta.json").read_text())
    assert meta["config"] == cfg
    assert cache.key("thm2_epsilon", meta["config"]) == cache.key("thm2_epsilon", SMALL["thm2_epsilon"])


# ------------------------------------------------------------------ batches from the trace
def test_trace_routing_windows_placement_and_sizes(tmp_path):
    counts = _trace(tmp_path / "t.npz", steps=10, layers=3, experts=64)
    tr = TraceRouting(tmp_path / "t.npz")
    assert (tr.split, tr.n_layers, tr.n_experts, tr.top_k()) == (5, 3, 64, 8)
    # layers cycled over the steps after the history window, wrapping (with a warning) when the trace runs out
    assert tr.windows(4) == [(0, 5), (1, 5), (2, 5), (0, 6)]
    with pytest.warns(TraceWarning, match="25 of the 40 batches reuse a window"):
        assert len(tr.windows(40)) == 40 and tr.windows(40)[15] == tr.windows(40)[0]
    assert tr.windows(6, "time")[:6] == [(0, 5), (0, 6), (0, 7), (0, 8), (0, 9), (1, 5)]
    with pytest.raises(ValueError, match="timeline needs 16"):  # a timeline never wraps
        tr.windows(16, "time")
    # every batch: B tokens per GPU x 8 GPUs, top-8 distinct experts, only experts the step used
    insts = tr.batches(16, 6, 8, 1.25)
    for inst, (layer, step) in zip(insts, tr.windows(6)):
        assert inst.counts.sum() == 16 * 8 * 8 and inst.counts.max() <= 16 * 8
        assert np.all(inst.counts[counts[step, layer] == 0] == 0)
    # fresh placement from the history window: the history's hottest expert gets the most replicas
    reps = np.bincount(tr.placement(0, 8, 1.25), minlength=64)
    assert reps[np.argmax(counts[:5, 0].sum(axis=0))] == reps.max() > 1
    # drift-16: the placement is built from the corrupted history, so the hot expert loses its replicas
    stale = np.bincount(tr.placement(0, 8, 1.25, drift=16, seed=7), minlength=64)
    assert stale[np.argmax(counts[:5, 0].sum(axis=0))] == 1
    # seeded: the same trace and sizes give the same batches
    assert all(np.array_equal(a.counts, b.counts) for a, b in zip(insts, tr.batches(16, 6, 8, 1.25)))
    with pytest.raises(ValueError, match="history"):
        TraceRouting(tmp_path / "t.npz", history=1.0)


def test_scenario_experiments_draw_from_the_trace(tmp_path):
    _trace(tmp_path / "t.npz")
    for name, cfg in SMALL.items():
        syn = experiments.EXPERIMENTS[name](cfg)
        tr = experiments.EXPERIMENTS[name](with_trace(cfg, tmp_path / "t.npz"))
        if "routing" in tr:  # a study that keeps its synthetic rows: those are unchanged, the trace's follow
            pd.testing.assert_frame_equal(tr[tr.routing == "synthetic"].drop(columns="routing"), syn)
            tr = tr[tr.routing == "trace"].drop(columns="routing").reset_index(drop=True)
        assert syn.shape[1] == tr.shape[1]
        num = syn.select_dtypes("number").columns.difference(["B", "batch", "tokens_per_gpu", "scale", "skew"])
        assert not np.allclose(syn[num].to_numpy(float), tr[num].to_numpy(float)), name
    # the drift-16 scenario's batches hold the trace's experts, not the proxy's 256
    insts = scenarios.drift_batches(128, 3, trace=TraceRouting(tmp_path / "t.npz"))
    assert all(i.n_experts == 64 and i.counts.sum() == 128 * 8 for i in insts)
    # a study that keeps its synthetic grid adds the trace's rows beside it
    mixed = simulator.mixed_regime(with_trace({"shape": "DSv3", "skew": 1.2, "tokens": [512], "batches": 2},
                                              tmp_path / "t.npz"))
    assert mixed.routing.tolist() == ["synthetic"] * 2 + ["trace"] * 2


# ------------------------------------------------------------------ provenance and verdicts
def test_results_on_a_trace_name_it_and_its_claims_get_a_verdict(build):
    path = build / "trace.npz"
    _trace(path)
    assert experiments.routing_label() == "Routing: synthetic (no `TRACE` given to this build)."
    added = experiments.use_trace(path)
    assert added["trace_sha256"] == file_sha256(path) and added["trace_source"] == "test recording"
    assert experiments.routing_label().startswith("Routing: recorded routing trace (trace.npz, sha256 ")
    experiments.run("proxy_mispricing", {"concurrency": [128, 512, 1024], "batches": 3}, "smoke")
    experiments.run("staleness", SMALL["staleness"], "smoke")
    experiments.run("phase_diagram", {"shapes": ["DSv3"], "eps": [8], "skews": [0.0], "replications": [1.25],
                                      "tokens": [16], "batches": 1, "progress": False}, "smoke")
    meta = json.loads((paths.results_dir("smoke") / "proxy_mispricing.meta.json").read_text())
    assert meta["config"]["trace_sha256"] == file_sha256(path)
    assert meta["config"]["trace"] == str(path)
    # only the studies the paper runs on recorded routing take the trace
    phase_meta = json.loads((paths.results_dir("smoke") / "phase_diagram.meta.json").read_text())
    assert "trace" not in phase_meta["config"]

    led = claims.build_ledger("smoke", write=False).set_index("id")
    sha12 = file_sha256(path)[:12]
    for cid in ["t1_uniform_b128", "t1_metro_b128", "t1_static_b1024", "t1_tokenlp_b512", "t1_spread_b1024",
                "staleness_stale1"]:
        row = led.loc[cid]
        assert row.status in ("reproduced", "deviates"), (cid, row.status, row.note)
        assert row.evidence == "trace"
        assert row.provenance.startswith(f"recorded routing trace (trace.npz, sha256 {sha12}, test recording, model test-model")
    # a claim whose inputs this build did not compute on a trace still waits for one
    assert led.loc["t4_tempo_mixed"].status == "needs a recorded trace"
    assert "make notebook NB=04_3_placement TRACE=trace.npz" in led.loc["t4_tempo_mixed"].note


def test_table8_evidence_draws_table8s_batches_from_the_trace(build, monkeypatch):
    path = build / "trace.npz"
    _trace(path)
    experiments.use_trace(path)
    cfg = {"tokens": [128], "batches": 3}
    stages = experiments.run("drift16_stages", cfg, "smoke")
    forced = experiments.run("drift16_forced", cfg, "smoke")
    metas = [json.loads((paths.results_dir("smoke") / f"{n}.meta.json").read_text())["config"]
             for n in ("drift16_stages", "drift16_forced")]
    assert metas[0] == metas[1] and metas[0]["trace_sha256"] == file_sha256(path)
    assert forced[["B", "batch"]].values.tolist() == stages[["B", "batch"]].drop_duplicates().values.tolist()
    from tempo.studies import solver

    seen = []
    real = solver.drift_batches

    def recorded(*args, **kwargs):
        seen.append(kwargs.get("trace"))
        return real(*args, **kwargs)

    monkeypatch.setattr(solver, "drift_batches", recorded)
    solver.drift16_forced(metas[1])
    assert seen and all(t is not None and t.path == str(path) for t in seen)


def test_a_synthetic_trace_is_never_evidence(build):
    path = build / "demo.npz"
    counts, meta = synthetic_trace(10, 3, 64, 32, seed=1)
    write_trace(path, counts, **meta)  # source "synthetic"
    experiments.use_trace(path)
    assert "a **synthetic** trace, demo.npz" in experiments.routing_label()
    experiments.run("proxy_mispricing", {"concurrency": [128], "batches": 3}, "smoke")
    row = claims.build_ledger("smoke", write=False).set_index("id").loc["t1_uniform_b128"]
    assert row.status == "needs a recorded trace" and row.evidence == "synthetic"
    assert "synthetic trace (demo.npz" in row.note and "not evidence" in row.note


def test_claim_function_evidence_from_the_run_config(tmp_path):
    from tempo.book.claims.functions import trace_evidence

    path = tmp_path / "rec.npz"
    _trace(path)
    df = pd.DataFrame({"B": [128] * 3, "batch": [0, 1, 2], "uniform": [1.5, 1.4, 1.6]})
    fn = claims.REGISTRY["t1_uniform_b128"].fn
    df.attrs["meta"] = {"config": {"concurrency": [128]}}
    v = fn({"proxy_mispricing": df})
    assert v.evidence is None and v.ours == 1.5  # synthetic: the spec's evidence stands
    df.attrs["meta"] = {"config": with_trace({"concurrency": [128]}, path)}
    v = fn({"proxy_mispricing": df})
    assert v.evidence == "trace" and v.ours == 1.5
    assert v.provenance == (f"recorded routing trace (rec.npz, sha256 {file_sha256(path)[:12]}, "
                            "test recording, model test-model, 10 steps x 3 layers x 64 experts)")
    # inputs from two different traces: no single recording to name
    other = tmp_path / "other.npz"
    _trace(other, seed=9)
    a, b = df.copy(), df.copy()
    a.attrs["meta"] = {"config": trace_config(path)}
    b.attrs["meta"] = {"config": trace_config(other)}
    assert trace_evidence({"x": a, "y": b}, ["x", "y"]) == (None, None, None)


def test_every_trace_claim_is_wrapped_and_its_need_note_is_a_command():
    from tempo.book.claims.functions import TRACE_CLAIMS
    from tempo.book.claims.functions.trace import QWEN235_CLAIMS

    rows = {r["id"]: r for r in claims.claim_rows()}
    need_trace = {i for i, r in rows.items() if r["needs"] == "trace"}
    assert need_trace == set(TRACE_CLAIMS)
    for cid in TRACE_CLAIMS:
        assert getattr(claims.REGISTRY[cid].fn, "__wrapped__", None) is not None, cid
        note = claims.need_note(rows[cid])
        assert "--expert-distribution-recorder-mode per_pass" in note
        assert "python -m tempo import-trace" in note
        if cid in QWEN235_CLAIMS:  # the one recording that decides them, its shape and the command
            assert "Qwen3-235B-A22B" in note and "94 MoE layers, 128 experts" in note and "--top-k 8" in note
            assert "make book TRACE=qwen3-235b.npz" in note
            continue
        assert f"make notebook NB={rows[cid]['chapter']} TRACE=trace.npz" in note
        # the chapter's notebook takes the trace, and the claim's experiments use it
        nb = (paths.NOTEBOOKS / f"{rows[cid]['chapter']}.md").read_text()
        assert "trace_path = None" in nb and "use_trace" in nb
        assert set(claims.REGISTRY[cid].inputs) <= experiments.TRACE_EXPERIMENTS | {"trace_replay"}, cid


@pytest.mark.needs("torch")
def test_import_trace_records_top_k(tmp_path):
    import torch

    from tempo import cli
    from tempo.world.traces import read_trace

    lc = np.random.default_rng(0).integers(0, 50, size=(4, 2, 16))
    torch.save({"logical_count": torch.tensor(lc)}, tmp_path / "stat.pt")
    out = tmp_path / "t.npz"
    assert cli.main(["import-trace", str(tmp_path / "stat.pt"), "-o", str(out), "--model", "m", "--top-k", "6"]) == 0
    _, meta = read_trace(out)
    assert meta["top_k"] == 6 and meta["source"] == "sglang-recorder"
    assert TraceRouting(out).top_k() == 6
    assert cli.main(["import-trace", str(tmp_path / "stat.pt"), "-o", str(out), "--top-k", "0"]) == 2
