"""Chapter 04's summary tables (tempo.book.chapters.ch04_simulator), on small frames with known answers."""
import numpy as np
import pandas as pd
import pytest

from tempo import CostModel
from tempo.paper import tables
from tempo.book.chapters import ch04_simulator as ch04
from tempo.studies import replay as rp


def test_mixed_and_mispricing_summaries():
    mixed = pd.DataFrame({"tokens_per_gpu": [16, 16], "mixed": [True, False], "flat_expert_share": [0.5, 0.7],
                          "linear_token_share": [0.2, 0.4]})
    m = ch04.mixed_summary(mixed).loc[16]
    assert (m.mixed_pct, m.flat_experts_pct, m.linear_tokens_pct) == (50.0, 60.0, 30.0)
    t1 = pd.DataFrame({"B": [128] * 5, **{p: [1.0, 1.1, 1.2, 1.3, 1.4] for p in ch04.T1_POLICIES}})
    s = ch04.mispricing_summary(t1).loc[128]
    assert s["uniform median"] == pytest.approx(1.2) and s["spread p95"] == pytest.approx(1.38)
    assert list(ch04.mispricing_summary(t1).columns[:2]) == ["static median", "static p95"]
    side = ch04.mispricing_paper(tables.table(1))
    assert list(side.columns) == ch04.T1_POLICIES and side.loc[1024, "static"] == pytest.approx(1.56)


def test_phase_scale_landscape_and_staleness_tables():
    phase = pd.DataFrame({"shape": ["A", "A", "B"], "replication": [1.25] * 3, "gain_pct": [1.0, 3.0, -0.5]})
    g = ch04.phase_gains(phase)
    assert g.loc[("A", 1.25), "max"] == 3.0 and g.loc[("A", 1.25), "mean"] == 2.0 and g.loc[("B", 1.25), "min"] == -0.5
    scale = pd.DataFrame({"skew": [0.0, 0.0], "ep": [8, 8], "gain_pct": [2.0, 4.0], "gain_comm_pct": [1.0, 5.0]})
    assert ch04.scale_gains(scale).loc[(0.0, 8)].tolist() == [3.0, 4.0, 3.0, 5.0]
    scale = pd.DataFrame({"skew": [0.0, 0.0, 1.2, 1.2], "ep": [8, 64, 8, 64], "B": [16, 16, 128, 128],
                          "gain_pct": [1.0, 2.0, 5.0, 15.0], "gain_comm_pct": [1.0, 2.5, 5.0, 15.0]})
    numbers, words = ch04.scale_glue(scale)
    assert numbers == {"sc_max": 15.0, "sc_comm": 0.5, "sc_s12_lo": 5.0, "sc_s12_hi": 15.0, "sc_s0_lo": 1.0, "sc_s0_hi": 2.0}
    assert words == {"sc_max_at": "s = 1.2, EP64, B = 128"}
    # the cell keys stay whole: 1.25x replication is never printed as 1.2
    bounds = pd.DataFrame({"seed": [0, 1], "shape": "DSv3", "ep": 8, "skew": [0.6, 0.6], "replication": [1.25, 1.25],
                           "B_star": [123.456, 1.0], "hit": [True, False]})
    bt = ch04.boundary_columns(bounds)
    assert len(bt) == 1 and bt.replication.iloc[0] == 1.25 and bt.B_star.iloc[0] == 123.5
    land = pd.DataFrame([{"redundant": R, "drift": 16, "scale": sc, "policy": p, "ratio_to_static": v}
                         for R in (16, 64) for sc, v in (("0.25x", 0.9), ("1x", 0.8), ("4x", 1.0))
                         for p in ch04.T4_ROWS])
    t4 = ch04.landscape_table(land)
    assert list(t4.index) == ch04.T4_ROWS and list(t4.columns) == ["0.25x", "1x", "4x"] and t4.loc["tempo", "1x"] == 0.8
    with pytest.raises(ValueError, match="redundant=32"):
        ch04.landscape_table(land, redundant=32)
    assert ch04.landscape_grid(land).shape == (2, 5)
    stale = pd.DataFrame({"scale": "1x", "regime": ["exact", "stale-1", "frozen", "uniform"] * 2,
                          "ratio_to_static": [0.8, 0.9, 1.0, 1.1, 0.6, 0.9, 1.0, 1.1]})
    assert ch04.staleness_table(stale).loc["1x"].tolist() == pytest.approx([0.7, 0.9, 1.0, 1.1])


def test_replay_tables():
    t10 = pd.DataFrame([{"B": B, "window": w, "policy": p, "refresh": r, "ratio": 1.0 + 0.1 * w}
                        for B in (128, 512) for w in range(3) for p, r in ch04.T10_LABELS])
    o = ch04.faster_eplb_table(t10)
    assert list(o.index) == list(ch04.T10_LABELS.values())
    assert list(o.columns) == ["B128_median", "B128_p95", "B512_median", "B512_p95"]
    assert o.loc["TEMPO + W4 refresh", "B512_median"] == pytest.approx(1.1)
    assert set(o.index) <= set(tables.table(10).policy)  # the paper's row labels
    moon = pd.DataFrame([{"baseline": "static", "tokens_per_gpu": 8, "policy": p, "change_pct": v}
                         for p, v in (("moonep_free", -5.0), ("moonep_charged", 300.0), ("token_lp", 1.0),
                                      ("tempo", -12.0), ("static", 0.0))])
    assert ch04.moonep_table(moon).loc[("static", 8)].tolist() == [-5.0, 300.0, 1.0, -12.0]
    tile = pd.DataFrame({"shape": "DSv3", "pairs_per_gpu": 4096, "changed": [True, False], "cut_pct": [4.0, 0.0],
                         "uniform_extra_tiles_pct": [3.0, 5.0]})
    tt = ch04.tile_table(tile).loc[("DSv3", 4096)]
    assert (tt.changed_pct, tt.cut_median_pct, tt.uniform_extra_tiles_pct) == (50.0, 2.0, 4.0)
    proxy = CostModel.named("proxy-serving")
    a2a = pd.DataFrame({"B": [256, 256, 256], "regime": ["floor", "floor", "traffic"], "ratio_to_static": [0.9, 0.95, 1.0],
                        "mean_G": [12.0, 13.0, 14.0]})
    t3 = ch04.ba2a_table(a2a, proxy).loc[256]
    assert t3.regime == "floor" and t3.block_ratio == 0.95 and t3.G_per_gpu == 13.0
    assert t3.N_star_at_G == pytest.approx(rp.ba2a(proxy, 13.0))


def test_mispricing_ordering_names_each_side_ends_and_compares_them():
    import pandas as pd

    from tempo.book.chapters.ch04_simulator import mispricing_ordering

    t1 = pd.DataFrame({"B": [128, 128, 512], "static": [1.2, 1.4, 1.5], "uniform": [1.6, 1.5, 1.1],
                       "token_lp": [1.2, 1.2, 1.0], "metro": [1.1, 1.0, 1.05], "spread": [9, 9, 9]})
    paper = pd.DataFrame({"B": [128] * 5 + [512] * 5, "policy": ["static", "uniform", "token_lp", "metro", "spread"] * 2,
                          "median": [1.17, 1.51, 1.17, 1.11, 1.37, 1.47, 1.12, 1.00, 1.05, 1.47]})
    got = mispricing_ordering(t1, paper)
    assert got.loc[128].tolist() == ["uniform", "metro", "uniform", "metro", True]      # medians 1.3/1.55/1.2/1.05
    assert got.loc[512].tolist() == ["static", "token_lp", "static", "token_lp", True]
    t1.loc[2, "uniform"] = 1.9
    assert not mispricing_ordering(t1, paper).loc[512, "same ordering ends"]


def test_paper_routing_stats_read_from_data():
    from tempo.world.workloads import routing_stats

    df = ch04.paper_routing_stats()
    assert {"gpu_max_over_mean", "max_over_mean", "flat_activation_share", "linear_token_share"} <= set(df.index)
    assert df.loc["flat_activation_share", "paper"] == "47%"
    tab = ch04.routing_stats_table({"w": routing_stats(np.array([[4, 2, 1, 1], [3, 2, 2, 1]]), 2)})
    assert list(tab.columns) == ["w", "paper", "paper setting"] and tab.loc[tab.index[2], "w"] == 0.5


def test_sizes_and_paper_numbers():
    assert ch04.sizes("gpu") == ch04.sizes("full") and ch04.sizes("smoke")["t10_windows"] == 17
    n = ch04.paper_numbers()
    assert n["p_oracle_lo"] <= n["p_oracle_hi"] and all(isinstance(v, (int, float)) for v in n.values())
    assert ch04.trace_note(None) == [] and len(ch04.trace_note("some.npz")) == 1


def test_the_numbers_and_words_the_pages_glue_both_ways():
    from tempo.studies.simulator import routing_statistics

    rstats = routing_statistics({"batches": 3})
    numbers, words = ch04.routing_glue(rstats)
    assert 0 < numbers["rt_hot_share"] <= 1 / 8 + 1e-9 < numbers["rt_hot_weight"]   # distinct top-8: at most 1/8
    assert numbers["rt_mm"] > 1 and numbers["rt_mm_proxy"] > 1 and words["rt_paper_mm"]
    assert list(ch04.routing_table(rstats).columns)[-2:] == ["paper", "paper setting"]
    mixed = pd.DataFrame({"tokens_per_gpu": [16, 512], "mixed": [False, True], "flat_expert_share": [0.5, 0.5],
                          "linear_token_share": [0.0, 0.5]})
    numbers, words = ch04.mixed_glue(mixed)
    assert words["mixed_where"] == "at every size except B = 16 (0% of its batches)"
    assert numbers == {"mixed_flat_b512": 50.0, "mixed_linear_b512": 50.0}
    partly = pd.concat([mixed, mixed.assign(tokens_per_gpu=32, mixed=[True, True])], ignore_index=True)
    partly.loc[len(partly)] = [32, False, 0.5, 0.1]                      # B = 32: 2 of 3 batches mixed
    assert ch04.mixed_glue(partly)[1]["mixed_where"] == ("at every size except B = 16 (0% of its batches), "
                                                         "B = 32 (67% of its batches)")
    assert ch04.mixed_glue(mixed.assign(mixed=True))[1]["mixed_where"] == "at every batch size of the ladder"
    assert np.isnan(ch04.mixed_glue(mixed[mixed.tokens_per_gpu == 16])[0]["mixed_flat_b512"])
    bt = pd.DataFrame({"skew": [0.0, 1.2], "replication": [1.25, 1.25], "band_lo": [64, 16], "band_hi": [128, 32],
                       "B_star": [100.0, 50.0], "mechanism": ["avg", "hot"], "hit": [True, False]})
    assert ch04.boundary_glue(bt) == ({"bd_hits": 1.0, "bd_columns": 2.0},
                                      {"bd_misses": "s = 1.2, 1.25x: B* = 50 against the band [16, 32] (above, hot mechanism)"})
    assert ch04.boundary_glue(bt.assign(hit=True))[1] == {"bd_misses": "none"}
    land = pd.DataFrame({"redundant": [16, 16], "drift": [16, 16], "policy": ["tempo", "uniform"], "ratio_to_static": [0.9, 1.0]})
    assert ch04.tight_glue(land) == {"tight_span": "span 0.900 to 1.000, so they do not collapse"}
    assert ch04.tight_glue(land.assign(ratio_to_static=1.0)) == {"tight_span": "span 1.000 to 1.000, a collapse as well"}
    assert "not computed in this profile" in ch04.tight_glue(land.assign(redundant=64))["tight_span"]
    st = pd.DataFrame({"exact": [0.8], "stale-1": [1.0], "frozen": [1.1], "uniform": [1.2]}, index=["1x"])
    numbers, words = ch04.staleness_glue(st)
    assert numbers == {"st_exact": 0.8, "st_stale1": 1.0, "st_frozen": 1.1, "st_uniform": 1.2}
    assert words == {"st_worse": "frozen, uniform", "st_exact_best": "the best", "st_keeps": "none"}
    st2 = pd.DataFrame({"exact": [0.9], "stale-1": [0.85], "frozen": [0.95], "uniform": [0.99]}, index=["1x"])
    assert ch04.staleness_glue(st2)[1] == {"st_worse": "none", "st_exact_best": "not the best", "st_keeps": "all"}
    st3 = st2.assign(**{"stale-1": 0.95})
    assert ch04.staleness_glue(st3)[1]["st_keeps"] == "only part"


def test_side_by_side_tables_and_their_prose():
    t10 = pd.DataFrame([{"B": B, "window": w, "policy": p, "refresh": r, "ratio": 1.0 + 0.1 * w}
                        for B in (128, 512) for w in range(3) for p, r in ch04.T10_LABELS])
    side = ch04.faster_eplb_side_by_side(t10)
    assert set(side.columns.get_level_values(0)) == {"paper", "this artifact"}
    numbers, words = ch04.faster_eplb_glue(t10)
    assert words == {"t10_verdict": "no better"} and numbers["t10_uni_128"] == pytest.approx(1.1)
    assert numbers["t10p_tempo_512"] == pytest.approx(float(tables.table(10).set_index("policy").loc[
        "TEMPO, never refresh", "B512_median"]))
    worse = t10.assign(ratio=np.where((t10.policy == "uniform") & (t10.refresh == "cum16"), 2.0, t10.ratio))
    assert ch04.faster_eplb_glue(worse)[1] == {"t10_verdict": "worse"}
    moon = pd.DataFrame([{"baseline": "static", "tokens_per_gpu": B, "policy": p, "change_pct": v}
                         for B in (8, 512) for p, v in (("moonep_free", -5.0), ("moonep_charged", 30.0),
                                                        ("token_lp", -5.0), ("tempo", -12.0))])
    numbers, words = ch04.moonep_glue(ch04.moonep_table(moon))
    assert (numbers["moon_free_lo"], numbers["moon_tempo_hi"], numbers["moon_charged_hi"]) == (5.0, 12.0, 30.0)
    assert words["moon_pre_free"] == words["moon_pre_lp"] == "-5.0" and words["moon_paper_charged"].startswith("+")
    proxy = CostModel.named("proxy-serving")
    a2a = pd.DataFrame({"B": [256, 256], "regime": ["floor", "floor"], "ratio_to_static": [0.9, 0.95], "mean_G": [12.0, 13.0]})
    t3 = ch04.ba2a_side_by_side(a2a, proxy)
    assert t3.loc[256, ("this artifact", "regime")] == "floor" and list(ch04.table3_measured().columns)[0] == "delta_w1_pct"
    cfg = ch04.trace_replay_config(None, ch04.sizes("smoke"))
    assert cfg == {"trace": None, "steps": 6, "layers": 2, "rescale": [64]}
    assert ch04.trace_source_glue(cfg) == {"tr_layers": "every layer"}
    assert ch04.trace_source_glue({**cfg, "max_layers": 2}) == {"tr_layers": "its first 2 layers"}


def test_ledger_boxes_paste_what_the_lectures_glue():
    """Each lecture's folded ledger boxes paste tables its cells glued under the same names."""
    import re

    from tempo.book.chapters.common import glue_tables
    from tempo.core import paths

    with pytest.raises(ValueError, match="identifier"):
        glue_tables(**{"not a name": pd.DataFrame()})
    for nb in ("04_1_routing", "04_2_phase_diagram", "04_3_placement"):
        text = (paths.NOTEBOOKS / f"{nb}.md").read_text()
        pasted = re.findall(r"^```\{glue\} (\w+)$", text, re.M)
        glued = re.findall(r"(\w+)=claims\.(?:sensitivity_)?view\(", text)
        assert pasted and sorted(pasted) == sorted(glued), nb
        assert "claims.view(" not in text.replace("=claims.view(", "")   # every claim view sits in a box


def test_staleness_chart_draws_one_bar_per_regime_and_scale():
    from tempo.book import figures

    stale = pd.DataFrame({"scale": ["1x"] * 8, "regime": ["exact", "stale-1", "frozen", "uniform"] * 2,
                          "ratio_to_static": [0.9, 0.95, 1.0, 1.1, 0.7, 0.85, 1.0, 1.1]})
    spec = figures.staleness_regimes(stale).to_dict()
    rows = [r for d in spec["datasets"].values() for r in d if "regime" in r]
    got = {r["regime"]: r["median / static"] for r in rows}
    assert got == pytest.approx({"exact": 0.8, "stale-1": 0.9, "frozen": 1.0, "uniform": 1.1})
    with pytest.raises(ValueError, match="staleness"):
        figures.staleness_regimes(stale.drop(columns="regime"))
