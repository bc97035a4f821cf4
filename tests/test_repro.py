"""The reproduction map (data/paper/repro_map.csv) and its page."""
import pandas as pd
import pytest

from tempo.book import repro
from tempo.paper import claims_file


def test_map_covers_every_table_figure_and_claim():
    df = repro.load_map()
    assert repro.check_map(df, claims_file.claims().id) == []
    assert set(repro.paper_items()) <= set(df.item)
    assert len(repro.paper_items()) == 24


def test_check_map_finds_gaps():
    df = repro.load_map()
    cut = df[df.item != "Table 2"].copy()
    cut.loc[cut.item == "Table 1", "claims"] += " no_such_claim"
    cut.loc[cut.item == "Figure 6", "section"] = "A heading nobody wrote"
    probs = repro.check_map(cut, claims_file.claims().id)
    assert "no row for Table 2" in probs
    assert "Table 1: unknown ledger id 'no_such_claim'" in probs
    assert any(p.startswith("Figure 6: 'A heading nobody wrote' is not a heading") for p in probs)
    assert "ledger id 't2_no_chains_max' is on no row of the map" in probs  # only Table 2 named it


def test_load_map_rejects_unknown_vocabulary(tmp_path):
    df = repro.load_map()
    df.loc[0, "needs"] = "tpu"
    bad = tmp_path / "m.csv"
    df.to_csv(bad, index=False)
    with pytest.raises(ValueError, match="unknown needs"):
        repro.load_map(bad)


def test_counts_add_up():
    df = repro.load_map()
    c = repro.counts(df)
    assert c["items"].sum() == len(df)
    assert (c[["computed on CPU (fully)", "computed on CPU (in part)", "quoted only"]].sum(axis=1) == c["items"]).all()
    # the serving tables and figures are hardware-only
    assert set(df[df.item.isin(["Table 5", "Table 11", "Figure 7", "Figure 8", "Figure 13"])].regenerated) == {"no"}


def test_slug_matches_sphinx_ids():
    assert repro.slug("The phase diagram (Fig. 6)") == "the-phase-diagram-fig-6"
    assert repro.slug("Where adaptive dispatch stops paying: B*_a2a (Section 5.13, Table 3)") == \
        "where-adaptive-dispatch-stops-paying-b-a2a-section-5-13-table-3"


def test_html_links_every_row():
    df = repro.load_map()
    page = repro.to_html(df)
    assert page.count("<tr>") == len(df) + 1
    assert 'href="04_2_phase_diagram.html#the-phase-diagram-fig-6"' in page
    assert "<script" not in page


def test_expected_h200_floor():
    e = repro.expected_floor("dsv3", "dsv3-offline", 4.8)
    assert e["roofline_us"] == pytest.approx(44.040192 / 4.8, rel=1e-6)   # 9.18 us
    assert (e["b_lo_us"], e["b_hi_us"]) == pytest.approx((10.368, 11.377), abs=1e-3)
    assert (e["nstar_lo"], e["nstar_hi"]) == pytest.approx((109.7, 120.4), abs=0.1)
    # on the paper's assumed 3.35 TB/s the range brackets the paper's own Qwen3-30B fit, b = 1.74 us
    q = repro.expected_floor("qwen3-30b", "qwen3-30b-offline", 3.35)
    assert q["b_lo_us"] < 1.74 < q["b_hi_us"]
