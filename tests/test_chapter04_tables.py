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


def test_the_prose_the_chapter_writes_from_data():
    from tempo.studies.simulator import routing_statistics

    rstats = routing_statistics({"batches": 3})
    assert "Under top-8 routing" in ch04.routing_text(rstats) and "ShareGPT" in ch04.concentration_text(rstats)
    assert list(ch04.routing_table(rstats).columns)[-2:] == ["paper", "paper setting"]
    mixed = pd.DataFrame({"tokens_per_gpu": [16, 512], "mixed": [False, True], "flat_expert_share": [0.5, 0.5],
                          "linear_token_share": [0.0, 0.5]})
    text = ch04.mixed_text(mixed, [16, 512])
    assert text.startswith("Every batch is mixed at every size except B = 16 tokens per GPU, where 0% of the batches are")
    assert "a batch of 128 tokens" in text
    partly = pd.concat([mixed, mixed.assign(tokens_per_gpu=32, mixed=[True, True])], ignore_index=True)
    partly.loc[len(partly)] = [32, False, 0.5, 0.1]                      # B = 32: 2 of 3 batches mixed
    assert ch04.mixed_text(partly, [16, 32, 512]).startswith("Every batch is mixed at every size except B = 16, 32 tokens "
                                                             "per GPU, where 0%, 67% of the batches are")
    assert ch04.mixed_text(mixed.assign(mixed=True), [512]).startswith("Every synthetic batch is mixed")
    bt = pd.DataFrame({"skew": [0.0, 1.2], "replication": [1.25, 1.25], "band_lo": [64, 16], "band_hi": [128, 32],
                       "B_star": [100.0, 50.0], "mechanism": ["avg", "hot"], "hit": [True, False]})
    assert ch04.boundary_text(bt).startswith("The boundary lands inside the observed flip band in 1 of 2 columns here. "
                                             "Misses: s = 1.2, 1.25x: B* = 50 vs band [16, 32] (above, hot mechanism).")
    land = pd.DataFrame({"redundant": [16, 16], "drift": [16, 16], "policy": ["tempo", "uniform"], "ratio_to_static": [0.9, 1.0]})
    assert ch04.tight_text(land).endswith("0.900 to 1.000, so they do not collapse on our synthetic batches.")
    assert ch04.tight_text(land.assign(redundant=64)) == "R = 16 is not run in this profile."
    st = pd.DataFrame({"exact": [0.8], "stale-1": [1.0], "frozen": [1.1], "uniform": [1.2]}, index=["1x"])
    text = ch04.staleness_text(st, rstats)
    assert "Worse than static here: frozen, uniform" in text and "keeps none of the exact gain" in text


def test_side_by_side_tables_and_their_prose():
    t10 = pd.DataFrame([{"B": B, "window": w, "policy": p, "refresh": r, "ratio": 1.0 + 0.1 * w}
                        for B in (128, 512) for w in range(3) for p, r in ch04.T10_LABELS])
    side = ch04.faster_eplb_side_by_side(t10)
    assert set(side.columns.get_level_values(0)) == {"paper", "this artifact"}
    assert "here the refresh makes it no better" in ch04.faster_eplb_text(t10)
    moon = pd.DataFrame([{"baseline": "static", "tokens_per_gpu": B, "policy": p, "change_pct": v}
                         for B in (8, 512) for p, v in (("moonep_free", -5.0), ("moonep_charged", 30.0),
                                                        ("token_lp", -5.0), ("tempo", -12.0))])
    text = ch04.moonep_text(ch04.moonep_table(moon))
    assert text.startswith("At decode, free prefetch gains 5.0 to 5.0% and TEMPO 12.0 to 12.0%") and "([-5.0] vs [-5.0] %)" in text
    proxy = CostModel.named("proxy-serving")
    a2a = pd.DataFrame({"B": [256, 256], "regime": ["floor", "floor"], "ratio_to_static": [0.9, 0.95], "mean_G": [12.0, 13.0]})
    t3 = ch04.ba2a_side_by_side(a2a, proxy)
    assert t3.loc[256, ("this artifact", "regime")] == "floor" and list(ch04.table3_measured().columns)[0] == "delta_w1_pct"
    cfg = ch04.trace_replay_config(None, ch04.sizes("smoke"))
    assert cfg == {"trace": None, "steps": 6, "layers": 2, "rescale": [64]}
    assert ch04.trace_source_text(cfg).startswith("Trace source: **synthetic** (no `TRACE` given).")
