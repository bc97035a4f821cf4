"""Chapter 04's routing sections: the proxy router's calibration table and the recorded profiles
placed on the phase diagram by the max/mean statistic, with Section 3.2's flip boundary."""
import numpy as np
import pandas as pd
import pytest

from tempo.book.chapters import ch04_routing as r
from tempo.core.cost import CostModel
from tempo.studies import EXPERIMENTS
from tempo.world.profiles import PROFILES, profile


def test_flip_boundary_of_a_profile_is_section_3_2s_rule_on_its_shares():
    bd = r.profile_boundary("esft-dsv2lite")
    assert bd["shape"] == "DSv2-Lite" and bd["n_star"] == pytest.approx(CostModel.named("dsv2lite-offline").n_star)
    # at every layer all 80 replicas (64 experts x 1.25) are active near B*: B*_avg = n* E_eff / (K g)
    assert bd["B_star"] == pytest.approx(bd["n_star"] * 80 / (6 * 8), rel=1e-3)
    assert bd["B_star_min"] <= bd["B_star"] <= bd["B_star_max"]
    assert r.profile_boundary("dsv3-sglang-decode")["shape"] == "DSv3"


def _phase():
    rows = []
    for shape in ("DSv3", "DSv2-Lite"):
        for s in (0.0, 0.6, 1.2):
            for B, w in ((16, "M"), (128, "M"), (1024, "L")):
                rows.append({"shape": shape, "ep": 8, "skew": s, "replication": 1.25, "B": B, "winner": w, "seed": 0})
    return pd.DataFrame(rows)


def test_profiles_land_on_the_nearest_grid_column_of_their_shape():
    t = r.profiles_on_phase_diagram(_phase())
    assert list(t.index) == list(PROFILES)
    for name, row in t.iterrows():
        prof = profile(name)
        assert row["experts x top-k"] == f"{prof.n_experts} x {prof.top_k}"
        assert 0 < row["Zipf-equivalent skew"] < 1.0  # real routing is flatter than Zipf(1.0)
        assert row["grid column"] == min((0.0, 0.6, 1.2), key=lambda g: abs(g - row["Zipf-equivalent skew"]))
        assert row["winners along B (phase grid)"] == "16:M 128:M 1024:L"
    assert t.loc["esft-dsv2lite", "shape"] == "DSv2-Lite"


def test_mixed_side_by_side_and_the_text_from_it():
    m = pd.DataFrame({"tokens_per_gpu": [128, 128, 512, 512] * 2, "mixed": [True, False, True, True] * 2,
                      "routing": ["synthetic"] * 4 + ["trace"] * 4})
    tab = r.mixed_by_routing(m)
    assert tab.loc[128, "trace"] == 50 and tab.loc[512, "synthetic"] == 100
    numbers, words = r.real_routing_glue(r.profiles_on_phase_diagram(_phase()), tab, [0.0, 0.6, 1.2])
    assert words == {"real_grid_skews": "0, 0.6, 1.2", "real_mixed": "B = 128: 50% (synthetic 50%); B = 512: 100% (synthetic 100%)"}
    assert 0 < numbers["real_skew_lo"] <= numbers["real_skew_hi"] < 1 and numbers["real_zipf12_mm"] > numbers["real_mm_hi"]
    syn = r.mixed_by_routing(m[m.routing == "synthetic"].drop(columns="routing"))
    assert r.real_routing_glue(r.profiles_on_phase_diagram(_phase()), syn, [0.0])[1]["real_mixed"] == (
        "no recorded batches in this build")
    assert list(r.mixed_by_routing(m[m.routing == "synthetic"].drop(columns="routing")).columns) == ["synthetic"]


def test_calibration_experiment_rows():
    cal = EXPERIMENTS["proxy_calibration"]({"skews": [1.0, 2.5], "batches": 2})
    assert list(cal.kind) == ["grid", "grid", "calibrated: busiest GPU", "calibrated: mean over GPUs"]
    grid = cal[cal.kind == "grid"]
    assert grid.busiest_G.iloc[0] > grid.busiest_G.iloc[1]  # G falls with the skew
    assert (cal.mean_G <= cal.busiest_G + 1e-9).all()
    busiest = cal[cal.kind == "calibrated: busiest GPU"].iloc[0]
    assert 1.0 < busiest["skew"] < 2.5
    tab = r.calibration_table(cal)
    assert np.isfinite(tab["busiest-GPU G (mean)"]).all()
