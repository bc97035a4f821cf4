import pandas as pd
import pytest

from tempo.book import paper
from tempo.paper import claims_file, tables


def test_claims_yaml_is_complete_and_consistent():
    df = claims_file.claims()
    assert len(df) >= 60
    assert df.id.is_unique
    assert set(df.kind) <= set(claims_file.KINDS)
    assert set(df.needs.dropna()) <= {"trace", "gpu", "cluster"}
    for col in ["id", "section", "claim", "paper", "unit", "chapter"]:
        assert df[col].notna().all(), col
    # the Fig. 1b toy is in the ledger with the paper's numbers
    assert claims_file.claim_row("toy_tempo")["paper"] == 60


def test_paper_tables_load():
    for n in range(1, 12):
        assert len(tables.table(n)) > 0
    t1 = tables.table(1)
    assert t1[(t1.B == 128) & (t1.policy == "uniform")]["median"].item() == 1.51
    assert tables.text_number("fig1b", "token_lp_makespan") == 105
    with pytest.raises(ValueError):
        tables.table(12)


def test_side_by_side():
    p = pd.DataFrame({"B": [128, 512], "x": [1.0, 2.0]})
    o = pd.DataFrame({"B": [128, 512], "x": [1.1, 2.0]})
    s = tables.side_by_side(p, o, ["B"], "x")
    assert s["difference"].round(6).tolist() == [0.1, 0.0]


def test_number_returns_the_paper_as_printed_from_every_source():
    assert tables.number("thm2_eps_median") == "4.1"                    # claims.yaml
    assert tables.number("t8_full_b512") == "0.880"                     # trailing zero kept
    assert tables.number("tile_step") == "11-24"                        # a range
    assert tables.number("roofline/dsv3_expert_mb") == "44.0"           # text_numbers.csv
    assert tables.number("table8/+aug. chains/B512") == "0.940"         # a table cell
    assert tables.number("table6/DSv3/n_star") == "156"
    for bad, msg in [("no_such_claim", "unknown claim"), ("fig1b/nope", "no paper number"),
                     ("table8/nope/B512", "no row"), ("table99/x/y", "no paper table"), ("a/b/c/d", "key must be")]:
        with pytest.raises(ValueError, match=msg):
            tables.number(bad)


def test_glue_values_resolves_paper_keys_and_keeps_our_numbers():
    import numpy as np

    got = paper.glue_values(p="theorem2/tempo_worst_vs_opt", ours=np.float64(1.1675), n=np.int64(3))
    assert got == {"p": "1.14", "ours": 1.1675, "n": 3.0}
    with pytest.raises(ValueError, match="flag="):
        paper.glue_values(flag=True)


def test_glue_text_rejects_non_strings():
    with pytest.raises(ValueError, match="where="):
        paper.glue_text(where=3.0)


def test_claim_range_glues_both_ends():
    r = claims_file.claim_range("wc_b32_vs_eplb")
    assert r == {"p_wc_b32_vs_eplb_lo": claims_file.claim_row("wc_b32_vs_eplb")["paper"][0],
                 "p_wc_b32_vs_eplb_hi": claims_file.claim_row("wc_b32_vs_eplb")["paper"][1]}
    with pytest.raises(ValueError, match="not a range"):
        claims_file.claim_range("wc_within_best")
