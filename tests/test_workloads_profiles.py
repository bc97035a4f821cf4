"""Routing from recorded popularity profiles, and the max/mean pair-share scale that places a
profile beside the Zipf workloads."""
import numpy as np
import pytest

from tempo import cli
from tempo.core import paths
from tempo.world import profiles, skew
from tempo.world.traces import read_trace
from tempo.world.workloads import (expected_loads, hottest_pair_share, popularity, route_counts, router_weights,
                                   sample_profile, synthetic_trace, zipf_popularity)


# ------------------------------------------------------------------ router weights from pair shares
def test_hottest_pair_share_is_expected_loads_of_the_hottest_expert():
    for E, k, s in [(256, 8, 1.0), (64, 6, 0.7), (16, 2, 0.5)]:
        p = zipf_popularity(E, s, seed=3)
        assert hottest_pair_share(p, k) == pytest.approx(expected_loads(p, k).max(), abs=1e-9)


def test_router_weights_reproduce_the_pair_shares():
    rng = np.random.default_rng(1)
    for E, k in [(64, 6), (32, 4)]:
        shares = rng.gamma(1.0, size=E)
        shares[3] = 0.0  # an expert the recording never routed to stays unrouted
        shares /= shares.sum()
        assert shares.max() < 1 / k
        w = router_weights(shares, k)
        assert w[3] == 0 and w.sum() == pytest.approx(1.0)
        assert np.allclose(expected_loads(w, k), shares, rtol=1e-6, atol=1e-12)
        # the hot experts need more weight than their share (their inclusion saturates)
        assert w[np.argmax(shares)] > shares.max()
    with pytest.raises(ValueError, match="1/top_k"):
        router_weights([0.3, 0.3, 0.2, 0.2], 4)
    with pytest.raises(ValueError, match="top_k=3 exceeds"):
        router_weights([0.5, 0.5, 0.0], 3)


# ------------------------------------------------------------------ the max/mean scale
def test_zipf_max_over_mean_and_its_inverse():
    # the number the library's synthetic default is known by: Zipf(1.0), 256 experts, top-8
    assert skew.zipf_max_over_mean(1.0, 256, 8) == pytest.approx(25.16, abs=0.01)
    assert skew.zipf_max_over_mean(1.0, 256, 8) == pytest.approx(
        256 * expected_loads(zipf_popularity(256, 1.0), 8).max(), rel=1e-8)
    assert skew.zipf_max_over_mean(0.0, 64, 6) == pytest.approx(1.0)
    for E, k, s in [(256, 8, 0.45), (256, 8, 1.3), (64, 6, 0.8)]:
        assert skew.zipf_equivalent_skew(skew.zipf_max_over_mean(s, E, k), E, k) == pytest.approx(s, abs=1e-5)
    assert skew.zipf_equivalent_skew(1.0, 64, 6) == pytest.approx(0.0, abs=1e-5)
    with pytest.raises(ValueError, match="ceiling"):
        skew.zipf_equivalent_skew(32.0, 256, 8)
    with pytest.raises(ValueError, match=">= 1"):
        skew.zipf_equivalent_skew(0.5, 256, 8)
    assert skew.max_over_mean([[1, 1, 1, 1], [4, 0, 0, 0]]).tolist() == [1.0, 4.0]


# ------------------------------------------------------------------ the shipped profiles
def test_the_profiles_are_the_shipped_traces_summed_with_router_weights_that_reproduce_them():
    for name, spec in profiles.PROFILES.items():
        prof = profiles.profile(name)
        counts, meta = read_trace(paths.TRACES / spec.trace)
        assert np.array_equal(prof.counts, counts.sum(axis=0)) and prof.top_k == meta["top_k"]
        assert prof.layers == tuple(meta["layers"]) and np.allclose(prof.weights.sum(axis=1), 1.0)
        layer = prof.n_layers // 2
        assert np.allclose(expected_loads(prof.weights[layer], prof.top_k), prof.shares()[layer], rtol=1e-6)
    assert (profiles.profile("esft-dsv2lite").counts.shape, profiles.profile("dsv3-sglang-decode").counts.shape) == \
        ((26, 64), (58, 256))
    with pytest.raises(ValueError, match="unknown routing profile 'zipf'"):
        profiles.profile("zipf")


def test_the_profiles_skew_statistics():
    """The per-layer max/mean pair share of the recordings (median, min, max over layers)."""
    mm = {n: skew.max_over_mean(profiles.profile(n).counts) for n in profiles.PROFILES}
    got = {n: (round(float(np.median(v)), 2), round(float(v.min()), 2), round(float(v.max()), 2)) for n, v in mm.items()}
    assert got == {"esft-dsv2lite": (2.76, 1.87, 3.42), "dsv3-sglang-decode": (5.37, 2.89, 10.36),
                   "dsv3-sglang-prefill": (6.51, 4.0, 13.47)}
    s = skew.profile_summary("esft-dsv2lite")
    assert s["max_over_mean_median"] == pytest.approx(2.76, abs=0.005)
    assert skew.zipf_max_over_mean(s["zipf_skew"], 64, 6) == pytest.approx(s["max_over_mean_median"], rel=1e-4)
    assert s["zipf_skew_min"] < s["zipf_skew"] < s["zipf_skew_max"] < 1.0


# ------------------------------------------------------------------ routing from a profile
def test_a_profile_name_is_taken_where_a_zipf_skew_is():
    assert np.array_equal(popularity(256, 1.2, seed=4), zipf_popularity(256, 1.2, seed=4))
    prof = profiles.profile("esft-dsv2lite")
    assert np.array_equal(popularity(64, "esft-dsv2lite", seed=27), prof.weights[27 % 26])
    assert np.array_equal(popularity(None, "esft-dsv2lite", layer=3), prof.weights[3])
    with pytest.raises(ValueError, match="has 64 experts, not n_experts=256"):
        popularity(256, "esft-dsv2lite")
    with pytest.raises(ValueError, match="unknown routing profile"):
        popularity(256, "dsv3")
    with pytest.raises(ValueError, match="skew must be a number or a routing profile"):
        popularity(256, None)
    # the router draws top-k distinct experts; the long-run pair shares are the recorded ones
    c = route_counts(popularity(64, "esft-dsv2lite", layer=5), 200_000, 6, rng=0)
    assert c.max() <= 200_000 and np.abs(c / c.sum() - prof.shares()[5]).max() < 0.002
    counts, meta = synthetic_trace(4, 3, 64, 16, top_k=6, n_gpus=8, skew="esft-dsv2lite", seed=1)
    assert counts.shape == (4, 3, 64) and meta["skew"] == "esft-dsv2lite" and meta["step_kind"] == "batch"


def test_sample_profile_cycles_layers_and_conserves_pairs():
    counts, layer = sample_profile("dsv3-sglang-decode", 16, 8, n_batches=5, seed=2, layers=[0, 57])
    assert counts.shape == (5, 256) and layer.tolist() == [0, 57, 0, 57, 0]
    assert np.all(counts.sum(axis=1) == 16 * 8 * 8) and counts.max() <= 16 * 8
    again, _ = sample_profile("dsv3-sglang-decode", 16, 8, n_batches=5, seed=2, layers=[0, 57])
    assert np.array_equal(counts, again)
    with pytest.raises(ValueError, match="layers must be indices"):
        sample_profile("dsv3-sglang-decode", 16, 8, layers=[58])


def test_skew_or_profile_argument_and_the_profiles_command(capsys):
    import argparse

    assert profiles.skew_or_profile("1.5") == 1.5 and profiles.skew_or_profile("esft-dsv2lite") == "esft-dsv2lite"
    for bad in ("-1", "nan", "zipf"):
        with pytest.raises(argparse.ArgumentTypeError):
            profiles.skew_or_profile(bad)
    assert cli.main(["routing-profiles"]) == 0
    out = capsys.readouterr().out
    assert "esft-dsv2lite" in out and "2.76 (1.87-3.42)" in out and "26 x 64" in out
