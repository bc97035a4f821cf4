import numpy as np
import pytest

from tempo.theory import bounds as theory
from tempo.studies import EXPERIMENTS
from tempo.studies.simulator import boundary_table, phase_cell
from tempo.world.workloads import zipf_popularity


def test_flip_boundary_is_a_fixed_point():
    p = zipf_popularity(256, 1.2, seed=0)
    reps = np.ones(256)
    B, avg, hot = theory.flip_boundary(p, reps, 156.0, 8, 8)
    assert B == pytest.approx(min(avg, hot))
    E_eff = theory.effective_replicas(p, reps, B, 8, 8)
    assert B == pytest.approx(min(156 * E_eff / 64, 156 * E_eff / (p.max() * 8 * 64)), rel=1e-6)
    # more skew moves the hot-expert mechanism in front
    B0, a0, h0 = theory.flip_boundary(zipf_popularity(256, 0.0), reps, 156.0, 8, 8)
    assert a0 < h0 and hot < avg


def test_effective_replicas_limits():
    p = np.full(4, 0.25)
    assert theory.effective_replicas(p, [1, 2, 1, 1], 0, 8, 8) == 0
    assert theory.effective_replicas(p, [1, 2, 1, 1], 1000, 8, 8) == pytest.approx(5)


def test_phase_cell_and_boundary_table():
    rows = [phase_cell({"shape": "DSv2-Lite", "ep": 8, "B": B, "skew": 1.0, "replication": 1.25, "batches": 1, "seed": 0})
            for B in (16, 2048)]
    for r in rows:
        assert r.winner.item() in {"M", "L", "E"}
        best = min(r.ms_metro.item(), r.ms_token_lp.item(), r.ms_uniform.item())
        assert r.ms_tempo.item() <= best / 0.99 + 1e-9        # Proposition 1 per cell
    import pandas as pd

    df = pd.concat([r.assign(shape="DSv2-Lite", ep=8, skew=1.0, replication=1.25, B=B) for r, B in zip(rows, (16, 2048))])
    bt = boundary_table(df, "DSv2-Lite", 8)
    assert len(bt) == 1 and bt.B_star.item() > 0


def test_mixed_regime_shares():
    df = EXPERIMENTS["mixed_regime"]({"shape": "DSv3", "skew": 1.2, "tokens": [16, 2048], "batches": 3})
    assert df.flat_expert_share.between(0, 1).all() and df.linear_token_share.between(0, 1).all()
    big = df[df.tokens_per_gpu == 2048].linear_token_share.mean()
    small = df[df.tokens_per_gpu == 16].linear_token_share.mean()
    assert big > small


def test_staleness_regimes_exact_is_best():
    df = EXPERIMENTS["staleness"]({"scales": {"1x": 256}, "batches": 3})
    med = df.groupby("regime").ratio_to_static.median()
    assert set(med.index) == {"exact", "stale-1", "frozen", "uniform"}
    assert med["exact"] <= min(med["stale-1"], med["frozen"], med["uniform"]) + 1e-9


def test_policy_landscape_rows():
    df = EXPERIMENTS["policy_landscape"]({"redundant": [64], "drift": [16], "scales": {"1x": 256}, "batches": 1})
    assert set(df.policy) == {"uniform", "token_lp", "metro", "llep", "tempo"}
    t = df.set_index("policy").ratio_to_static
    assert t["tempo"] <= t.drop("tempo").min() * 1.01      # regression check on this seeded batch


def test_phase_boundary_reads_the_phase_diagram_it_derives_from(tmp_path, monkeypatch):
    """phase_boundary is boundary_hits per seed of the phase diagram of the same config and
    reading, taken from the cache a phase_diagram run left (not recomputed)."""
    import pandas as pd

    from tempo import studies
    from tempo.core import paths
    from tempo.paper.readings import Reading
    from tempo.studies import simulator

    monkeypatch.setattr(paths, "BUILD", tmp_path / "build")
    cfg = {"shapes": ["DSv3"], "eps": [8], "skews": [0.0, 1.2], "replications": [1.25], "tokens": [16, 1024],
           "batches": 1, "seeds": [0, 1], "workers": 1, "progress": False}
    reading = Reading.paper(metro_order="descending_tokens")
    phase = studies.run("phase_diagram", cfg, "smoke", reading=reading)
    monkeypatch.setitem(studies.EXPERIMENTS, "phase_diagram", lambda config: pytest.fail("recomputed"))
    for r in (reading, reading.with_(hot_share="router_weight")):
        bounds = studies.run("phase_boundary", cfg, "smoke", reading=r)
        want = pd.concat([simulator.boundary_hits(phase[phase.seed == s], reading=r).assign(seed=s) for s in (0, 1)],
                         ignore_index=True)
        assert bounds.shape[0] == 4 and (bounds["shape"] == "DSv3").all() and (bounds.ep == 8).all()
        pd.testing.assert_frame_equal(bounds.drop(columns=["shape", "ep"]), want[bounds.columns.drop(["shape", "ep"])])
    meta = studies.registry.READINGS["phase_boundary"]
    assert set(meta) == set(studies.registry.READINGS["phase_diagram"]) | {"hot_share"}
