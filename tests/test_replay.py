"""Replay studies: MoonEP, the SGLang recorder importer, trace replay, Table 10 refresh
schedules, B*_a2a, the comm-aware phase cell and tile-aware prefill search."""
import numpy as np
import pytest

import tempo
from tempo import CostModel, Instance
from tempo.studies import replay
from tempo.studies.simulator import phase_cell
from tempo.policies.moonep import moonep
from tempo.world.traces import read_trace, sglang_dump_counts, write_trace
from tempo.world.workloads import synthetic_trace


def _inst(seed=0, B=32):
    from tempo.studies.scenarios import zipf_batches
    return zipf_batches(128, 8, B, 1.0, 1.25, 1, seed=seed)[0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_moonep_balances_tokens_exactly_and_conserves(seed):
    inst = _inst(seed)
    res = moonep(inst)
    assert np.allclose(res.shares.sum(axis=1), inst.counts)
    assert res.shares.min() >= -1e-9
    N = res.shares.sum(axis=0)
    assert np.allclose(N, inst.counts.sum() / inst.n_gpus, atol=1e-6)
    # a copy is counted only where the receiver holds no replica and now serves the expert
    holds = np.zeros_like(res.shares, bool)
    for e in range(inst.n_experts):
        holds[e, inst.replica_gpu[e][inst.valid[e]]] = True
    served_remote = ((res.shares > 1e-9) & ~holds).sum(axis=0)
    assert np.array_equal(served_remote, res.fetched)


def test_moonep_charged_adds_ratio_times_b_per_copy():
    inst = _inst(3)
    model = CostModel.named("qwen3-235b-testbedb-tile")
    res = moonep(inst)
    free, charged = res.gpu_times(model, "free"), res.gpu_times(model, "charged", ratio=4.0)
    assert np.allclose(charged - free, 4.0 * model.b * res.fetched)
    with pytest.raises(ValueError, match="prefetch"):
        res.makespan(model, "sometimes")


def test_moonep_on_balanced_batch_moves_nothing():
    inst = Instance([10, 10, 10, 10], [[0], [1], [2], [3]], 4)
    res = moonep(inst)
    assert res.fetched.sum() == 0
    assert np.allclose(res.shares, np.diag([10.0] * 4))
    skewed = moonep(Instance([30, 10, 0, 0], [[0], [1], [2], [3]], 4))
    assert np.allclose(skewed.shares.sum(axis=0), 10.0)
    assert skewed.fetched.tolist() == [0, 0, 1, 1]  # GPUs 2 and 3 copy expert 0


def test_sglang_per_pass_dumps_sum_ranks_and_map_to_logical():
    p2l = np.array([[0, 1, 2, 0], [2, 1, 0, 1]])  # L=2, P=4 (expert 0 replicated on layer 0)
    r0 = {"records": [{"forward_pass_id": 5, "rank": 0, "global_physical_count": [[1, 2, 3, 4], [0, 1, 0, 2]]},
                      {"forward_pass_id": 6, "rank": 0, "global_physical_count": [[1, 0, 0, 0], [0, 0, 0, 0]]}],
          "last_physical_to_logical_map": p2l}
    r1 = {"records": [{"forward_pass_id": 5, "rank": 1, "global_physical_count": [[10, 0, 0, 1], [1, 0, 0, 0]]}],
          "last_physical_to_logical_map": p2l}
    c = sglang_dump_counts([r0, r1])
    assert c.shape == (2, 2, 3)
    assert c[0, 0].tolist() == [1 + 4 + 10 + 1, 2, 3]
    assert c[0, 1].tolist() == [0, 1 + 2, 1]
    assert c[1, 0].tolist() == [1, 0, 0]


def test_sglang_stat_dump_and_errors():
    lc = np.arange(24).reshape(2, 3, 4)
    assert np.array_equal(sglang_dump_counts({"logical_count": lc}), lc)
    with pytest.raises(ValueError, match="per_pass dumps"):
        sglang_dump_counts([{"foo": 1}])
    with pytest.raises(ValueError, match="disagree"):
        sglang_dump_counts([{"records": [], "last_physical_to_logical_map": [[0, 1]]},
                            {"records": [], "last_physical_to_logical_map": [[1, 0]]}])
    with pytest.raises(ValueError, match="shape"):
        sglang_dump_counts([{"records": [{"forward_pass_id": 0, "global_physical_count": [[1, 2, 3]]}],
                             "last_physical_to_logical_map": [[0, 1]]}])


def test_synthetic_trace_roundtrip(tmp_path):
    counts, meta = synthetic_trace(5, 2, 32, 16, top_k=4, n_gpus=4, seed=1)
    assert counts.shape == (5, 2, 32)
    assert np.all(counts.sum(axis=2) == 16 * 4 * 4)
    write_trace(tmp_path / "t.npz", counts, **meta)
    back, m = read_trace(tmp_path / "t.npz")
    assert np.array_equal(back, counts) and m["source"] == "synthetic"


def test_replay_trace_and_oracle_gap():
    counts, _ = synthetic_trace(6, 2, 64, 32, seed=2)
    df = replay.replay_trace(counts, CostModel.named("qwen3-30b-offline"), tokens_per_gpu=[32])
    assert set(df.policy) == set(replay.REPLAY_FIXED) | {"tempo"}
    assert len(df) == 3 * 2 * 5  # 3 replayed steps x 2 layers x 5 policies
    gap = replay.oracle_gap(df)
    mean = df.groupby(["layer", "B", "policy"]).makespan.mean().unstack()
    for _, r in gap.iterrows():
        row = mean.loc[(r.layer, r.B)]
        assert r.oracle == pytest.approx(row[list(replay.REPLAY_FIXED)].min())
        assert r.gap_pct == pytest.approx(100 * (1 - row["tempo"] / r.oracle))
    with pytest.raises(ValueError, match="warm-up"):
        replay.replay_trace(counts[:1], CostModel.named("qwen3-30b-offline"))


def test_refresh_schedules():
    counts = np.random.default_rng(0).integers(0, 50, size=(9, 16))
    init = np.repeat(np.arange(16), 1)[:16]
    init = np.concatenate([init, np.arange(4)])  # 20 slots over 4 GPUs
    never = replay._refreshed(init, counts, "never", 4, 1.25)
    assert all(p is init for p in never)
    w4 = replay._refreshed(init, counts, "W4", 4, 1.25)
    assert w4[3] is init and w4[4] is not init and w4[5] is w4[4] and w4[8] is not w4[4]
    cum = replay._refreshed(init, counts, "cum4", 4, 1.25)
    from tempo.world.placement import eplb_placement
    assert np.array_equal(cum[8], eplb_placement(counts[:8].sum(axis=0) + 1e-9, 4, 1.25))


def test_ba2a_formula_and_dominant_term():
    proxy = CostModel.named("proxy-serving")
    assert replay.ba2a(proxy, 13) == pytest.approx((16.4 + 2.99 * 13 - 25.0) / 0.10)
    assert round(replay.ba2a(proxy, 13)) == 303  # Section 5.13
    with pytest.raises(ValueError):
        replay.ba2a(CostModel.named("dsv3-offline"), 13)
    inst = Instance.full_replication([1] * 16 + [0] * 16, 2)
    d = tempo.solve(inst, proxy, "uniform")
    assert replay.dominant_term(proxy, inst, d) == "floor"
    big = Instance.full_replication([4000, 4000], 2)
    assert replay.dominant_term(proxy, big, tempo.solve(big, proxy, "tempo")) == "traffic"


def test_phase_cell_comm_kr_zero_changes_nothing():
    cell = {"shape": "DSv2-Lite", "ep": 8, "skew": 1.0, "replication": 1.25, "B": 64, "batches": 1, "seed": 0}
    plain = phase_cell(cell)
    comm = phase_cell({**cell, "comm_kr": 1e-9})
    assert comm.gain_comm_pct.iloc[0] == pytest.approx(plain.gain_pct.iloc[0], abs=1e-4)
    heavy = phase_cell({**cell, "comm_kr": 0.5})
    assert heavy.ms_tempo.iloc[0] == plain.ms_tempo.iloc[0]  # solving is unchanged, only scoring


def test_tile_prefill_aware_never_worse_than_blind():
    df = replay.tile_prefill({"pairs": [4096], "batches": 2, "shapes": ["DSv3"]})
    assert len(df) == 2 and df.cut_pct.min() >= -1e-6
    assert (df.uniform_extra_tiles_pct >= -1e-9).all()


def test_moonep_home_layout_puts_consecutive_experts_on_each_rank_without_replicas():
    from tempo.paper.readings import Reading
    from tempo.studies import readings

    inst = _inst(0)
    home = readings.moonep_home(inst, Reading.paper())
    assert home.replica_gpu.shape == (128, 1) and np.array_equal(home.replica_gpu[:, 0], np.arange(128) // 16)
    assert np.array_equal(home.counts, inst.counts)
    assert readings.moonep_home(inst, Reading.paper(moonep_home="eplb_first_replica")) is inst
    # no replicas: every expert a receiver serves away from its home is a copy
    res = moonep(home)
    away = (res.shares > 1e-9) & (np.arange(8)[None, :] != (np.arange(128) // 16)[:, None])
    assert np.array_equal(away.sum(axis=0), res.fetched)


def test_probe_suite_takes_one_gpu_instances_only_when_asked():
    from tempo.theory.bounds import probe_suite

    two = [inst.n_gpus for _, _, inst, _ in probe_suite(64)]
    one = [inst.n_gpus for _, _, inst, _ in probe_suite(64, min_gpus=1)]
    assert min(two) == 2 and min(one) == 1 and set(one) <= {1, 2, 4, 8, 16}
